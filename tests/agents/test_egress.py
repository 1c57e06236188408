"""The egress rule (agents/egress.py): which addresses a team admin's URL may reach."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.egress import EgressDenied, address_problem, allowed_entry, egress_check


@pytest.mark.parametrize("address, problem", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.0.0.5", "private"), ("172.16.3.4", "private"), ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1%eth0", "link-local"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("224.0.0.1", "multicast"),
    ("fd00::1", "private"), ("100.64.0.1", "not globally routable"),
    ("::ffff:127.0.0.1", "loopback"),          # IPv4-mapped: the kernel dials 127.0.0.1
    ("2002:7f00:1::", "loopback"),             # 6to4 wrapping 127.0.0.1
    ("localhost", "not an IP address"),
    ("8.8.8.8", None), ("2606:4700:4700::1111", None), ("93.184.216.34", None),
])
def test_addresses_are_judged(address, problem):
    assert address_problem(address) == problem


@given(st.ip_addresses(v=4))
def test_every_ipv4_address_is_public_or_named(ip):
    problem = address_problem(str(ip))
    assert (problem is None) == (ip.is_global and not ip.is_multicast)  # global unicast only
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    assert address_problem(str(mapped)) == problem  # no way round through the mapped form


def resolver(table):
    return lambda host, port: table[host]


def test_a_name_resolving_to_any_private_address_is_refused():
    resolve = resolver({"tools.example.com": ["93.184.216.34", "10.1.2.3"]})
    with pytest.raises(EgressDenied, match=r"10\.1\.2\.3, a private address"):
        egress_check("https://tools.example.com/mcp", resolve=resolve)


def test_a_public_name_passes_and_the_operator_can_allow_a_private_one():
    egress_check("https://tools.example.com/mcp",
                 resolve=resolver({"tools.example.com": ["93.184.216.34"]}))
    egress_check("http://127.0.0.1:9000/mcp", allowed=["127.0.0.1:9000"],
                 resolve=resolver({}))  # allowed by name: never resolved
    with pytest.raises(EgressDenied, match="loopback"):  # another port is not allowed
        egress_check("http://127.0.0.1:5432/mcp", allowed=["127.0.0.1:9000"],
                     resolve=resolver({"127.0.0.1": ["127.0.0.1"]}))


@pytest.mark.parametrize("url", ["ftp://example.com/", "http:///mcp", "file:///etc/passwd",
                                 "http://example.com:99999999/"])
def test_urls_that_are_not_http_with_a_host_and_port_are_refused(url):
    with pytest.raises(EgressDenied):
        egress_check(url, resolve=resolver({"example.com": ["93.184.216.34"]}))


def test_a_name_that_resolves_to_nothing_is_refused():
    with pytest.raises(EgressDenied, match="does not resolve"):
        egress_check("https://gone.example/", resolve=resolver({"gone.example": []}))
    with pytest.raises(EgressDenied, match="does not resolve"):
        egress_check("https://no-such-host.invalid/")  # the real resolver, failing closed


def test_allowed_entries_compare_hosts_and_ports():
    assert allowed_entry("LocalHost", 80, ["localhost"])
    assert allowed_entry("::1", 8080, ["[::1]:8080"])
    assert not allowed_entry("127.0.0.1", 80, ["127.0.0.1:81"])
    assert not allowed_entry("127.0.0.1", 80, [])
