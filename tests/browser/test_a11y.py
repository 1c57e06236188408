"""Accessibility (issue 14 item 9): axe-core (from npm, tests/browser/package.json, installed
by `make install`) run inside Debian's chromium on every main page, light and dark, desktop
and 390×844: no serious or critical violation. Also keyboard basics: a skip link, visible
focus, the streamed turn status announced politely.

axe is injected with Playwright (the app's Content-Security-Policy forbids inline scripts,
so the test context bypasses it; the pages themselves are unchanged). Screenshots of each
page and scheme go to var/screenshots/.
"""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import ROOT, click_new_session, embedded_server, logged_in, send_message

pytestmark = pytest.mark.browser

AXE = ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "var" / "screenshots"
WAIT = 30_000
PAGES = {
    "sessions": "/",
    "archived": "/?archived=1",
    "search": "/search/?q=README",
    "settings": "/settings/",
    "spend": "/spend/",
    "approvals": "/approvals/",
    "rules": "/approvals/rules/",
    "password": "/settings/password/",
    "people": "/people/",
}
RULES = [
    {"tool_result": "README", "text": "The README says:\n\n```python\nprint('hi')\n```\n\n"
                                      "| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done"},
    {"user": "list the files", "text": "Listing.",
     "tool_calls": [{"name": "terminal", "input": {"command": "ls -la"}},
                    {"name": "read_file", "input": {"path": "README.md"}}]},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("hermes-a11y")) as running:
        httpx.post(f"{running[1]}/_sim/script", json={"rules": RULES},
                   headers=sim_headers(running[1]), timeout=10).raise_for_status()
        yield running


@pytest.fixture(scope="module")
def chat_path(server, browser):
    """A session with a finished turn: messages, tool cards, code, a table, a usage line."""
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password)
    click_new_session(page)
    page.wait_for_selector("#composer-text")
    send_message(page, "list the files and read README.md")
    page.wait_for_selector(".usage", timeout=WAIT)
    path = page.url[len(url):]
    context.close()
    return path


def serious(page) -> list[str]:
    """Serious or critical axe violations on the page, one line each."""
    assert AXE.exists(), f"{AXE} is missing: run `make install` (npm install axe-core)"
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' @ ' +
                 v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
    }""")
    return result


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [{"width": 1400, "height": 900}, {"width": 390, "height": 844}],
                         ids=["desktop", "phone"])
def test_no_serious_axe_violation_on_any_main_page(server, browser, chat_path, scheme, viewport):
    url, _, password = server
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = "desktop" if viewport["width"] > 500 else "phone"
    anon = browser.new_context(viewport=viewport, color_scheme=scheme, bypass_csp=True)
    login = anon.new_page()
    login.goto(f"{url}/login/")
    found = {"login": serious(login)}
    login.screenshot(path=str(SHOTS / f"login-{size}-{scheme}.png"))
    anon.close()

    context = browser.new_context(viewport=viewport, color_scheme=scheme, bypass_csp=True)
    page = context.new_page()
    page.goto(f"{url}/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    page.goto(f"{url}/settings/")
    team_path = page.get_attribute("a[href*='/members/']", "href")
    for name, path in {**PAGES, "team": team_path, "chat": chat_path}.items():
        page.goto(url + path)
        if name == "chat":
            page.wait_for_selector(".file-tree")
            for summary in page.locator(".tool-card > summary").all():
                summary.click()
            page.click("#gauge > summary")
        found[name] = serious(page)
        page.screenshot(path=str(SHOTS / f"{name}-{size}-{scheme}.png"), full_page=True)
    if size == "phone":  # the drawer open, too
        page.click("#sidebar-toggle")
        page.wait_for_function("() => document.body.classList.contains('drawer-open')")
        found["drawer"] = serious(page)
    context.close()
    assert {k: v for k, v in found.items() if v} == {}


def test_keyboard_skip_link_focus_ring_and_polite_status(server, browser, chat_path):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.goto(url + chat_path)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert page.is_visible(".skip-link")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.focus("#send-button")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    assert page.get_attribute("#turn-status", "aria-live") == "polite"
    context.close()
