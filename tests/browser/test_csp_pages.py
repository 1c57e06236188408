"""No CSP violation on the main pages as a fresh user meets them (a user's finding: inline
style violations in the console). The policy is django-csp's (hermes_web/settings.py, no
'unsafe-inline'); this opens each page in chromium with a listener for
`securitypolicyviolation` installed before the first byte, and also fails on any console
message about the Content Security Policy.

Pages: the session list (empty, then with a session), a session page with a turn that ran
tools and one waiting on an approval card (live and after a reload, with the cards, gauge
and model picker opened), Settings, the spend (usage) page, the approvals queue holding the
pending card, Memory, Schedules, Webhooks, Search, the 404 page, and Django's CSRF failure
page (a login form left open in another tab), whose built-in version has an inline <style>.
The templates are also checked as text: no style attribute and no <style> element anywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.conftest import ROOT, embedded_server, logged_in, send_message

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber} ${e.sample}`);
});
"""
CSP_CONSOLE = re.compile(r"Content Security Policy|Refused to (apply|load|execute)", re.I)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Embedded mode on the local backend, so `rm -rf build` asks for an approval."""
    with embedded_server(tmp_path_factory.mktemp("hermes-csp-pages"),
                         env_extra={"HERMES_BACKEND": "local"}) as running:
        yield running


def watch(page) -> list[str]:
    """Record CSP violations on ``page`` from its first byte; returns the console list the
    page's CSP messages are appended to (the events are read with ``seen``)."""
    page.add_init_script(WATCH)
    console: list[str] = []
    page.on("console", lambda m: console.append(f"console {m.type}: {m.text}")
            if CSP_CONSOLE.search(m.text) else None)
    page.on("dialog", lambda d: d.accept())
    page.set_default_timeout(WAIT_MS)
    return console


def seen(page, console) -> list[str]:
    return page.evaluate("() => window.__csp || []") + console


def open_everything(page) -> None:
    """Open what a user clicks open on the session page (each may draw new elements); the
    popovers last, as they cover what is under them."""
    page.locator(".msg-user .msg-edit summary").first.click()
    for selector in (".tool-card summary", "#gauge summary", "#model-picker summary"):
        for summary in page.locator(selector).all():
            summary.click()


def test_no_csp_violation_on_the_main_pages(server, browser):
    url, _, password = server
    context, page = logged_in(browser, url, "demo", password)
    page.close()
    page = context.new_page()
    console = watch(page)
    try:
        response = page.goto(f"{url}/")
        assert "'unsafe-inline'" not in response.headers["content-security-policy"]
        assert "style-src 'self'" in response.headers["content-security-policy"]
        assert seen(page, console) == [], "session list (empty)"

        page.click("#new-session")
        page.wait_for_selector("#composer-text")
        send_message(page, "list the files and read README.md")
        page.wait_for_selector(".usage")  # the turn ran terminal and read_file and ended
        assert page.locator(".tool-card[data-status=done]").count() == 2
        send_message(page, "run rm -rf build")
        page.wait_for_selector(".approval-card")
        page.wait_for_selector("#turn-status[data-state=awaiting_approval]")
        open_everything(page)
        assert seen(page, console) == [], "session page, live"
        session_url = page.url
        page.reload()
        page.wait_for_selector(".approval-card")
        open_everything(page)
        assert seen(page, console) == [], "session page, reloaded"

        for path in ("/", "/settings/", "/spend/", "/approvals/", "/memory/", "/schedules/",
                     "/webhooks/", "/search/?q=README", "/no-such-page/"):
            page.goto(f"{url}{path}")
            page.wait_for_load_state("load")
            if path == "/approvals/":
                assert page.locator(".approval-card").count() >= 1
            if path == "/spend/":
                assert "$" in page.inner_text("main")
            assert seen(page, console) == [], path
        page.goto(session_url)
        page.fill("#composer-text", "anything")  # the htmx search box and composer, CSP on
        page.fill("#sidebar-q", "list")
        page.wait_for_timeout(500)
        assert seen(page, console) == [], "session page, typing"
    finally:
        context.close()

    # A login form left open in another tab: submitting it after logging in elsewhere is
    # Django's CSRF failure page (ours, not the built-in one with its inline <style>).
    context = browser.new_context()
    stale, fresh = context.new_page(), context.new_page()
    console = watch(stale)
    try:
        stale.goto(f"{url}/login/")
        fresh.goto(f"{url}/login/")
        fresh.fill("#id_username", "demo")
        fresh.fill("#id_password", password)
        fresh.click("button[type=submit]")
        fresh.wait_for_url(f"{url}/")
        stale.fill("#id_username", "demo")
        stale.fill("#id_password", password)
        with stale.expect_response(lambda r: r.request.method == "POST") as posted:
            stale.click("button[type=submit]")
        assert posted.value.status == 403
        stale.wait_for_selector("#csrf-failure")
        assert "That form had expired" in stale.inner_text("main")
        assert seen(stale, console) == [], "CSRF failure page"
    finally:
        context.close()


STYLE_IN_HTML = re.compile(r"""<style\b|\sstyle\s*=""", re.I)
COMMENT = re.compile(r"{#.*?#}|{% comment %}.*?{% endcomment %}", re.S)
"""Template comments (they may name <style> to say why there is none) are not markup."""


def test_no_template_carries_inline_style():
    """What the browser test cannot reach (the 500 page, rarely drawn partials): no template
    has a style attribute or a <style> element, which style-src 'self' refuses. Setting
    element.style from static/*.js is allowed by CSP and not matched here."""
    paths = sorted({*Path(ROOT).glob("templates/**/*.html"),
                    *Path(ROOT).glob("*/templates/**/*.html")})
    assert len(paths) > 30  # the scan found the templates
    offenders = [f"{path.relative_to(ROOT)}:{number}"
                 for path in paths if ".venv" not in path.parts
                 for number, line in enumerate(
                     COMMENT.sub("", path.read_text()).splitlines(), 1)
                 if STYLE_IN_HTML.search(line)]
    assert offenders == []
