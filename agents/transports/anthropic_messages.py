"""The Anthropic Messages transport: ModelRequest → wire body → streamed ModelResponse.

Speaks through the official ``anthropic`` SDK with streaming and the SDK's own retries off
(``max_retries=0``; agents/transports/retry.py is the only retry layer). Renders the
planner's breakpoints as ``cache_control`` markers on a fresh wire body, never on stored
messages (seed, "Four breakpoints"); replays ``Message.wire_text`` (the sidecar) byte-exact
and never sends reasoning (seed, "The database stores a different string than the model
saw"). Same input, same bytes: nothing here depends on time or randomness.

Not here: planning breakpoints (agents/cache.py), repairing a malformed history (the
loop's validator), classifying failures (agents/transports/errors.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import anthropic

from agents.errors import TransportError, TurnCancelled
from agents.messages import (Breakpoint, Message, ModelRequest, ModelResponse, ToolCall,
                             common_prefix, message_memo)
from agents.providers import ProviderProfile
from agents.transports import breakpoints as bp
from agents.transports.errors import (PROVIDER_ERRORS, ClassifiedError, FailoverReason,
                                      StreamIncomplete)
from agents.transports.markers import cache_control, scaffold_split
from agents.transports.retry import RetryPolicy, TextTap, call_with_retries
from agents.transports.usage import merge_anthropic_stream_usage, usage_from_anthropic

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


class AnthropicTransport:
    """Anthropic Messages over the official SDK, streaming (agents.Transport).

    ``api_key``: the key value (None for keyless endpoints such as the simulator).
    ``model``: default when a request names none (else the profile's). ``timeout``: seconds
    per request. ``retry`` / ``sleep``: the retry policy and its clock (tests pass tiny
    delays and a recording sleep). ``breakpoint_store``: where learned breakpoint limits
    live (the database in the app); ``breakpoint_limit``: the per-endpoint setting for a
    known proxy (HERMES_BREAKPOINT_LIMITS).
    """

    def __init__(self, profile: ProviderProfile, *, api_key: str | None,
                 model: str | None = None, timeout: float = 600.0,
                 retry: RetryPolicy | None = None,
                 sleep: Callable[[float], None] | None = None,
                 breakpoint_store: bp.LimitStore | None = None,
                 breakpoint_limit: int | None = None) -> None:
        self.profile = profile
        self.limits = breakpoint_store or bp.PROCESS_LIMITS
        self.configured_limit = breakpoint_limit
        self._clamp_ttl = False
        self.model = model or profile.default_model
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        # The SDK would otherwise read ANTHROPIC_API_KEY itself; agents/ never reads the
        # environment, so a keyless endpoint gets a placeholder.
        self._client = anthropic.Anthropic(api_key=api_key or "no-key",
                                           base_url=profile.base_url, max_retries=0,
                                           timeout=timeout)

    def build_payload(self, request: ModelRequest) -> dict[str, Any]:
        """The exact JSON body ``complete`` sends: model, max_tokens, tools (only when
        there are some), system blocks, messages, stream; markers rendered for the
        breakpoints this route may carry (agents/transports/breakpoints.py). Read-only:
        its unmarked blocks are shared with the messages' memos (``render_messages``)."""
        # No breakpoints (the estimator's one-message bodies): nothing to limit, so the
        # learned limit (a database read in the worker) is not looked up.
        points = bp.select_breakpoints(
            request.breakpoints,
            limit=bp.limit_for(self.profile, self.limits, self.configured_limit),
            n_messages=len(request.messages),
            allow_1h=self.profile.supports_1h_ttl and not self._clamp_ttl,
        ) if request.breakpoints else ()
        marks = {p.index: p for p in points if p.target == "message"}
        payload: dict[str, Any] = {"model": request.model or self.model,
                                   "max_tokens": request.max_tokens}
        if request.tools:
            payload["tools"] = [{"name": t.name, "description": t.description,
                                 "input_schema": t.input_schema} for t in request.tools]
        system = render_system(request.system, request.stable_len, points)
        if system:
            payload["system"] = system
        payload["messages"] = render_messages(request.messages, marks)
        payload["stream"] = True
        return payload

    def complete(self, request: ModelRequest, *, on_text: Callable[[str], None],
                 should_stop: Callable[[], bool] = lambda: False) -> ModelResponse:
        """Stream one reply (see agents.Transport.complete). A "maximum of N blocks with
        cache_control" 400 is retried once with fewer breakpoints, and the lower limit is
        remembered for this base_url (issue 3 item 3); a TTL-order 400 (a gateway's own 5m
        marker ahead of our 1h one) is retried once with every TTL clamped to 5m, and this
        transport keeps clamping (issue 10 defect 8). Raises TransportError or
        TurnCancelled (``.partial`` = text delivered so far)."""
        if should_stop():
            raise _cancelled("", billed=False)
        payload = self.build_payload(request)
        try:
            return self._send(payload, on_text, should_stop)
        except TransportError as error:
            if not self._learn_from(error, payload):
                raise
            fewer = self.build_payload(request)
            if fewer == payload:  # nothing changed: never resend the same bytes
                raise
        try:
            return self._send(fewer, on_text, should_stop)
        except TransportError as error:
            self._learn_from(error, fewer)
            raise

    def _learn_from(self, error: TransportError, payload: dict[str, Any]) -> bool:
        """If ``error`` is the breakpoint-limit 400, remember a lower limit for this
        endpoint and return True; else False."""
        classified = error.classified
        if not isinstance(classified, ClassifiedError) \
                or classified.reason is not FailoverReason.CACHE_BREAKPOINT_LIMIT:
            return False
        if classified.ttl_conflict:
            self._clamp_ttl = True
            return True
        bp.remember_limit(self.profile.base_url,
                          bp.lower_limit(count_markers(payload), classified.breakpoint_limit,
                                         classified.breakpoints_found), self.limits)
        return True

    def _send(self, payload: dict[str, Any], on_text: Callable[[str], None],
              should_stop: Callable[[], bool]) -> ModelResponse:
        body = {k: v for k, v in payload.items() if k != "stream"}

        def attempt(tap: TextTap) -> ModelResponse:
            stream = self._client.messages.create(**body, stream=True)
            with stream:
                return read_stream(stream, tap, should_stop)

        kwargs = {"sleep": self._sleep} if self._sleep else {}
        return call_with_retries(attempt, on_text=on_text, policy=self.retry, **kwargs)


def _cancelled(partial: str, *, billed: bool,
               start_usage: dict[str, Any] | None = None) -> TurnCancelled:
    """A stop. ``billed``: mid-stream (an event had arrived, so the request is being
    answered and paid for), with the buckets message_start reported (input and cache;
    output is counted from ``partial`` by the sink)."""
    return TurnCancelled("stopped by the user while the reply streamed", partial=partial,
                         billed=billed,
                         usage=usage_from_anthropic(start_usage) if start_usage else None)


def read_stream(events: Any, tap: TextTap, should_stop: Callable[[], bool]) -> ModelResponse:
    """Fold the SDK's raw stream events into a ModelResponse, sending text deltas to ``tap``.

    A tool_use block counts only once its content_block_stop arrived: a half-built call is
    never returned (case B21). A stream that ends without message_stop raises
    StreamIncomplete (case B22). ``should_stop`` is checked after every event.
    """
    blocks: dict[int, dict[str, Any]] = {}
    reasoning: list[str] = []
    start_usage: dict[str, Any] = {}
    delta_usage: dict[str, Any] = {}
    stop_reason, model, finished = "end_turn", "", False
    try:
        for event in events:
            kind = event.type
            _fold(event, kind, blocks, reasoning, tap)
            if kind == "message_start":
                model = event.message.model
                start_usage = event.message.usage.model_dump(exclude_none=True)
            elif kind == "message_delta":
                stop_reason = event.delta.stop_reason or stop_reason
                if event.usage is not None:
                    delta_usage = event.usage.model_dump(exclude_none=True)
            elif kind == "message_stop":
                finished = True
            if should_stop():
                raise _cancelled(tap.text, billed=True, start_usage=start_usage)
        if not finished:
            raise StreamIncomplete("the stream closed before message_stop")
    except TurnCancelled:
        raise
    except PROVIDER_ERRORS as exc:  # a cut or an error event: name the call being written
        tap.interrupted_call = next(
            (b["name"] for b in blocks.values() if b["type"] == "tool_use" and not b["done"]),
            None)
        if start_usage:  # message_start came: the provider was answering, and bills it
            tap.billed = usage_from_anthropic(
                {**merge_anthropic_stream_usage(start_usage, delta_usage), "failed": True})
        raise
    return _response(blocks, reasoning, start_usage, delta_usage, stop_reason, model)


def _fold(event: Any, kind: str, blocks: dict[int, dict[str, Any]], reasoning: list[str],
          tap: TextTap) -> None:
    """Fold one content event into ``blocks`` (text deltas go to ``tap``)."""
    if kind == "content_block_start":
        block = event.content_block
        if block.type == "text":
            blocks[event.index] = {"type": "text", "text": [block.text]}
            if block.text:
                tap(block.text)
        elif block.type == "tool_use":
            blocks[event.index] = {"type": "tool_use", "id": block.id, "name": block.name,
                                   "input": block.input, "json": [], "done": False}
    elif kind == "content_block_delta":
        delta, block = event.delta, blocks.get(event.index)
        if delta.type == "text_delta" and block is not None:
            block["text"].append(delta.text)
            tap(delta.text)
        elif delta.type == "input_json_delta" and block is not None:
            block["json"].append(delta.partial_json)
        elif delta.type == "thinking_delta":
            reasoning.append(delta.thinking)
    elif kind == "content_block_stop" and event.index in blocks:
        blocks[event.index]["done"] = True


def _response(blocks: dict[int, dict[str, Any]], reasoning: list[str],
              start_usage: dict[str, Any], delta_usage: dict[str, Any], stop_reason: str,
              model: str) -> ModelResponse:
    ordered = [blocks[i] for i in sorted(blocks)]
    text = "".join("".join(b["text"]) for b in ordered if b["type"] == "text")
    calls = tuple(
        ToolCall(id=b["id"], name=b["name"],
                 arguments="".join(b["json"]) or (json.dumps(b["input"]) if b["input"] else "{}"))
        for b in ordered if b["type"] == "tool_use" and b["done"])
    raw_usage = merge_anthropic_stream_usage(start_usage, delta_usage)
    return ModelResponse(
        message=Message(role="assistant", content=text, tool_calls=calls,
                        reasoning="".join(reasoning) or None),
        usage=usage_from_anthropic(raw_usage) if raw_usage else None,
        stop_reason=stop_reason, model=model)
