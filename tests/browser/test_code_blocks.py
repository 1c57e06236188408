"""Issue 14, "What to build" item 2 (the code part), in a real browser: fenced code in a
reply is highlighted on the server (Pygments classes; colours from static/highlight.css that
follow the light or dark colour scheme), each block has a working Copy button, and a long
tool output is collapsed behind "Show all N lines". Desktop and 390×844, light and dark; the
page raises no Content-Security-Policy violation while doing it."""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import logged_in
from tests.browser.conftest import send_message

pytestmark = pytest.mark.browser

CODE = 'def greet(name):\n    return f"hello {name}"  # <b>not bold</b>'
RULES = [
    {"tool_result": "exit code 0", "text": f"Here it is:\n\n```python\n{CODE}\n```\n\nEND."},
    {"user": "count and code",
     "tool_calls": [{"name": "terminal", "input": {"command": "seq 1 200"}}]},
]
WATCH = """window.__csp = []; document.addEventListener('securitypolicyviolation',
  (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""
KEYWORD = {"light": "rgb(0, 128, 0)", "dark": "rgb(255, 123, 114)"}
"""The colour of a keyword (.k) in Pygments' default and github-dark styles."""


@pytest.fixture(scope="module")
def chat(server, browser):
    """One session with the reply and the tool output, made once; returns its URL."""
    url, sim_url, password = server
    httpx.post(f"{sim_url}/_sim/script", json={"rules": RULES},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()
    context, page = logged_in(browser, url, "demo", password)
    page.click("#new-session")
    page.wait_for_selector("#composer-text")
    send_message(page, "count and code")
    # Live: the block that arrived over the socket (replacing the streamed text) is
    # highlighted and gets its button.
    page.wait_for_selector(".markdown pre code span.k", timeout=30_000)
    page.wait_for_selector(".markdown .code-block .copy-code")
    chat_url = page.url
    context.close()
    return chat_url


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [{"width": 1200, "height": 900},
                                      {"width": 390, "height": 844}], ids=["desktop", "phone"])
def test_code_is_highlighted_copyable_and_long_output_collapsed(server, browser, chat, scheme,
                                                               viewport):
    url, _sim, password = server
    context = browser.new_context(viewport=viewport, color_scheme=scheme)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
    page = context.new_page()
    page.add_init_script(WATCH)
    page.goto(f"{url}/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    try:
        page.goto(chat)
        keyword = page.locator(".markdown pre code span.k").first
        assert keyword.inner_text() == "def"
        assert keyword.evaluate("(el) => getComputedStyle(el).color") == KEYWORD[scheme]
        assert "<b>" in page.locator(".markdown pre code").inner_text()  # escaped, as text
        page.click(".copy-code")
        page.wait_for_selector(".copy-code:text-is('Copied')")
        assert page.evaluate("() => navigator.clipboard.readText()") == CODE
        # The 200-line output: collapsed inside its (opened) card, then shown in full.
        card = page.locator(".tool-card").first
        card.locator("summary").click()
        output = card.locator(".tool-output pre")
        more = card.locator(".show-more")
        assert more.inner_text() == "Show all 201 lines"
        collapsed = output.bounding_box()["height"]
        assert collapsed < 220
        more.click()
        assert output.bounding_box()["height"] > 3 * collapsed
        assert more.inner_text() == "Show less"
        assert page.evaluate("() => document.scrollingElement.scrollWidth <= innerWidth")
        assert page.evaluate("() => window.__csp") == []
    finally:
        context.close()
