"""Issue 8, finding 8 in a real browser: a page served from another port of the same host
(the user's cookies go along: cookies are per host, not per port) tries to open the user's
chat socket on the embedded server and read the session. The handshake is refused; the
pure decision and the ASGI stack are tested in tests/security/test_web_origin.py."""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.browser.conftest import embedded_server, free_port, logged_in


# --- a real browser on another port of the same host -----------------------------------------
ATTACK_PAGE = b"""<!doctype html><title>another port</title><body>
<script>
window.result = new Promise((resolve) => {
  const ws = new WebSocket(document.location.hash.slice(1));
  const frames = [];
  ws.onopen = () => ws.send(JSON.stringify({type: "hello", last_seq: 0}));
  ws.onmessage = (e) => frames.push(e.data);
  ws.onclose = (e) => resolve({opened: frames.length > 0 || ws.__opened === true,
                               code: e.code, frames});
  ws.addEventListener("open", () => { ws.__opened = true; });
  setTimeout(() => resolve({opened: ws.__opened === true, timeout: true, frames}), 8000);
});
</script>"""


class AttackHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(ATTACK_PAGE)

    def log_message(self, *args):
        pass


@pytest.mark.browser
def test_page_on_another_port_cannot_open_the_socket(tmp_path, browser):
    with embedded_server(tmp_path) as (url, _sim, password):
        context, page = logged_in(browser, url, "demo", password)
        page.click("#new-session")
        page.wait_for_url(f"{url}/sessions/*/")
        session_path = page.url.removeprefix(url)
        # The user's own page opens its socket (the control).
        page.wait_for_function("() => document.getElementById('banner').hidden")
        attacker = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), AttackHandler)
        threading.Thread(target=attacker.serve_forever, daemon=True).start()
        try:
            evil = context.new_page()
            ws_url = url.replace("http://", "ws://") + "/ws" + session_path
            evil.goto(f"http://127.0.0.1:{attacker.server_address[1]}/#{ws_url}")
            result = evil.evaluate("() => window.result")
            assert result["opened"] is False, result
            assert result["frames"] == []
        finally:
            attacker.shutdown()
            context.close()
