"""Issue 8, finding 8: cross-site websocket hijacking from another port. The origin check
compared host names only, so a page on http://127.0.0.1:9999 opened the user's socket on
http://127.0.0.1:8000 (their cookie goes along: cookies are per host, not per port) and read
the session and drove the agent. Now the whole origin (scheme, host, port) must match.

Three layers: the pure decision (agents/origin.py, exhaustively with hypothesis), the real
ASGI websocket stack (hermes_web.asgi), and (tests/browser/test_origin.py) a real browser
on a page served from another port of the same host, against the embedded server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.origin import origin_allowed, origin_parse
from sessions.services import session_create
from tests.security.web_sockets import (APPS, communicator, cookie_for, memory_layer,  # noqa: F401
                                        run)

hosts = st.sampled_from(["127.0.0.1", "localhost", "example.com", "[::1]", "hermes.local"])
ports = st.integers(min_value=1, max_value=65535)


@given(host=hosts, port=ports, other=ports)
def test_only_the_same_port_is_allowed(host, port, other):
    origin = f"http://{host}:{other}"
    assert origin_allowed(origin, socket_scheme="ws", host_header=f"{host}:{port}") is (
        port == other)


@given(host=hosts, port=ports)
def test_scheme_must_match_the_socket(host, port):
    assert origin_allowed(f"http://{host}:{port}", socket_scheme="ws",
                          host_header=f"{host}:{port}")
    assert not origin_allowed(f"https://{host}:{port}", socket_scheme="ws",
                              host_header=f"{host}:{port}")
    assert not origin_allowed(f"http://{host}:{port}", socket_scheme="wss",
                              host_header=f"{host}:{port}")


@pytest.mark.parametrize(("origin", "host", "scheme", "allowed"), [
    ("http://example.com", "example.com", "ws", True),
    ("http://example.com:80", "example.com", "ws", True),   # default port, spelled or not
    ("https://example.com", "example.com:443", "wss", True),
    ("http://EXAMPLE.com", "example.com", "ws", True),       # host names are case-free
    ("http://example.com:8080", "example.com", "ws", False),
    ("http://example.com", "example.com:8080", "ws", False),
    ("http://evil.example", "example.com", "ws", False),
    ("http://example.com.evil.example", "example.com", "ws", False),
    (None, "example.com", "ws", False),                      # no Origin: refused
    ("null", "example.com", "ws", False),                    # sandboxed iframe, file://
    ("http://example.com", None, "ws", False),               # no Host header
    ("http://example.com/path", "example.com", "ws", False),
    ("http://user@example.com", "example.com", "ws", False),
    ("http://example.com:99999", "example.com:99999", "ws", False),
    ("ftp://example.com", "example.com", "ws", False),
])
def test_origin_table(origin, host, scheme, allowed):
    assert origin_allowed(origin, socket_scheme=scheme, host_header=host) is allowed


def test_trusted_origins_are_exact():
    trusted = ["https://chat.example.com"]
    assert origin_allowed("https://chat.example.com", socket_scheme="ws",
                          host_header="10.0.0.5:8000", trusted=trusted)
    assert not origin_allowed("https://chat.example.com:8443", socket_scheme="ws",
                              host_header="10.0.0.5:8000", trusted=trusted)
    assert not origin_allowed("https://x.example.com", socket_scheme="ws",
                              host_header="10.0.0.5:8000", trusted=["https://*.example.com"])
    assert origin_parse("https://chat.example.com") == ("https", "chat.example.com", 443)


# --- the real websocket stack ---------------------------------------------------------------
@pytest.fixture
def alice_chat(make_user, hermes_settings):
    alice = make_user("alice")
    return alice, session_create(user=alice, title="Alice's chat")


@pytest.mark.django_db(transaction=True, available_apps=APPS)
@pytest.mark.parametrize(("origin", "host", "scheme", "connected"), [
    (b"http://127.0.0.1:8000", b"127.0.0.1:8000", None, True),
    (b"http://127.0.0.1:9999", b"127.0.0.1:8000", None, False),   # another port: the attack
    (b"http://127.0.0.1", b"127.0.0.1:8000", None, False),
    (b"https://127.0.0.1:8000", b"127.0.0.1:8000", None, False),
    (b"http://127.0.0.1:8000", b"127.0.0.1:8000", "wss", False),
    (b"http://localhost:8000", b"127.0.0.1:8000", None, False),
    (None, b"127.0.0.1:8000", None, False),
    (b"http://evil.example:8000", b"evil.example:8000", None, False),  # not in ALLOWED_HOSTS
])
def test_handshake_through_the_asgi_app(client, alice_chat, origin, host, scheme, connected):
    alice, chat = alice_chat
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie, origin=origin, host=host, scheme=scheme)
        ok, _ = await ws.connect(timeout=10)
        assert ok is connected
        if ok:
            await ws.send_json_to({"type": "hello", "last_seq": 0})
            await ws.disconnect()
    run(scenario)


# The same attack from a real browser, against the embedded server:
# tests/browser/test_origin.py.
