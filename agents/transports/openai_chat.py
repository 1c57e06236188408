"""The OpenAI-compatible chat-completions transport: httpx with SSE streaming.

One wire shape for OpenAI, OpenRouter, vLLM, Ollama and llama.cpp's server (the profile
gives the ``.../v1`` root). Usage is requested in the stream (``stream_options``), since
without it a streamed reply carries none (case B28). Cache markers only on envelope routes
(``profile.envelope_markers``: OpenRouter-style gateways carry Anthropic's ``cache_control``
on content parts, issue 15 item 5); there system, user and assistant-text content is ALWAYS
sent as text parts, marked or not, so a marker that moves never changes the bytes the cache
hashed. Plain OpenAI-compatible routes get no markers (automatic caching). Replays
``Message.wire_text`` byte-exact, never reasoning.

Not here: Anthropic's wire shape (anthropic_messages.py), failure classification
(errors.py), retries (retry.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError

from agents.context.tokens import estimate_payload_tokens, estimate_text_tokens
from agents.errors import TurnCancelled
from agents.messages import (Breakpoint, Message, ModelRequest, ModelResponse, ToolCall, Usage,
                             message_memo)
from agents.providers import ProviderProfile
from agents.transports.errors import (PROVIDER_ERRORS, ProviderHTTPError, StreamErrorEvent,
                                      StreamIncomplete)
from agents.transports.markers import cache_control, scaffold_split
from agents.transports.retry import RetryPolicy, TextTap, call_with_retries
from agents.transports.usage import usage_from_openai

EMPTY_TEXT = "(empty)"
"""Sent in place of content that would otherwise be empty (case B17)."""

FINISH_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                  "length": "max_tokens", "content_filter": "refusal"}
"""OpenAI ``finish_reason`` → the harness's stop-reason vocabulary (Anthropic's words)."""


def wire_arguments(call: ToolCall) -> str:
    """The ``function.arguments`` string: the stored text when it is a JSON object, else
    ``{"_invalid_arguments": raw}`` (strict servers parse it; bytes stay deterministic)."""
    try:
        call.parsed_arguments()
    except ValueError:
        return json.dumps({"_invalid_arguments": call.arguments})
    return call.arguments


def _memoised(message: Message, key: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A copy of ``message``'s wire form ``key``, built once per message (its memo): the
    message is an immutable value, so re-rendering the whole history (tool arguments parsed
    again) on every request was O(history). Copied down to content parts, since a caller
    may edit its payload."""
    memo = message_memo(message)
    rendered = memo.get(key)
    if rendered is None:
        rendered = memo[key] = build()
    fresh = dict(rendered)
    if isinstance(fresh.get("content"), list):
        fresh["content"] = [dict(part) for part in fresh["content"]]
    return fresh


def render_message(message: Message) -> dict[str, Any]:
    """One stored message in O-shape. An assistant message with tool calls and no text
    sends ``content: null`` (case B17). Memoised per message (a fresh copy each call)."""
    return _memoised(message, "openai.message", lambda: _render_message(message))


def _render_message(message: Message) -> dict[str, Any]:
    text = message.wire_text
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id,
                "content": text or EMPTY_TEXT}
    if message.role == "assistant":
        if not message.tool_calls:
            return {"role": "assistant", "content": text or EMPTY_TEXT}
        return {"role": "assistant", "content": text or None, "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": wire_arguments(c)}}
            for c in message.tool_calls]}
    return {"role": "user", "content": text or EMPTY_TEXT}


