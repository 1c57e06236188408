"""What both API modules share at the wire edge: the connection interface they write to, and a
scripted Reply prepared for sending (token pieces, tool-call ids, output tokens, truncation at
max_tokens). The HTTP server implements ``WireIO``; no request parsing or validation here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

from simulator.script import Reply, ToolCallSpec
from simulator.tokenizer import count_tokens, tokenize

JSON_CHUNK_CHARS = 8
"""Characters of tool-call arguments per streamed delta."""


class WireIO(Protocol):
    """One HTTP exchange as the API modules see it."""

    def send_json(self, status: int, body: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
        """A complete JSON response with Content-Length."""
        ...

    def start_stream(self, headers: dict[str, str] | None = None) -> None:
        """HTTP 200, ``text/event-stream``, chunked transfer encoding."""
        ...

    def write(self, data: bytes) -> None:
        """One chunk of the stream, flushed at once."""
        ...

    def end_stream(self) -> None:
        """The terminating zero-length chunk."""
        ...

    def cut(self) -> None:
        """Close the connection abruptly (no terminating chunk, no response if none began)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedCall:
    """A tool call with its final id and its arguments as JSON text."""

    id: str
    name: str
    input: dict[str, Any]
    arguments: str

    def chunks(self) -> list[str]:
        """The arguments split into streamed deltas."""
        text = self.arguments
        return [text[i:i + JSON_CHUNK_CHARS] for i in range(0, len(text), JSON_CHUNK_CHARS)]


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedReply:
    """A Reply ready for the wire. ``stop`` is the Anthropic stop_reason."""

    pieces: tuple[str, ...]
    calls: tuple[PreparedCall, ...]
    output_tokens: int
    stop: str
    token_delay: float

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def pause(self) -> None:
        if self.token_delay > 0:
            time.sleep(self.token_delay)


def call_tokens(call: ToolCallSpec) -> int:
    """Output tokens a scripted tool call costs (name + JSON arguments)."""
    return count_tokens(call.name) + count_tokens(json.dumps(call.input, ensure_ascii=False))


def prepare_reply(reply: Reply, *, max_tokens: int | None, id_prefix: str) -> PreparedReply:
    """Assign ids (``{id_prefix}_{i}`` unless the script fixed one), count output tokens and
    truncate at ``max_tokens``: text is cut to the budget and tool calls that do not fit are
    dropped, with stop_reason "max_tokens"."""
    pieces = tokenize(reply.text)
    budget = max_tokens if max_tokens is not None else 1 << 30
    stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    text_tokens = count_tokens(reply.text)
    calls: list[PreparedCall] = []
    if text_tokens > budget:
        pieces = pieces[:budget]
        text_tokens = count_tokens("".join(pieces))
        stop = "max_tokens"
    else:
        used = text_tokens
        for i, spec in enumerate(reply.tool_calls):
            cost = call_tokens(spec)
            if used + cost > budget:
                stop = "max_tokens"
                break
            used += cost
            calls.append(PreparedCall(id=spec.id or f"{id_prefix}_{i}", name=spec.name,
                                      input=spec.input,
                                      arguments=json.dumps(spec.input, ensure_ascii=False)))
    output = text_tokens + sum(count_tokens(c.name) + count_tokens(c.arguments) for c in calls)
    return PreparedReply(pieces=tuple(pieces), calls=tuple(calls), output_tokens=max(output, 1),
                         stop=stop, token_delay=reply.token_delay)


CUT_REPLY = Reply(text="I'll write the file.", tool_calls=(ToolCallSpec(
    name="write_file", input={"path": "notes.md",
                              "content": "# Title\n\nA stream cut in the middle of a tool call "
                                         "must never run this write.\n"}),))
"""What a "stream_cut" fault streams when the script's reply has no tool call (B21)."""
