"""Both transports end to end against the provider simulator over real HTTP: streaming, tool
calls, recorded request bodies, cache usage, each fault's classification and retry."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agents.errors import TransportError, TurnCancelled
from agents.messages import Breakpoint, Message, ModelRequest, ToolCall, ToolSpec, tool_result
from agents.providers import resolve_profile
from simulator import SimulatorServer
from simulator.faults import Fault
from simulator.script import Reply, Script, ScriptRule, ToolCallSpec
from agents.transports import get_transport
from agents.transports.anthropic_messages import count_markers
from agents.transports.breakpoints import learned_limit
from agents.transports.errors import FailoverReason as R
from agents.transports.retry import RetryPolicy

FAST = RetryPolicy(base_delay=0.001, max_delay=0.002, jitter=0.0, max_retry_after=5.0)
TOOLS = (ToolSpec(name="read_file", description="Read a file from the workspace.",
                  input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                                "required": ["path"]}),)
RULES = [
    ScriptRule(tool_result="README", reply=Reply(text="The README says hello.")),
    ScriptRule(user="^read", reply=Reply(text="Reading it.", tool_calls=(
        ToolCallSpec(name="read_file", input={"path": "README.md", "note": "ß ✓"}),))),
    ScriptRule(user="^only tool", reply=Reply(tool_calls=(
        ToolCallSpec(name="read_file", input={"path": "a.txt"}),
        ToolCallSpec(name="read_file", input={"path": "b.txt"})))),
    ScriptRule(user="^slow", reply=Reply(text="one two three four five six", token_delay=0.01)),
    ScriptRule(reply=Reply(text="Hello there, this is the simulated model speaking.")),
]


@pytest.fixture(scope="module")
def sim():
    server = SimulatorServer(port=0).start()
    yield server
    server.stop()


@pytest.fixture
def state(sim):
    sim.state.reset()
    sim.state.script = Script(list(RULES))
    return sim.state


class Clock:
    """Records the sleeps the retry policy asks for instead of sleeping them."""

    def __init__(self):
        self.sleeps: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def transport(sim, wire: str, clock: Clock | None = None, **profile_changes):
    name = "simulator" if wire == "anthropic" else "simulator-openai"
    url = sim.url if wire == "anthropic" else f"{sim.url}/v1"
    profile = replace(resolve_profile(name, base_url=url), **profile_changes)
    return get_transport(profile, api_key="test-key", retry=FAST, sleep=clock or Clock())


def ask(text: str, **changes) -> ModelRequest:
    base = ModelRequest(model="hermes-simulator", system="You are Hermes.",
                        messages=(Message(role="user", content=text),), tools=TOOLS,
                        max_tokens=512)
    return replace(base, **changes)


def run(chosen, request, **kwargs):
    shown: list[str] = []
    response = chosen.complete(request, on_text=shown.append, **kwargs)
    return response, shown


WIRES = ["anthropic", "openai"]


@pytest.mark.parametrize("wire", WIRES)
def test_text_streams_in_deltas_and_the_recorded_body_is_build_payload(sim, state, wire):
    chosen = transport(sim, wire)
    request = ask("hello")
    response, shown = run(chosen, request)
    assert len(shown) > 1
    assert "".join(shown) == response.message.content == \
        "Hello there, this is the simulated model speaking."
    assert response.stop_reason == "end_turn" and response.model == "hermes-simulator"
    assert response.usage is not None and response.usage.output_tokens > 0
    assert response.usage.input_tokens > 0
    assert [r.status for r in state.requests] == [200]
    assert state.requests[0].body == chosen.build_payload(request)


@pytest.mark.parametrize("wire", WIRES)
def test_tool_calls_arrive_whole_and_a_history_round_trips(sim, state, wire):
    chosen = transport(sim, wire)
    response, shown = run(chosen, ask("read the readme"))
    assert response.stop_reason == "tool_use" and "".join(shown) == "Reading it."
    (call,) = response.message.tool_calls
    assert call.name == "read_file"
    assert call.parsed_arguments() == {"path": "README.md", "note": "ß ✓"}
    history = (Message(role="user", content="read the readme"), response.message,
               tool_result(call, "README: hello"))
    final, _ = run(chosen, ask("", messages=history))
    assert final.message.content == "The README says hello."
    assert [r.status for r in state.requests] == [200, 200]


@pytest.mark.parametrize("wire", WIRES)
def test_parallel_tool_calls_without_text(sim, state, wire):
    response, shown = run(transport(sim, wire), ask("only tools please"))
    assert shown == [] and response.message.content == ""
    assert [c.parsed_arguments()["path"] for c in response.message.tool_calls] == [
        "a.txt", "b.txt"]
    assert len({c.id for c in response.message.tool_calls}) == 2


def test_an_invalid_stored_history_shape_is_classified_for_repair(sim, state):
    orphan = (Message(role="user", content="list"),
              Message(role="assistant", tool_calls=(ToolCall(id="toolu_X", name="read_file"),)),
              Message(role="user", content="never mind"))
    with pytest.raises(TransportError) as caught:
        run(transport(sim, "anthropic"), ask("", messages=orphan))
    classified = caught.value.classified
    assert classified.history_shape and not classified.retryable
    assert len(state.requests) == 1


def test_breakpoints_are_rendered_and_cache_usage_is_normalised(sim, state):
    state.configure(min_cacheable_tokens=16)
    chosen = transport(sim, "anthropic")
    system = "Stable identity and tool guidance. " * 40 + "Volatile: session 7."
    stable = system.index("Volatile")
    request = ask("hello", system=system, stable_len=stable, breakpoints=(
        Breakpoint(target="system_stable", ttl="1h"), Breakpoint(target="system"),
        Breakpoint(target="message", index=0)))
    first, _ = run(chosen, request)
    body = state.requests[0].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    raw = state.requests[0].usage
    assert first.usage.cache_write_1h_tokens == raw["cache_creation"]["ephemeral_1h_input_tokens"] > 0
    assert first.usage.cache_write_5m_tokens == raw["cache_creation"]["ephemeral_5m_input_tokens"]
    assert first.usage.cache_read_tokens == 0
    second, _ = run(chosen, request)
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens > 0
    assert second.usage.cache_write_tokens == 0
    assert second.usage.input_tokens == state.requests[1].usage["input_tokens"]


def test_openai_cached_tokens_are_subtracted_from_input(sim, state):
    state.configure(min_cacheable_tokens=16)
    chosen = transport(sim, "openai")
    request = ask("hello", system="Long stable system prompt. " * 60)
    run(chosen, request)
    second, _ = run(chosen, request)
    raw = state.requests[1].usage
    cached = raw["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0
    assert second.usage.cache_read_tokens == cached
    assert second.usage.input_tokens == raw["prompt_tokens"] - cached
    assert second.usage.prompt_tokens == raw["prompt_tokens"]


@pytest.mark.parametrize("wire", WIRES)
def test_rate_limit_is_retried_after_the_servers_hint(sim, state, wire):
    clock = Clock()
    state.faults.push(Fault(kind="rate_limit", retry_after_ms="7"))
    response, _ = run(transport(sim, wire, clock), ask("hello"))
    assert response.message.content.startswith("Hello there")
    assert clock.sleeps == [0.007]
    assert [r.status for r in state.requests] == [429, 200]


@pytest.mark.parametrize("wire,reason", [("anthropic", R.OVERLOADED), ("openai", R.OVERLOADED)])
def test_overload_three_times_spends_the_attempts(sim, state, wire, reason):
    for _ in range(3):
        state.faults.push(Fault(kind="overloaded"))
    clock = Clock()
    with pytest.raises(TransportError) as caught:
        run(transport(sim, wire, clock), ask("hello"))
    assert caught.value.classified.reason is reason and caught.value.attempts == 3
    assert len(clock.sleeps) == 2 and len(state.requests) == 3


@pytest.mark.parametrize("wire", WIRES)
def test_server_error_then_success(sim, state, wire):
    state.faults.push(Fault(kind="server_error"))
    response, _ = run(transport(sim, wire), ask("hello"))
    assert response.message.content and [r.status for r in state.requests] == [500, 200]


@pytest.mark.parametrize("wire", WIRES)
def test_deterministic_failures_are_sent_once(sim, state, wire):
    state.faults.push(Fault(kind="auth"))
    with pytest.raises(TransportError) as caught:
        run(transport(sim, wire), ask("hello"))
    assert caught.value.classified.reason is R.AUTH
    state.faults.push(Fault(kind="prompt_too_long"))
    with pytest.raises(TransportError) as caught:
        run(transport(sim, wire), ask("hello"))
    assert caught.value.classified.reason is R.CONTEXT_OVERFLOW
    assert caught.value.classified.compress
    assert len(state.requests) == 2


def test_openai_insufficient_quota_is_billing_not_a_retry(sim, state):
    state.faults.push(Fault(kind="rate_limit", endpoint="openai", error_type="insufficient_quota",
                            code="insufficient_quota", message="quota (test)"))
    with pytest.raises(TransportError) as caught:
        run(transport(sim, "openai"), ask("hello"))
    assert caught.value.classified.reason is R.BILLING and len(state.requests) == 1


@pytest.mark.parametrize("wire", WIRES)
def test_stream_cut_after_visible_text_is_raised_with_the_partial(sim, state, wire):
    state.faults.push(Fault(kind="stream_cut"))
    shown: list[str] = []
    with pytest.raises(TransportError) as caught:
        transport(sim, wire).complete(ask("hello"), on_text=shown.append)
    assert caught.value.classified.reason is R.CONNECTION
    assert caught.value.partial == "".join(shown) == "I'll write the file."
    assert len(state.requests) == 1, "text was shown: no retry, no duplicate text"


@pytest.mark.parametrize("wire", WIRES)
def test_stream_cut_mid_tool_call_before_any_text_is_retried(sim, state, wire):
    state.faults.push(Fault(kind="stream_cut", after_events=1))
    response, shown = run(transport(sim, wire), ask("only tools please"))
    assert shown == [] and len(response.message.tool_calls) == 2
    assert all(c.parsed_arguments() for c in response.message.tool_calls)
    assert len(state.requests) == 2


@pytest.mark.parametrize("wire", WIRES)
def test_error_event_inside_a_200_stream(sim, state, wire):
    state.faults.push(Fault(kind="stream_error", after_events=0))
    response, shown = run(transport(sim, wire), ask("hello"))
    assert "".join(shown) == response.message.content and len(state.requests) == 2
    state.faults.push(Fault(kind="stream_error", after_events=2))
    with pytest.raises(TransportError) as caught:
        run(transport(sim, wire), ask("hello"))
    expected = R.OVERLOADED if wire == "anthropic" else R.SERVER_ERROR
    assert caught.value.classified.reason is expected
    assert caught.value.partial and len(state.requests) == 3


@pytest.mark.parametrize("wire", WIRES)
def test_stop_mid_stream_raises_turn_cancelled_with_the_partial(sim, state, wire):
    shown: list[str] = []
    with pytest.raises(TurnCancelled) as caught:
        transport(sim, wire).complete(ask("slow please"), on_text=shown.append,
                                      should_stop=lambda: len(shown) >= 2)
    assert caught.value.partial == "".join(shown)
    assert 2 <= len(shown) < 6
    # Billed: the provider was answering. Anthropic's message_start reported the prompt's
    # buckets; chat-completions reports usage only in its last chunk (the sink estimates).
    assert caught.value.billed is True
    if wire == "anthropic":
        reported = caught.value.usage
        assert reported is not None and reported.prompt_tokens > 0
    else:
        assert caught.value.usage is None


def test_breakpoint_limit_400_retries_once_with_fewer_and_remembers(sim, state):
    state.configure(min_cacheable_tokens=16)
    chosen = transport(sim, "anthropic", max_breakpoints=5)
    history = (Message(role="user", content="a"), Message(role="assistant", content="b"),
               Message(role="user", content="c"), Message(role="assistant", content="d"),
               Message(role="user", content="hello"))
    points = (Breakpoint(target="system"),
              *(Breakpoint(target="message", index=i) for i in range(5)))
    request = ask("", messages=history, breakpoints=points)
    response, _ = run(chosen, request)
    assert response.message.content
    assert [r.status for r in state.requests] == [400, 200]
    assert "A maximum of 4 blocks" in state.requests[0].error
    assert count_markers(state.requests[0].body) == 5
    retried = state.requests[1].body
    assert count_markers(retried) == 4
    assert "cache_control" in retried["system"][-1]
    assert "cache_control" not in retried["messages"][0]["content"][-1]
    assert "cache_control" in retried["messages"][-1]["content"][-1]
    assert learned_limit(chosen.profile.base_url) == 4
    run(chosen, request)
    assert [r.status for r in state.requests] == [400, 200, 200]
    assert count_markers(state.requests[2].body) == 4


def test_openai_body_has_no_markers_and_null_content_for_tool_only_turns(sim, state):
    chosen = transport(sim, "openai")
    first, _ = run(chosen, ask("only tools please"))
    history = (Message(role="user", content="only tools please"), first.message,
               *(tool_result(c, f"contents of {c.parsed_arguments()['path']}")
                 for c in first.message.tool_calls))
    run(chosen, ask("", messages=history, breakpoints=(Breakpoint(target="system"),)))
    body = state.requests[1].body
    assert body["messages"][2]["content"] is None
    assert "cache_control" not in json.dumps(body)
    assert [r.status for r in state.requests] == [200, 200]


class MarkingProxy:
    """A gateway in front of the simulator that adds its own cache_control marker to the last
    tool of every request (as some proxies do), forwarding the answer unchanged."""

    def __init__(self, upstream: str):
        import http.server
        import threading

        import httpx

        upstream_client = httpx.Client(timeout=30)

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body.get("tools"):
                    body["tools"][-1]["cache_control"] = {"type": "ephemeral"}
                answer = upstream_client.post(f"{upstream}{self.path}", json=body)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers["content-type"])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.client = upstream_client

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.client.close()


def test_a_proxy_adding_its_own_marker_lowers_the_limit_for_that_endpoint_only(sim, state):
    proxy = MarkingProxy(sim.url)
    try:
        behind = get_transport(resolve_profile("simulator", base_url=proxy.url),
                               api_key="k", retry=FAST, sleep=Clock())
        history = (Message(role="user", content="a"), Message(role="assistant", content="b"),
                   Message(role="user", content="hello"))
        request = ask("", messages=history, system="System prompt.", stable_len=7,
                      breakpoints=(Breakpoint(target="system_stable"), Breakpoint(target="system"),
                                   Breakpoint(target="message", index=0),
                                   Breakpoint(target="message", index=2)))
        response, _ = run(behind, request)
        assert response.message.content
        assert [r.status for r in state.requests] == [400, 200]
        assert "Found 5" in state.requests[0].error
        assert count_markers(state.requests[1].body) == 4  # 3 of ours + the proxy's
        assert learned_limit(proxy.url) == 3
        assert count_markers(behind.build_payload(request)) == 3
        direct = transport(sim, "anthropic")
        assert count_markers(direct.build_payload(request)) == 4
    finally:
        proxy.stop()


@pytest.mark.parametrize("wire", WIRES)
def test_a_stop_before_sending_sends_nothing(sim, state, wire):
    with pytest.raises(TurnCancelled) as caught:
        run(transport(sim, wire), ask("hello"), should_stop=lambda: True)
    assert caught.value.partial == "" and state.requests == []
    assert caught.value.billed is False and caught.value.usage is None  # nothing to pay
