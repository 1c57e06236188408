"""The Anthropic Messages wire body's parts: stored messages → content blocks and wire
messages (tool results as tool_result blocks, same-role runs merged), the system blocks, and
the planner's breakpoints rendered as ``cache_control`` markers on a fresh body, never on
stored messages (seed, "Four breakpoints"). Replays ``Message.wire_text`` (the sidecar)
byte-exact and never sends reasoning. Same input, same bytes.

Incremental (issue 15 target 1): a message's unmarked blocks are built once (its memo), and a
thread's last rendering is extended rather than rebuilt (``render_messages``); a worker keeps
that rendering with the session between turns (``render_cache_take`` / ``render_cache_put``).
"""

from __future__ import annotations

import threading
from typing import Any

from agents.messages import Breakpoint, Message, ToolCall, common_prefix, message_memo
from agents.transports.markers import cache_control, scaffold_split

EMPTY_TEXT = "(empty)"
"""Sent in place of a message that would otherwise be empty (the API rejects empty content;
case B17). Deterministic so the bytes stay stable."""


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The tool_use ``input`` for ``call``: its parsed arguments, or, when the stored text is
    not a JSON object, ``{"_invalid_arguments": raw}`` so the bytes stay deterministic."""
    try:
        return call.parsed_arguments()
    except ValueError:
        return {"_invalid_arguments": call.arguments}


def _message_blocks(message: Message, mark: Breakpoint | None) -> list[dict[str, Any]]:
    """Content blocks for one stored message; ``mark`` goes on the last block.

    A user message with a stable prefix is ALWAYS two text blocks [scaffold, tail], marked
    or not, so its block layout never changes between requests (a marker that moves off it
    must not change the bytes the cache hashed); the marker goes on the scaffold when the
    planner set ``split_at``, else on the tail."""
    text = message.wire_text
    blocks: list[dict[str, Any]]
    if message.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id,
                                 "content": text or EMPTY_TEXT}
        if message.is_error:
            block["is_error"] = True
        blocks = [block]
    elif message.role == "assistant":
        blocks = [{"type": "text", "text": text}] if text.strip() else []
        blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c)}
                   for c in message.tool_calls]
        blocks = blocks or [{"type": "text", "text": EMPTY_TEXT}]
    else:
        split = scaffold_split(message, mark)
        if split is not None:
            blocks = [{"type": "text", "text": text[:split]},
                      {"type": "text", "text": text[split:]}]
            if mark is not None:
                blocks[0 if mark.split_at is not None else 1]["cache_control"] = \
                    cache_control(mark.ttl)
            return blocks
        blocks = [{"type": "text", "text": text if text.strip() else EMPTY_TEXT}]
    if mark is not None:
        blocks[-1]["cache_control"] = cache_control(mark.ttl)
    return blocks


def _plain_blocks(message: Message) -> tuple[dict[str, Any], ...]:
    """``_message_blocks(message, None)``, built once per message (its memo): a message is
    an immutable value, so its unmarked wire form never changes, and rebuilding it (tool
    arguments parsed again) for the whole history on every request was O(history)."""
    memo = message_memo(message)
    blocks = memo.get("anthropic.blocks")
    if blocks is None:
        blocks = memo["anthropic.blocks"] = tuple(_message_blocks(message, None))
    return blocks


RENDER_CACHE_MIN = 32
"""Requests of at least this many messages leave their rendering in the thread's cache;
shorter ones (the estimator's one-message bodies) neither use nor evict it."""

_RENDERED = threading.local()
"""This thread's last long rendering: (messages, wire, where); see ``_plain_wire``."""


def render_messages(messages: tuple[Message, ...],
                    marks: dict[int, Breakpoint]) -> list[dict[str, Any]]:
    """Wire messages: tool results (role "tool") become tool_result blocks in a user
    message, and consecutive same-role content merges into one wire message, so a run of
    tool results plus the user's next text is ONE user message (role alternation). The few
    marked messages are built fresh; the rest are shared with the messages' memos and the
    thread's last rendering, so the body is read-only (the SDK copies it before sending).

    Incremental (issue 15 target 1: this ran inside every provider call, 5.7 ms on a
    2,000-message history, and a budget's estimate built it a second time): the unmarked
    wire form of the longest prefix this thread rendered last time is reused, and only the
    messages after it are rendered. Same input, same bytes: tests/agents/test_incremental.py
    compares it with a fresh rendering."""
    wire, where = _plain_wire(messages)
    out = list(wire)
    copied: set[int] = set()
    for index, mark in marks.items():
        if not 0 <= index < len(messages):
            continue  # a mark past the end marks nothing (as before: no message had it)
        at, first = where[index]
        marked = _message_blocks(messages[index], mark)
        count = len(_plain_blocks(messages[index]))
        if len(marked) != count:  # a layout that moves with the mark: render afresh
            return _render_fresh(messages, marks)
        if at not in copied:  # never edit a wire message the cache (or a body) shares
            out[at] = {"role": out[at]["role"], "content": list(out[at]["content"])}
            copied.add(at)
        out[at]["content"][first:first + count] = marked
    return out


def render_cache_take() -> tuple[object, int]:
    """Remove this thread's last rendering and return it with its estimated bytes beyond
    the messages it renders ((None, 0) when none): a worker keeps it with the session
    (agents/session_cache.py) and hands it back with ``render_cache_put``. Bytes: a
    (wire index, block index) pair and a tuple slot per message, a dict and a list per
    wire message (CPython 3.11 sizes, rounded up)."""
    entry = _RENDERED.__dict__.pop("entry", None)
    if entry is None:
        return None, 0
    messages, wire, where = entry
    return entry, 96 * len(messages) + 320 * len(wire) + 8 * len(where)


def render_cache_put(entry: object) -> None:
    """Make ``entry`` (from ``render_cache_take``; None: nothing) this thread's last
    rendering."""
    if entry is not None:
        _RENDERED.entry = entry


def render_cache_clear() -> None:
    """Forget this thread's last rendering (the worker calls it when a task's turns end, so
    a thread never keeps a session's history alive after its turn; agents/session_cache.py
    is what bounds kept histories)."""
    _RENDERED.__dict__.pop("entry", None)


def _plain_wire(messages: tuple[Message, ...]) -> tuple[list[dict[str, Any]], list]:
    """(the unmarked wire messages of ``messages``, where each message's blocks start: one
    (wire index, block index) per message). Extends this thread's last rendering when it
    shares a prefix with ``messages`` (agents/messages.py::common_prefix: identity first, in
    C). Cached wire messages are never edited in place: extending the last one replaces it."""
    entry = getattr(_RENDERED, "entry", None)
    wire: list[dict[str, Any]] = []
    where: list[tuple[int, int]] = []
    if entry is not None:
        old, old_wire, old_where = entry
        keep = common_prefix(messages, old)
        if keep:
            where = old_where[:keep]
            if keep < len(old):  # cut the rendering back to the shared prefix
                at, first = old_where[keep]
                wire = old_wire[:at]
                if first:
                    wire.append({"role": old_wire[at]["role"],
                                 "content": old_wire[at]["content"][:first]})
            else:
                wire = list(old_wire)
    for message in messages[len(where):]:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _plain_blocks(message)
        if wire and wire[-1]["role"] == role:
            last = wire[-1]
            where.append((len(wire) - 1, len(last["content"])))
            wire[-1] = {"role": role, "content": [*last["content"], *blocks]}
        else:
            where.append((len(wire), 0))
            wire.append({"role": role, "content": list(blocks)})
    if len(messages) >= RENDER_CACHE_MIN:
        _RENDERED.entry = (tuple(messages), wire, where)
    return wire, where


def _render_fresh(messages: tuple[Message, ...],
                  marks: dict[int, Breakpoint]) -> list[dict[str, Any]]:
    """The whole rendering without the cache (every block copied)."""
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = "assistant" if message.role == "assistant" else "user"
        mark = marks.get(index)
        blocks = (_message_blocks(message, mark) if mark is not None
                  else [dict(block) for block in _plain_blocks(message)])
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def render_system(system: str, stable_len: int | None,
                  points: tuple[Breakpoint, ...]) -> list[dict[str, Any]]:
    """System text blocks: [stable tier, rest] when ``stable_len`` is known and both parts
    hold non-blank text, else one block (none for a blank prompt); "system_stable" marks the stable block, "system" the last.
    When both land on one block it carries one marker, 1h if either asked for 1h."""
    parts = [system] if stable_len is None else [system[:stable_len], system[stable_len:]]
    if not all(part.strip() for part in parts):
        parts = [system]  # the API rejects blank blocks; keep the bytes, lose the split
    if not system.strip():
        return []
    blocks = [{"type": "text", "text": part} for part in parts]
    ttls: dict[int, str] = {}
    for point in points:
        if point.target == "system_stable":
            position = 0
        elif point.target == "system":
            position = len(blocks) - 1
        else:
            continue
        ttls[position] = "1h" if "1h" in (point.ttl, ttls.get(position)) else point.ttl
    for position, ttl in ttls.items():
        blocks[position]["cache_control"] = cache_control(ttl)
    return blocks


def count_markers(payload: dict[str, Any]) -> int:
    """How many ``cache_control`` markers ``payload`` carries (tools, system, messages)."""
    blocks = [*payload.get("tools", ()), *payload.get("system", ())]
    for message in payload.get("messages", ()):
        blocks.extend(message["content"])
    return sum(1 for block in blocks if "cache_control" in block)
