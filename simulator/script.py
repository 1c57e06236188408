"""Scripted replies: what the simulated model says, chosen by rules or by a Python callable.

A script maps a ``ScriptRequest`` (the request reduced to what a policy needs, same shape for
both wire formats) to a ``Reply`` (text and/or tool calls, per-token delay). Rules match on
the last user text and/or the newest tool results by regex; the first matching rule wins.
Wire rendering is in the API modules; the default policy is ``simulator.demo``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from simulator.prefix import content_text


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallSpec:
    """A tool call the simulated model emits. ``id`` None means the server assigns one."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What the simulated model answers.

    ``token_delay``: seconds slept before each streamed token. ``stop_reason`` None means
    "tool_use" when there are tool calls else "end_turn" (Anthropic names; OpenAI gets the
    matching finish_reason).
    """

    text: str = ""
    tool_calls: tuple[ToolCallSpec, ...] = ()
    token_delay: float = 0.0
    stop_reason: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reply:
        """From JSON: {"text", "tool_calls": [{"name", "input", "id"?}], "token_delay",
        "stop_reason"}."""
        return cls(text=str(data.get("text", "")),
                   tool_calls=tuple(ToolCallSpec(name=c["name"], input=dict(c.get("input") or {}),
                                                 id=c.get("id"))
                                    for c in data.get("tool_calls") or ()),
                   token_delay=float(data.get("token_delay", 0.0)),
                   stop_reason=data.get("stop_reason"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExchange:
    """One answered tool call in the newest message: what was called and what came back."""

    name: str
    input: dict[str, Any]
    result: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptRequest:
    """The request as a policy sees it.

    - ``endpoint``: "anthropic" or "openai"; ``body``: the JSON body as received.
    - ``tool_names``: the tools offered (empty for a finalizer call).
    - ``last_user_text``: text of the newest user message that has text ("" if none).
    - ``last_user_blocks``: that message's text blocks, in order, as sent (the Anthropic
      wire merges consecutive user messages into one, so a summary the harness inserted
      arrives as a block of its own before the person's; simulator.framing reads them).
    - ``tool_results``: the tool calls answered in the newest message(s), in order; empty
      unless the request ends with tool results (a text block after the results of the
      newest Anthropic user message is a new question: then empty, and that text is
      ``last_user_text``).
    - ``iteration``: number of assistant messages already in the history.
    """

    endpoint: str
    model: str
    body: dict[str, Any]
    tool_names: tuple[str, ...]
    last_user_text: str
    tool_results: tuple[ToolExchange, ...]
    iteration: int
    last_user_blocks: tuple[str, ...] = ()

    @classmethod
    def from_body(cls, endpoint: str, body: dict[str, Any]) -> ScriptRequest:
        if endpoint == "anthropic":
            return _from_anthropic(body)
        return _from_openai(body)


def _from_anthropic(body: dict[str, Any]) -> ScriptRequest:
    messages = body.get("messages") or []
    last_user, last_blocks = "", ()
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = (content,) if isinstance(content, str) else tuple(
            str(b.get("text", "")) for b in content or [] if b.get("type") == "text")
        text = "\n".join(blocks)
        if text:
            last_user, last_blocks = text, blocks
            break
    exchanges: list[ToolExchange] = []
    last = messages[-1].get("content") if messages else None
    if len(messages) >= 2 and isinstance(last, list) and not _text_follows_results(last):
        previous = messages[-2].get("content")
        calls = {b.get("id"): b for b in previous if b.get("type") == "tool_use"} \
            if isinstance(previous, list) else {}
        for block in last:
            if block.get("type") == "tool_result":
                call = calls.get(block.get("tool_use_id"), {})
                exchanges.append(ToolExchange(
                    name=str(call.get("name", "")), input=dict(call.get("input") or {}),
                    result=content_text(block.get("content", "")),
                    is_error=bool(block.get("is_error", False))))
    return ScriptRequest(
        endpoint="anthropic", model=str(body.get("model", "")), body=body,
        tool_names=tuple(str(t.get("name")) for t in body.get("tools") or []),
        last_user_text=last_user, last_user_blocks=last_blocks, tool_results=tuple(exchanges),
        iteration=sum(1 for m in messages if m.get("role") == "assistant"))


def _text_follows_results(blocks: list[dict[str, Any]]) -> bool:
    """Does a non-empty text block come after the tool results of this user message? The
    Anthropic wire merges a person's new message into the user message that answers an
    interrupted turn's tool calls; the newest thing said is then that text, not the results."""
    seen_result = False
    for block in blocks:
        if block.get("type") == "tool_result":
            seen_result = True
        elif seen_result and block.get("type") == "text" and str(block.get("text", "")).strip():
            return True
    return False


