"""Where the server may connect on a user's behalf: the egress rule for URLs that team admins
type (MCP streamable-HTTP servers).

A URL a team admin saves is fetched by the worker, on the worker's network. Without a rule a
second tenant could point "their" MCP server at the host's own services (PostgreSQL on
127.0.0.1:5432, Redis on 6379, daphne's admin, a cloud metadata endpoint on 169.254.169.254)
and read the answers back through tool results: server-side request forgery. So every
address a host name resolves to must be a public unicast address, unless the operator
allowed that host (or host:port) by name (``HERMES_MCP_HTTP_ALLOW_PRIVATE``). Fails closed:
a name that does not resolve, or resolves to any one non-public address, is refused.

The check runs where the URL is saved (the admin form) and again before every request the
worker sends (an httpx request hook, sessions/mcp.py), so a name re-pointed after saving
(DNS rebinding) is caught at the next request. No Django.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

Resolver = Callable[[str, int], Iterable[str]]
"""(host, port) -> the IP addresses the host resolves to, as strings."""


class EgressDenied(Exception):
    """The URL may not be fetched; the message says why, in a sentence for the admin."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``getaddrinfo`` gives for ``host`` (IPv4 and IPv6). Raises EgressDenied
    for a name that does not resolve (fail closed: nothing checked means nothing allowed)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise EgressDenied(f"{host!r} does not resolve ({exc}).") from exc
    return sorted({info[4][0] for info in infos})


def address_problem(address: str) -> str | None:
    """None for a public unicast address, else what it is ("loopback", "private",
    "link-local", ...). IPv4-mapped and 6to4/Teredo-embedded IPv4 addresses are judged by the
    IPv4 address inside, since the kernel connects to that one. An unparsable string is
    refused ("not an IP address")."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is not None:
            return address_problem(str(inner))
    for name, flag in (("loopback", ip.is_loopback), ("link-local", ip.is_link_local),
                       ("multicast", ip.is_multicast), ("unspecified", ip.is_unspecified),
                       ("reserved", ip.is_reserved), ("private", ip.is_private)):
        if flag:
            return name
    if not ip.is_global:  # shared address space (100.64/10) and other non-global ranges
        return "not globally routable"
    return None


def allowed_entry(host: str, port: int, allowed: Iterable[str]) -> bool:
    """True when ``host`` or ``host:port`` is one of the operator's ``allowed`` entries
    (compared case-insensitively; IPv6 hosts written with or without brackets)."""
    host = host.strip("[]").lower()
    names = {host, f"{host}:{port}", f"[{host}]:{port}"}
    return any(entry.strip().lower() in names for entry in allowed)


def egress_check(url: str, *, allowed: Iterable[str] = (),
                 resolve: Resolver = system_resolver) -> None:
    """Raise EgressDenied unless ``url`` (http or https, with a host) may be fetched: its
    host is in ``allowed`` (operator's list, see module docstring), or every address it
    resolves to is public. Returns None when allowed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EgressDenied("Only http:// and https:// URLs with a host can be fetched.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise EgressDenied(f"The URL's port is not a number ({exc}).") from exc
    host = parts.hostname
    if allowed_entry(host, port, allowed):
        return
    addresses = list(resolve(host, port))
    if not addresses:
        raise EgressDenied(f"{host!r} does not resolve to any address.")
    for address in addresses:
        problem = address_problem(address)
        if problem is not None:
            raise EgressDenied(
                f"{host} resolves to {address}, a {problem} address: the server does not "
                "connect to its own network on a team's behalf. The operator can allow this "
                f"host with HERMES_MCP_HTTP_ALLOW_PRIVATE={host}:{port}.")
