"""The MCP client against real MCP servers written with the same SDK (tests/mcp_servers):
connect, list, call, a crash mid-call, a slow start, a malformed result, reconnecting;
the name and schema rules; result text; the floor per toolset."""

from __future__ import annotations

import shlex
import time

import pytest

from agents.errors import ToolError
from agents.floor import floor_tokens, toolset_of
from agents.mcp_client import (ConnectionManager, ServerConfig, probe_server,
                               reconnect_delay, tools_from_listing)
from agents.messages import ToolSpec
from agents.tools.mcp import full_name, name_problem, schema_problem, split_name
from tests.mcp_servers.launch import http_server, stdio_command


def stdio(name: str, *args: str, key: str = "") -> ServerConfig:
    return ServerConfig(key=key or f"t/{name}", name=name.replace("_", "-"),
                        transport="stdio", argv=tuple(shlex.split(stdio_command(name, *args))))


@pytest.fixture
def manager():
    m = ConnectionManager(ping_interval=0.5, call_timeout=20, backoff=lambda attempt: 0.2)
    yield m
    m.shutdown()


def test_names_split_one_way_and_respect_the_api_limit():
    assert full_name("web", "fetch") == "mcp__web__fetch"
    assert split_name("mcp__web__fetch_page") == ("web", "fetch_page")
    assert split_name("read_file") is None and split_name("mcp__web") is None
    assert name_problem("web", "fetch") is None
    assert "characters" in name_problem("web", "bad name!")
    assert "longer than 64" in name_problem("web", "x" * 60)


@pytest.mark.parametrize("schema, problem", [
    ({"type": "object", "properties": {"x": {"type": "string"}}}, None),
    ({"properties": {}}, None),
    ([], "not a JSON object"),
    ({"type": "array"}, "not 'object'"),
    ({"type": "object", "properties": {"x": {"type": "banana"}}}, "not valid JSON Schema"),
    ({"type": "object", "required": "x"}, "not valid JSON Schema"),
])
def test_schema_problem(schema, problem):
    found = schema_problem(schema)
    assert (found is None) if problem is None else (problem in found)


