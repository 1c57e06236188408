"""Folding an OpenAI-compatible SSE stream into a ModelResponse (pure: lines in, value out)."""

from __future__ import annotations

import json

import httpx
import pytest

from agents.errors import TurnCancelled
from agents.transports.errors import StreamErrorEvent, StreamIncomplete
from agents.transports.openai_chat import _sse_data, read_stream
from agents.transports.retry import TextTap


def sse(*chunks) -> list[str]:
    lines: list[str] = []
    for chunk in chunks:
        lines += [f"data: {chunk if isinstance(chunk, str) else json.dumps(chunk)}", ""]
    return lines


def delta(finish=None, **fields):
    return {"model": "m1", "choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def fold(lines, should_stop=lambda: False):
    shown: list[str] = []
    body = httpx.Response(200, headers={"content-type": "text/event-stream"},
                          content=("\n".join(lines) + "\n").encode())  # events end blank
    response = read_stream(_sse_data(body), TextTap(shown.append), should_stop)
    return response, shown


def test_a_response_that_is_not_an_event_stream_is_incomplete():
    body = httpx.Response(200, headers={"content-type": "application/json"}, content=b"{}")
    with pytest.raises(StreamIncomplete):
        list(_sse_data(body))


def test_text_reasoning_and_usage_chunk():
    response, shown = fold(sse(
        delta(role="assistant", content=""), delta(reasoning_content="think "),
        delta(reasoning="more"), delta(content="Hel"), delta(content="lo"), delta("stop"),
        {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 5,
                                  "prompt_tokens_details": {"cached_tokens": 20}}},
        "[DONE]"))
    assert shown == ["Hel", "lo"] and response.message.content == "Hello"
    assert response.message.reasoning == "think more"
    assert (response.usage.input_tokens, response.usage.cache_read_tokens) == (10, 20)
    assert response.stop_reason == "end_turn" and response.model == "m1"


def test_tool_calls_accumulate_by_index_and_missing_ids_are_generated():
    response, shown = fold(sse(
        delta(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "read_", "arguments": ""}}]),
        delta(tool_calls=[{"index": 1, "function": {"name": "terminal", "arguments": '{"co'}}]),
        delta(tool_calls=[{"index": 0, "function": {"name": "file", "arguments": '{"path"'}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": ': "a"}'}}]),
        delta(tool_calls=[{"index": 1, "function": {"arguments": 'mmand": "ls"}'}}]),
        delta("tool_calls"), "[DONE]"))
    first, second = response.message.tool_calls
    assert (first.id, first.name, first.parsed_arguments()) == ("c1", "read_file", {"path": "a"})
    assert (second.id, second.name, second.parsed_arguments()) == (
        "call_1", "terminal", {"command": "ls"})
    assert response.stop_reason == "tool_use" and response.usage is None and shown == []


def test_a_stream_closed_without_finish_or_done_is_incomplete():
    with pytest.raises(StreamIncomplete):
        fold(sse(delta(content="partial")))


def test_an_error_object_mid_stream_raises():
    with pytest.raises(StreamErrorEvent) as caught:
        fold(sse(delta(content="a"), {"error": {"message": "boom", "type": "server_error"}}))
    assert caught.value.body["error"]["message"] == "boom"


def test_refusal_and_length_map_to_the_harness_vocabulary():
    refused, _ = fold(sse(delta(refusal="Cannot help (test)"), delta("stop"), "[DONE]"))
    assert (refused.message.content, refused.stop_reason) == ("Cannot help (test)", "refusal")
    filtered, _ = fold(sse(delta(content="x"), delta("content_filter"), "[DONE]"))
    assert filtered.stop_reason == "refusal"
    cut, _ = fold(sse(delta(content="x"), delta("length")))
    assert cut.stop_reason == "max_tokens"


def test_should_stop_between_chunks_carries_the_partial():
    shown_count = []
    with pytest.raises(TurnCancelled) as caught:
        fold(sse(delta(content="one "), delta(content="two "), delta(content="three"),
                 delta("stop")), should_stop=lambda: len(shown_count.append(1) or shown_count) >= 2)
    assert caught.value.partial == "one two "


def test_multi_line_data_and_comments():
    lines = [": keep-alive", "", 'data: {"choices": [{"delta": {"content": "a"},',
             'data: "finish_reason": "stop"}]}', ""]
    response, _ = fold(lines)
    assert response.message.content == "a"


def anthropic_events(*events):
    """Real SDK event objects, as the anthropic SDK yields them from a raw stream."""
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter = TypeAdapter(RawMessageStreamEvent)
    return [adapter.validate_python(e) for e in events]


START = {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
    "stop_reason": None, "stop_sequence": None,
    "usage": {"input_tokens": 4, "output_tokens": 1, "cache_read_input_tokens": 2400,
              "cache_creation_input_tokens": 0}}}
TEXT = [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "I'll write the file"}}]
TOOL = [{"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_S1", "name": "write_file", "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": '{"path":"notes.md","content":"# Ti'}}]


def test_anthropic_stream_without_message_stop_is_incomplete_never_a_finish():
    from agents.transports.anthropic_messages import read_stream as read_anthropic

    shown: list[str] = []
    with pytest.raises(StreamIncomplete):
        read_anthropic(anthropic_events(START, *TEXT, *TOOL), TextTap(shown.append),
                       lambda: False)
    assert shown == ["I'll write the file"]


def test_anthropic_stream_usage_merges_start_and_cumulative_delta():
    from agents.transports.anthropic_messages import read_stream as read_anthropic

    events = anthropic_events(
        START, *TEXT, {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"})
    response = read_anthropic(events, TextTap(lambda t: None), lambda: False)
    usage = response.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (4, 2400, 20)
    assert response.message.content == "I'll write the file" and response.model == "claude-x"
