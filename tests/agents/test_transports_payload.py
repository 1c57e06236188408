"""Wire bodies built by both transports (pure: build_payload sends nothing)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.messages import (Breakpoint, Message, ModelRequest, ToolCall, ToolSpec,
                             tool_result)
from agents.providers import PROFILES
from agents.transports import get_transport
from agents.transports.anthropic_messages import AnthropicTransport, count_markers
from agents.transports.breakpoints import lower_limit, remember_limit, select_breakpoints
from agents.transports.openai_chat import OpenAIChatTransport

CALL_A = ToolCall(id="toolu_A", name="read_file", arguments='{"path": "a.txt"}')
CALL_B = ToolCall(id="toolu_B", name="terminal", arguments="{not json")
HISTORY = (
    Message(role="user", content="list then read"),
    Message(role="assistant", content="", tool_calls=(CALL_A, CALL_B)),
    tool_result(CALL_A, "alpha"),
    tool_result(CALL_B, "boom", is_error=True),
    Message(role="user", content="shown", sent_content="sent bytes"),
    Message(role="assistant", content="done", reasoning="private thoughts"),
)
TOOLS = (ToolSpec(name="read_file", description="Read a file.",
                  input_schema={"type": "object", "properties": {"path": {"type": "string"}}}),)


def anthropic(profile: str = "simulator", url: str | None = None) -> AnthropicTransport:
    chosen = PROFILES[profile]
    if url:
        chosen = replace(chosen, base_url=url)
    return AnthropicTransport(chosen, api_key=None)


def request(**changes) -> ModelRequest:
    base = ModelRequest(model="m", system="STABLE.volatile", stable_len=7, messages=HISTORY,
                        tools=TOOLS)
    return replace(base, **changes)


def strip_markers(value):
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def test_anthropic_body_shape_roles_alternate_and_sidecar_is_replayed():
    body = anthropic().build_payload(request())
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant"]
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["tool_use", "tool_use"]
    assert assistant[0]["input"] == {"path": "a.txt"}
    assert assistant[1]["input"] == {"_invalid_arguments": "{not json"}
    results = body["messages"][2]["content"]
    assert results == [
        {"type": "tool_result", "tool_use_id": "toolu_A", "content": "alpha"},
        {"type": "tool_result", "tool_use_id": "toolu_B", "content": "boom", "is_error": True},
        {"type": "text", "text": "sent bytes"}]
    assert body["messages"][3]["content"] == [{"type": "text", "text": "done"}]
    assert "private thoughts" not in json.dumps(body)
    assert body["system"] == [{"type": "text", "text": "STABLE."},
                              {"type": "text", "text": "volatile"}]
    assert body["tools"] == [{"name": "read_file", "description": "Read a file.",
                              "input_schema": TOOLS[0].input_schema}]
    assert body["stream"] is True and count_markers(body) == 0


def test_system_is_one_block_without_a_stable_boundary_and_tools_key_absent_without_tools():
    body = anthropic().build_payload(request(stable_len=None, tools=()))
    assert body["system"] == [{"type": "text", "text": "STABLE.volatile"}]
    assert "tools" not in body
    whole = anthropic().build_payload(request(stable_len=15))
    assert whole["system"] == [{"type": "text", "text": "STABLE.volatile"}]


def test_empty_assistant_is_sent_as_placeholder():
    body = anthropic().build_payload(request(messages=(
        Message(role="user", content="hi"), Message(role="assistant", content=""),
        Message(role="user", content="again"))))
    assert body["messages"][1]["content"] == [{"type": "text", "text": "(empty)"}]


def test_breakpoints_render_on_stable_system_and_last_block_of_each_message():
    points = (Breakpoint(target="system_stable", ttl="1h"), Breakpoint(target="system"),
              Breakpoint(target="message", index=1), Breakpoint(target="message", index=3))
    body = anthropic().build_payload(request(breakpoints=points))
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][1]["content"][0]
    assert body["messages"][1]["content"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][2]["content"][1]["cache_control"] == {"type": "ephemeral"}
    assert count_markers(body) == 4


def test_split_at_sends_two_blocks_and_marks_the_first():
    messages = (Message(role="user", content="SCAFFOLD tail"),)
    body = anthropic().build_payload(request(messages=messages, breakpoints=(
        Breakpoint(target="message", index=0, split_at=8),)))
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "SCAFFOLD", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": " tail"}]


def test_routes_without_caching_or_1h_get_no_markers_or_clamped_ttl():
    points = (Breakpoint(target="system", ttl="1h"), Breakpoint(target="message", index=-1))
    no_cache = replace(PROFILES["simulator"], supports_caching=False)
    body = AnthropicTransport(no_cache, api_key=None).build_payload(request(breakpoints=points))
    assert count_markers(body) == 0
    short = replace(PROFILES["simulator"], supports_1h_ttl=False, base_url="http://short")
    body = AnthropicTransport(short, api_key=None).build_payload(request(breakpoints=points))
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_profile_budget_drops_the_earliest_message_breakpoints_first():
    proxy = replace(PROFILES["simulator"], max_breakpoints=2, base_url="http://proxy-two")
    points = (Breakpoint(target="system"), Breakpoint(target="message", index=0),
              Breakpoint(target="message", index=3))
    body = AnthropicTransport(proxy, api_key=None).build_payload(request(breakpoints=points))
    assert count_markers(body) == 2
    assert "cache_control" in body["system"][-1]
    assert "cache_control" in body["messages"][2]["content"][1]  # messages[3], toolu_B
    assert "cache_control" not in body["messages"][0]["content"][-1]


def test_a_learned_limit_applies_to_later_payloads_for_that_endpoint_only():
    points = (Breakpoint(target="system_stable"), Breakpoint(target="system"),
              Breakpoint(target="message", index=3), Breakpoint(target="message", index=5))
    remember_limit("http://learned-proxy", 3)
    assert count_markers(anthropic(url="http://learned-proxy").build_payload(
        request(breakpoints=points))) == 3
    assert count_markers(anthropic(url="http://other").build_payload(
        request(breakpoints=points))) == 4
    assert remember_limit("http://learned-proxy", 5) == 3


def test_lower_limit_reads_the_found_count():
    assert lower_limit(4, 4, 6) == 2  # "A maximum of 4 ... Found 6." (classifier hints)
    assert lower_limit(4, 4, None) == 3
    assert lower_limit(1, 4, 6) == 0


breakpoint_lists = st.lists(st.builds(
    Breakpoint, target=st.sampled_from(["system_stable", "system", "message"]),
    index=st.integers(min_value=-8, max_value=8), ttl=st.sampled_from(["5m", "1h"])),
    max_size=8)


LIMITED = {limit: AnthropicTransport(replace(PROFILES["simulator"], max_breakpoints=limit,
                                             base_url=f"http://limit-{limit}"), api_key=None)
           for limit in range(5)}


@settings(max_examples=150, deadline=None)
@given(points=breakpoint_lists, limit=st.integers(min_value=0, max_value=4))
def test_markers_never_exceed_the_limit_and_never_change_other_bytes(points, limit):
    transport = LIMITED[limit]
    body = transport.build_payload(request(breakpoints=tuple(points)))
    assert count_markers(body) <= limit
    assert strip_markers(body) == transport.build_payload(request())
    assert body == transport.build_payload(request(breakpoints=tuple(points)))
    kept = select_breakpoints(tuple(points), limit=limit, n_messages=len(HISTORY),
                              allow_1h=True)
    assert len(kept) <= limit


def test_build_payload_leaves_the_request_untouched():
    original = request(breakpoints=(Breakpoint(target="message", index=0),))
    snapshot = copy.deepcopy(original)
    anthropic().build_payload(original)
    assert original == snapshot
    assert "cache_control" not in json.dumps([m.to_dict() for m in original.messages])


def test_openai_body_shape():
    transport = OpenAIChatTransport(PROFILES["simulator-openai"], api_key="k")
    body = transport.build_payload(request(breakpoints=(Breakpoint(target="system"),)))
    assert body["messages"][0] == {"role": "system", "content": "STABLE.volatile"}
    assistant = body["messages"][2]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0] == {"id": "toolu_A", "type": "function", "function": {
        "name": "read_file", "arguments": '{"path": "a.txt"}'}}
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"]) == {
        "_invalid_arguments": "{not json"}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "toolu_A", "content": "alpha"}
    assert body["messages"][5] == {"role": "user", "content": "sent bytes"}
    assert body["messages"][6] == {"role": "assistant", "content": "done"}
    assert body["tools"][0] == {"type": "function", "function": {
        "name": "read_file", "description": "Read a file.", "parameters": TOOLS[0].input_schema}}
    assert body["stream_options"] == {"include_usage": True} and body["max_tokens"] == 4096
    assert "cache_control" not in json.dumps(body) and "private" not in json.dumps(body)
    openai = OpenAIChatTransport(PROFILES["openai"], api_key="k").build_payload(request(tools=()))
    assert "max_completion_tokens" in openai and "tools" not in openai


def test_get_transport_picks_the_wire_format_from_the_profile():
    assert isinstance(get_transport(PROFILES["anthropic"], api_key="x"), AnthropicTransport)
    chosen = get_transport(PROFILES["ollama"], api_key=None, model="qwen3")
    assert isinstance(chosen, OpenAIChatTransport) and chosen.model == "qwen3"
    assert chosen.build_payload(request(model=""))["model"] == "qwen3"


def test_blank_parts_are_never_sent_as_their_own_block():
    blank_tail = anthropic().build_payload(request(system="STABLE.\n", stable_len=7))
    assert blank_tail["system"] == [{"type": "text", "text": "STABLE.\n"}]
    split_blank = anthropic().build_payload(request(
        messages=(Message(role="user", content="SCAFFOLD  "),),
        breakpoints=(Breakpoint(target="message", index=0, split_at=8),)))
    assert split_blank["messages"][0]["content"] == [
        {"type": "text", "text": "SCAFFOLD  ", "cache_control": {"type": "ephemeral"}}]
    blank = anthropic().build_payload(request(system="  ", messages=(
        Message(role="user", content=" "),
        Message(role="assistant", content="\n", tool_calls=(CALL_A,)),
        tool_result(CALL_A, ""))))
    assert "system" not in blank
    assert blank["messages"][0]["content"] == [{"type": "text", "text": "(empty)"}]
    assert [b["type"] for b in blank["messages"][1]["content"]] == ["tool_use"]
    assert blank["messages"][2]["content"][0]["content"] == "(empty)"