def test_reconnect_delay_doubles_and_is_capped():
    assert [reconnect_delay(n) for n in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert reconnect_delay(100) == 30.0


def test_probe_lists_a_stdio_servers_tools_with_their_schemas():
    good, rejected = probe_server(stdio("stdio_tools"), timeout=20)
    assert [t.name for t in good] == ["add", "big", "crash", "echo", "sleepy"]
    echo = next(t for t in good if t.name == "echo")
    assert echo.input_schema["properties"]["text"]["type"] == "string"
    assert rejected == ()


def test_probe_rejects_a_tool_whose_schema_is_not_json_schema():
    good, rejected = probe_server(stdio("malformed"), timeout=20)
    assert [t.name for t in good] == ["bad_result", "fine"]
    assert rejected[0][0] == "broken_schema" and "not valid JSON Schema" in rejected[0][1]


def test_probe_of_a_command_that_does_not_exist_raises():
    with pytest.raises(BaseException):
        probe_server(ServerConfig(key="x", name="x", transport="stdio",
                                  argv=("/nonexistent/mcp-server",)), timeout=5)


def test_a_call_that_kills_the_server_is_a_tool_error_and_the_server_comes_back(manager):
    config = stdio("stdio_tools")
    manager.ensure("t", [config])
    assert manager.wait_connected(config.key, 20)
    assert manager.call(config.key, "echo", {"text": "hi"}).content[0].text == "echo: hi"
    with pytest.raises(ToolError, match="failed during the call to crash.*outcome is unknown"):
        manager.call(config.key, "crash", {})
    deadline = time.monotonic() + 20
    while manager.status(config.key).generation < 2:
        assert time.monotonic() < deadline, manager.status(config.key)
        time.sleep(0.05)
    assert manager.call(config.key, "add", {"a": 2, "b": 3}).content[0].text == "5"


def test_a_slow_server_is_connecting_then_connected(manager):
    config = stdio("stdio_tools", "--slow", "2")
    manager.ensure("t", [config])
    assert manager.status(config.key).state == "connecting"
    with pytest.raises(ToolError, match="not connected"):
        manager.call(config.key, "echo", {"text": "early"})
    assert not manager.wait_connected(config.key, 0.5)
    assert manager.wait_connected(config.key, 30)
    assert manager.status(config.key).state == "connected"


def test_a_malformed_result_is_a_tool_error_naming_it(manager):
    config = stdio("malformed")
    manager.ensure("t", [config])
    assert manager.wait_connected(config.key, 20)
    with pytest.raises(ToolError, match="malformed result for bad_result"):
        manager.call(config.key, "bad_result", {})
    assert manager.call(config.key, "fine", {}).content[0].text == "fine"  # still usable


def test_an_http_server_is_listed_and_called(manager):
    with http_server() as url:
        config = ServerConfig(key="t/web", name="web", transport="http", url=url,
                              allow_private=("127.0.0.1",))
        manager.ensure("t", [config])
        assert manager.wait_connected(config.key, 20)
        assert [t.name for t in manager.status(config.key).tools] == ["lookup", "shout"]
        assert manager.call(config.key, "shout", {"text": "hey"}).content[0].text == "HEY"


def test_ensure_stops_servers_no_longer_configured(manager):
    config = stdio("stdio_tools")
    manager.ensure("t", [config])
    assert manager.wait_connected(config.key, 20)
    manager.ensure("t", [])
    assert manager.status(config.key) is None
    with pytest.raises(ToolError, match="not connected"):
        manager.call(config.key, "echo", {"text": "x"})


def test_listing_rejects_duplicates_and_bad_names():
    class T:
        def __init__(self, name, schema):
            self.name, self.input_schema, self.description = name, schema, ""

    good, bad = tools_from_listing([T("a", {"type": "object"}), T("a", {"type": "object"}),
                                    T("sp ace", {"type": "object"})], "srv")
    assert [t.name for t in good] == ["a"]
    assert [n for n, _ in bad] == ["a", "sp ace"]


def test_the_floor_groups_tools_by_toolset_and_grows_with_each_server():
    def spec(name, size=10):
        return ToolSpec(name=name, description="d" * size,
                        input_schema={"type": "object", "properties": {}})

    base = [spec("read_file"), spec("write_file"), spec("terminal")]
    floor = floor_tokens(system="You are Hermes." * 10, tools=base)
    assert {t["name"] for t in floor["toolsets"]} == {"files", "terminal"}
    assert floor["total"] == floor["system"] + floor["tools"] > 0
    more = floor_tokens(system="You are Hermes." * 10,
                        tools=[*base, spec("mcp__web__fetch", 4000)])
    web = next(t for t in more["toolsets"] if t["name"] == "mcp: web")
    assert more["toolsets"][0] == web  # largest first
    assert more["total"] - floor["total"] == web["tokens"] >= 1000
    assert toolset_of("mcp__web__fetch") == "mcp: web" and toolset_of("odd") == "odd"


def test_stop_cancels_a_long_call_and_a_slow_call_times_out(manager):
    config = stdio("stdio_tools")
    manager.ensure("t", [config])
    assert manager.wait_connected(config.key, 20)
    stop_at = time.monotonic() + 0.5
    started = time.monotonic()
    with pytest.raises(ToolError, match="stopped by the user"):
        manager.call(config.key, "sleepy", {"seconds": 30},
                     should_stop=lambda: time.monotonic() > stop_at)
    assert time.monotonic() - started < 5
    with pytest.raises(ToolError, match="did not answer within 1 s"):
        manager.call(config.key, "sleepy", {"seconds": 30}, timeout=1)
    assert manager.call(config.key, "echo", {"text": "still"}).content[0].text == "echo: still"