def _from_openai(body: dict[str, Any]) -> ScriptRequest:
    messages = body.get("messages") or []
    newest = next((m.get("content") for m in reversed(messages)
                   if m.get("role") == "user" and content_text(m.get("content"))), "")
    last_user = content_text(newest)
    blocks = tuple(content_text([part]) for part in newest) if isinstance(newest, list) \
        else (last_user,)
    exchanges: list[ToolExchange] = []
    tail = len(messages)
    while tail > 0 and messages[tail - 1].get("role") == "tool":
        tail -= 1
    if tail < len(messages) and tail > 0:
        calls = {c.get("id"): c for c in messages[tail - 1].get("tool_calls") or []}
        for message in messages[tail:]:
            function = (calls.get(message.get("tool_call_id")) or {}).get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            exchanges.append(ToolExchange(
                name=str(function.get("name", "")),
                input=arguments if isinstance(arguments, dict) else {},
                result=content_text(message.get("content"))))
    return ScriptRequest(
        endpoint="openai", model=str(body.get("model", "")), body=body,
        tool_names=tuple(str((t.get("function") or {}).get("name"))
                         for t in body.get("tools") or []),
        last_user_text=last_user, last_user_blocks=tuple(b for b in blocks if b),
        tool_results=tuple(exchanges),
        iteration=sum(1 for m in messages if m.get("role") == "assistant"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptRule:
    """Reply with ``reply`` when both given regexes match (re.search, case-insensitive,
    DOTALL): ``user`` against the last user text, ``tool_result`` against any of the newest
    tool results (a rule with ``tool_result`` set never matches a request that does not end
    with tool results). A rule with neither matches everything."""

    reply: Reply
    user: str | None = None
    tool_result: str | None = None

    def matches(self, request: ScriptRequest) -> bool:
        flags = re.IGNORECASE | re.DOTALL
        if self.user is not None and not re.search(self.user, request.last_user_text, flags):
            return False
        if self.tool_result is not None:
            return any(re.search(self.tool_result, x.result, flags) for x in request.tool_results)
        return True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScriptRule:
        """From JSON: {"user"?, "tool_result"?, "text"?, "tool_calls"?, "token_delay"?}.
        Raises re.error for a bad pattern, KeyError for a tool call without a name."""
        for key in ("user", "tool_result"):
            if data.get(key) is not None:
                re.compile(data[key])
        return cls(reply=Reply.from_dict(data), user=data.get("user"),
                   tool_result=data.get("tool_result"))


Policy = Callable[[ScriptRequest], Union[Reply, dict]]
FALLBACK = Reply(text="(simulated model) No script rule matched this request.")


class Script:
    """Rules or a callable policy. ``reply_for`` never raises for a well-formed request: if
    nothing matches, the FALLBACK reply is used."""

    def __init__(self, source: list[ScriptRule] | Policy) -> None:
        self.source = source

    @classmethod
    def from_json(cls, rules: list[dict[str, Any]]) -> Script:
        return cls([ScriptRule.from_dict(r) for r in rules])

    def reply_for(self, request: ScriptRequest) -> Reply:
        if callable(self.source):
            reply = self.source(request)
            return Reply.from_dict(reply) if isinstance(reply, dict) else reply
        for rule in self.source:
            if rule.matches(request):
                return rule.reply
        return FALLBACK