def _parts(texts: list[str], marked: int | None, ttl: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    if marked is not None:
        parts[marked]["cache_control"] = cache_control(ttl)
    return parts


def render_envelope_message(message: Message, mark: Breakpoint | None) -> dict[str, Any]:
    """One stored message on an envelope route: user and assistant text as text parts (a
    user message with a stable prefix always as [scaffold, tail], the marker on the scaffold
    when the planner set ``split_at``), ``mark`` on the last part. Tool messages and an
    assistant message that is only tool calls carry no marker (the route drops them; the
    planner never puts one there), so they render as on plain routes. An unmarked message
    is memoised per message (a fresh copy each call)."""
    if mark is None:
        return _memoised(message, "openai.envelope", lambda: _render_envelope(message, None))
    return _render_envelope(message, mark)


def _render_envelope(message: Message, mark: Breakpoint | None) -> dict[str, Any]:
    base = _render_message(message)
    if message.role == "tool" or (message.role == "assistant" and base["content"] is None):
        return base
    ttl = mark.ttl if mark is not None else "5m"
    if message.role == "user":
        split = scaffold_split(message, mark)
        if split is not None:
            text = message.wire_text
            at = None if mark is None else (0 if mark.split_at is not None else 1)
            return {**base, "content": _parts([text[:split], text[split:]], at, ttl)}
    return {**base, "content": _parts([base["content"]], 0 if mark else None, ttl)}


def render_envelope_system(system: str, stable_len: int | None,
                           points: tuple[Breakpoint, ...]) -> dict[str, Any]:
    """The system message on an envelope route: [stable tier, rest] text parts when both
    are non-blank, else one part; "system_stable" marks the first, "system" the last (one
    marker, 1h if either asked for it, when both land on one part)."""
    texts = [system] if stable_len is None else [system[:stable_len], system[stable_len:]]
    if not all(t.strip() for t in texts):
        texts = [system]
    parts = _parts(texts, None, "5m")
    ttls: dict[int, str] = {}
    for point in points:
        if point.target in ("system_stable", "system"):
            position = 0 if point.target == "system_stable" else len(parts) - 1
            ttls[position] = "1h" if "1h" in (point.ttl, ttls.get(position)) else point.ttl
    for position, ttl in ttls.items():
        parts[position]["cache_control"] = cache_control(ttl)
    return {"role": "system", "content": parts}


def merge_same_role(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive user messages, and consecutive assistant messages without tool calls
    (their text separated by a blank line), for servers whose chat template demands
    alternation (issue 10 defect 6: after a failed turn or a repaired orphan two user
    messages follow each other). Tool messages are never merged and an assistant message
    that carries tool calls is never merged INTO, so every call keeps its results right
    after it, results first. Deterministic: same input, same bytes."""
    out: list[dict[str, Any]] = []
    for message in messages:
        last = out[-1] if out else None
        if (last is not None and message["role"] == last["role"] in ("user", "assistant")
                and not last.get("tool_calls") and isinstance(last.get("content"), str)):
            joined = "\n\n".join(part for part in (last["content"], message.get("content") or "")
                                  if part and part != EMPTY_TEXT)
            if not joined:
                joined = None if message.get("tool_calls") else EMPTY_TEXT
            out[-1] = {**message, "content": joined}
        else:
            out.append(message)
    return out


class OpenAIChatTransport:
    """OpenAI-compatible chat completions with SSE streaming (agents.Transport).

    ``api_key``: sent as a Bearer token when given. ``model``: default when a request names
    none. ``timeout``: seconds per read/connect. ``retry`` / ``sleep``: retry policy and
    its clock. ``http``: an httpx.Client to reuse (else one is created).
    """

    def __init__(self, profile: ProviderProfile, *, api_key: str | None,
                 model: str | None = None, timeout: float = 600.0,
                 retry: RetryPolicy | None = None,
                 sleep: Callable[[float], None] | None = None,
                 http: httpx.Client | None = None) -> None:
        self.profile = profile
        self.model = model or profile.default_model
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = http or httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0),
                                          headers=headers)
        self._url = f"{profile.base_url.rstrip('/')}/chat/completions"

    def build_payload(self, request: ModelRequest) -> dict[str, Any]:
        """The exact JSON body ``complete`` posts: model, messages (system first), the output
        cap under the profile's field name, tools (only when there are some), stream and
        stream_options. Breakpoints become ``cache_control`` parts on envelope routes only."""
        if self.profile.envelope_markers:
            marks = {b.index: b for b in request.breakpoints if b.target == "message"}
            messages = ([render_envelope_system(request.system, request.stable_len,
                                                request.breakpoints)]
                        if request.system else [])
            rendered = [render_envelope_message(m, marks.get(i))
                        for i, m in enumerate(request.messages)]
        else:
            messages = [{"role": "system", "content": request.system}] if request.system else []
            rendered = [render_message(m) for m in request.messages]
        messages += merge_same_role(rendered) if self.profile.strict_alternation else rendered
        payload: dict[str, Any] = {"model": request.model or self.model, "messages": messages,
                                   self.profile.max_tokens_field: request.max_tokens}
        if request.tools:
            payload["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}}
                for t in request.tools]
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
        return payload

    def complete(self, request: ModelRequest, *, on_text: Callable[[str], None],
                 should_stop: Callable[[], bool] = lambda: False) -> ModelResponse:
        """Stream one reply (see agents.Transport.complete). Raises TransportError after
        the retry policy, or TurnCancelled (``.partial`` = text delivered so far)."""
        if should_stop():
            raise _cancelled("", billed=False)
        payload = self.build_payload(request)

        def attempt(tap: TextTap) -> ModelResponse:
            with self._http.stream("POST", self._url, json=payload) as response:
                if response.status_code >= 400:
                    response.read()
                    try:
                        body: Any = response.json()
                    except ValueError:
                        body = response.text
                    raise ProviderHTTPError(response.status_code, body, response.headers)
                return read_stream(_sse_data(response), tap, should_stop,
                                   prompt_tokens=lambda: estimate_payload_tokens(
                                       payload, self.profile.tokenizer_family))

        kwargs = {"sleep": self._sleep} if self._sleep else {}
        return call_with_retries(attempt, on_text=on_text, policy=self.retry, **kwargs)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()


def _cancelled(partial: str, *, billed: bool) -> TurnCancelled:
    """``billed``: a chunk had arrived (the request is being answered; chat-completions
    reports usage only in the last chunk, so the sink estimates it)."""
    return TurnCancelled("stopped by the user while the reply streamed", partial=partial,
                         billed=billed)


def _sse_data(response: httpx.Response) -> Iterator[str]:
    """The non-empty ``data`` payloads of an SSE response, decoded by httpx-sse (multi-line
    data, comments, ids, retry fields). A response that is not an event stream raises
    StreamIncomplete: no final event can ever arrive on it."""
    try:
        for event in EventSource(response).iter_sse():
            if event.data:
                yield event.data
    except SSEError as exc:
        raise StreamIncomplete(str(exc)) from exc


def read_stream(chunks: Iterator[str], tap: TextTap, should_stop: Callable[[], bool], *,
                prompt_tokens: Callable[[], int] = lambda: 0) -> ModelResponse:
    """Fold chat-completion chunks into a ModelResponse, sending text deltas to ``tap``.

    Tool calls accumulate by ``index``; reasoning (``reasoning_content`` / ``reasoning``)
    is kept for display and never sent to ``tap``; the usage chunk may come last with no
    choices. An ``error`` object mid-stream raises StreamErrorEvent; a stream with neither
    a finish_reason nor ``[DONE]`` raises StreamIncomplete (case B22). A stream that fails
    after its first chunk sets ``tap.billed`` to ``cut_usage`` (``prompt_tokens()``: the
    estimated input of the request, tokens; only called then, as it walks the payload).
    """
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    received = [False]
    try:
        return _fold_chunks(chunks, tap, should_stop, text, reasoning, refusal, calls, received)
    except PROVIDER_ERRORS as exc:  # a cut or an error event: name the call being written
        tap.interrupted_call = next((s["name"] for _, s in sorted(calls.items())
                                     if s["name"]), None)
        if received[0]:  # the provider was answering: it bills what it generated
            generated = "".join([*text, *reasoning, *refusal, *(
                s["name"] + "".join(s["arguments"]) for _, s in sorted(calls.items()))])
            tap.billed = cut_usage(prompt_tokens(), generated)
        raise


def cut_usage(prompt_tokens: int, generated: str) -> Usage:
    """The usage of a chat-completions stream that failed after it began (a cut connection,
    an error event): such a route reports usage only in its last chunk, which never came,
    yet the provider bills the prompt and every token it generated. Without a figure the
    attempt was charged nothing and spend was under-counted, while Anthropic's stream
    reports its input in message_start (anthropic_messages.py). ``prompt_tokens``: the
    project's estimate of the request (agents/context/tokens.py over the posted payload) as
    uncached input; ``generated``: the text, reasoning and tool-call names and arguments
    received, estimated the same way as output (tokens). ``raw`` says ``estimated`` (the
    record is flagged so) and ``failed``."""
    return Usage(input_tokens=prompt_tokens, output_tokens=estimate_text_tokens(generated),
                 raw={"estimated": True, "failed": True})


def _fold_chunks(chunks: Iterator[str], tap: TextTap, should_stop: Callable[[], bool],
                 text: list[str], reasoning: list[str], refusal: list[str],
                 calls: dict[int, dict[str, Any]], received: list[bool]) -> ModelResponse:
    usage: dict[str, Any] | None = None
    finish, model, done = "", "", False
    for data in chunks:
        received[0] = True
        if data.strip() == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        if isinstance(chunk.get("error"), dict):
            raise StreamErrorEvent(chunk)
        model = chunk.get("model") or model
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
                tap(delta["content"])
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    reasoning.append(delta[key])
            if delta.get("refusal"):
                refusal.append(delta["refusal"])
            for position, part in enumerate(delta.get("tool_calls") or ()):
                slot = calls.setdefault(part.get("index", position),
                                        {"id": "", "name": "", "arguments": []})
                slot["id"] = part.get("id") or slot["id"]
                function = part.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"].append(function.get("arguments") or "")
            finish = choice.get("finish_reason") or finish
        if should_stop():
            raise _cancelled("".join(text), billed=True)
    if not (done or finish):
        raise StreamIncomplete("the stream closed before a finish_reason or [DONE]")
    content = "".join(text)
    if refusal and not content:
        content, finish = "".join(refusal), "refusal"
    tool_calls = tuple(
        ToolCall(id=slot["id"] or f"call_{index}", name=slot["name"],
                 arguments="".join(slot["arguments"]) or "{}")
        for index, slot in sorted(calls.items()))
    return ModelResponse(
        message=Message(role="assistant", content=content, tool_calls=tool_calls,
                        reasoning="".join(reasoning) or None),
        usage=usage_from_openai(usage) if usage else None,
        stop_reason=FINISH_REASONS.get(finish, finish or "end_turn"), model=model)
