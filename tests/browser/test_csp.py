"""The Content-Security-Policy in a real browser (issue 8, finding 10): every page is sent
the policy (django-csp, hermes_web/settings.py), the pages work under it (no inline script
or handler left: the rewind confirmation runs from static/app.js), and the browser reports
no violation on the chat page through a whole turn, nor on the other pages. A reply holding
a Markdown image on another host renders as a link and the browser never fetches it."""

from __future__ import annotations

import http.server
import threading

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import free_port, logged_in, send_message, wait_for_chat

pytestmark = pytest.mark.browser

WATCH_VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


class CountingHandler(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802
        CountingHandler.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()

    def log_message(self, *args):
        pass


def watched_page(context):
    """A page that records CSP violations (event listener + console) from its first byte."""
    page = context.new_page()
    page.add_init_script(WATCH_VIOLATIONS)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text)
            if "Content Security Policy" in m.text else None)
    page.on("dialog", lambda d: d.accept())
    return page, console


def violations(page, console) -> list[str]:
    return page.evaluate("() => window.__csp") + console


def test_csp_header_and_no_violation_on_the_chat_page(server, browser):
    url, sim_url, password = server
    exfil = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), CountingHandler)
    threading.Thread(target=exfil.serve_forever, daemon=True).start()
    leak = f"http://127.0.0.1:{exfil.server_address[1]}/leak.png?secret=s3cr3t"
    rules = [{"user": "show me a picture",
              "text": f"Here is the **picture**:\n\n![the picture]({leak})\n\nDone.",
              "token_delay": 0.002}]
    httpx.post(f"{sim_url}/_sim/script", json={"rules": rules},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()
    context, _ = logged_in(browser, url, "demo", password)
    page, console = watched_page(context)
    try:
        response = page.goto(f"{url}/")
        policy = response.headers["content-security-policy"]
        for directive in ("default-src 'self'", "script-src 'self'", "img-src 'self'",
                          "style-src 'self'", "object-src 'none'", "frame-ancestors 'none'"):
            assert directive in policy, policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        page.fill(".search-form input[name=q]", "nothing")  # htmx search-as-you-type, CSP on
        page.wait_for_selector("#session-rows >> text=No session titles match")
        page.click("#new-session")
        page.wait_for_selector("#composer-text")
        assert "script-src 'self'" in httpx.get(page.url, cookies={
            c["name"]: c["value"] for c in context.cookies()}).headers[
            "content-security-policy"]
        page.wait_for_function("() => document.getElementById('banner').hidden")
        send_message(page, "show me a picture")
        page.wait_for_selector("#transcript .msg-assistant >> text=Done.", timeout=30_000)
        page.wait_for_selector("#turn-status[data-state=idle]", timeout=30_000)
        link = page.locator("#transcript a.image-link")
        assert link.inner_text() == "image: the picture"
        assert page.locator("#transcript img").count() == 0
        page.reload()  # the server-rendered transcript too
        # The rewind button's confirm handler is bound by the deferred scripts: a click
        # before they ran posted nothing the test could see (a CI flake on a loaded host).
        wait_for_chat(page)
        assert page.locator("#transcript a.image-link").count() == 1
        assert page.locator("#transcript img").count() == 0
        # The rewind confirmation (moved out of an inline onsubmit) still asks and works.
        page.click(".chat-actions form[action$='/rewind/'] button")
        page.wait_for_function("() => [...document.querySelectorAll('.flash li')].some("
                               "(li) => li.textContent.includes('Took back'))")
        assert violations(page, console) == []
        for path in ("/search/?q=picture", "/settings/", "/approvals/"):
            page.goto(f"{url}{path}")
            assert violations(page, console) == [], path
        assert CountingHandler.hits == [], "the image on another host was fetched"
    finally:
        exfil.shutdown()
        context.close()
