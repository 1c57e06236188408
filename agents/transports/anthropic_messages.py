"""The Anthropic Messages transport: ModelRequest → wire body → streamed ModelResponse.

Speaks through the official ``anthropic`` SDK with streaming and the SDK's own retries off
(``max_retries=0``; agents/transports/retry.py is the only retry layer). The body's parts
(messages, system blocks, ``cache_control`` markers on a fresh body, the sidecar replayed
byte-exact, reasoning never sent) are agents/transports/anthropic_wire.py's. Same input,
same bytes: nothing here depends on time or randomness.

Not here: planning breakpoints (agents/cache.py), repairing a malformed history (the
loop's validator), classifying failures (agents/transports/errors.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic

from agents.errors import TransportError, TurnCancelled
from agents.messages import Message, ModelRequest, ModelResponse, ToolCall
from agents.providers import ProviderProfile
from agents.transports import breakpoints as bp
from agents.transports.errors import (PROVIDER_ERRORS, ClassifiedError, FailoverReason,
                                      StreamIncomplete)
from agents.transports.anthropic_wire import count_markers, render_messages, render_system
from agents.transports.retry import RetryPolicy, TextTap, call_with_retries
from agents.transports.usage import merge_anthropic_stream_usage, usage_from_anthropic


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
