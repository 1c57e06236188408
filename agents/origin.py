"""Same-origin decision for websocket handshakes (issue 8, finding 8).

A browser sends ``Origin`` on every websocket handshake, and it sends the site's cookies
with it even when the page making the request is on another *port* of the same host (cookies
are scoped by host, not port; SameSite treats ports as the same site). So a check that
compares host names only lets a page served from ``http://host:9999`` drive a user's agent on
``http://host:8000``. An origin is the triple (scheme, host, port) (RFC 6454 §4); this module
compares the whole triple. Plain Python: hermes_web/asgi.py supplies the request's scheme and
Host header, and checks the host name against ALLOWED_HOSTS itself.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
"""Port implied by a scheme when a URL or Host header names none (RFC 6454 §4 step 5)."""
WEBSOCKET_PAGE_SCHEMES = {"ws": "http", "wss": "https"}
"""The page scheme that may open a websocket of each scheme (a wss socket from an http page
is refused: a downgrade, and not what this app serves)."""

Origin = tuple[str, str, int]
"""(scheme, lower-cased host without brackets, port)."""


def origin_parse(value: str | None) -> Origin | None:
    """``"https://Example.com:8443"`` → ("https", "example.com", 8443). Returns None for
    anything that is not a serialised http(s) origin: missing, ``"null"``, a path, query,
    fragment or user info present, an unknown scheme, a bad or missing port number."""
    if not value or value == "null":
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    return scheme, parts.hostname.lower().rstrip("."), port or DEFAULT_PORTS[scheme]


def request_origin(*, socket_scheme: str, host_header: str | None) -> Origin | None:
    """The origin a page must have to open this socket: the page scheme for ``socket_scheme``
    ("ws"/"wss") and the host and port of the ``Host`` header (the port defaulting to the
    scheme's). None when the Host header is missing or malformed, or the scheme unknown."""
    scheme = WEBSOCKET_PAGE_SCHEMES.get((socket_scheme or "ws").lower())
    if scheme is None or not host_header or any(c in host_header for c in "/?#@ \\"):
        return None
    try:
        parts = urlsplit(f"//{host_header}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return scheme, parts.hostname.lower().rstrip("."), port or DEFAULT_PORTS[scheme]


def origin_allowed(origin: str | None, *, socket_scheme: str, host_header: str | None,
                   trusted: tuple[str, ...] | list[str] = ()) -> bool:
    """True when the handshake's ``origin`` is exactly the socket's own origin (scheme, host
    and port), or exactly one of ``trusted`` (serialised origins, e.g. Django's
    CSRF_TRUSTED_ORIGINS without wildcards, for a TLS-terminating proxy). Fails closed:
    a missing or unparseable origin or Host header is refused."""
    parsed = origin_parse(origin)
    if parsed is None:
        return False
    own = request_origin(socket_scheme=socket_scheme, host_header=host_header)
    if own is not None and parsed == own:
        return True
    return any(parsed == origin_parse(t) for t in trusted if "*" not in t)
