"""The harness's value objects: Message, ToolCall, Usage, ModelRequest, ModelResponse.

These are the only shapes that cross module boundaries inside ``agents/`` and the bridge to
the Django side (``sessions/tasks.py``). Plain dicts appear only at the JSON edge
(``to_dict``/``from_dict``) and at the wire edge (``agents/transports/``). Cache markers are
NOT stored here: the planner (``agents/cache.py``) describes them as ``Breakpoint`` values on
a ``ModelRequest``, and transports render them onto a copy of the wire payload.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Role = Literal["user", "assistant", "tool"]
TTL = Literal["5m", "1h"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call as the model emitted it.

    ``arguments`` is the raw JSON text exactly as received (possibly invalid JSON: the loop
    turns a parse failure into an error tool result, never a crash).
    """

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """Return the arguments as a dict. Raises ValueError if not a JSON object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=data.get("arguments", "{}"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One transcript message, provider-neutral.

    - ``role``: "user", "assistant" or "tool" (the system prompt lives on the Session).
    - ``content``: what a human reads.
    - ``sent_content``: the exact text sent to the provider when it differs from ``content``
      (seed, "The database stores a different string than the model saw"); replayed
      verbatim, never re-derived. ``None`` means ``content`` was sent.
    - ``tool_calls``: for assistant messages.
    - ``tool_call_id`` / ``tool_name`` / ``is_error``: for tool results.
    - ``reasoning``: display only; never replayed to a provider.
    - ``stable_prefix_len``: for machine-built messages (skill invocations, scheduled
      prompts), the chars of ``wire_text`` that are static scaffold, declared by the builder
      (seed, "When only the builder knows where the prefix ends"); stored, so the split
      survives restarts. ``None`` for ordinary messages.
    - ``kind``: what the message is beyond its role, as a field (never read from the text):
      "" ordinary, "summary" a compaction summary, "rolling_summary" the micro-compaction
      summary, "incomplete"/"refusal" (agents/recovery.py). Stored as Message.kind.
    - ``id``: the database row id once stored (the only ordering), else ``None``.
    """

    role: Role
    content: str = ""
    sent_content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    reasoning: str | None = None
    stable_prefix_len: int | None = None
    kind: str = ""
    id: int | None = None
    _memo: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    """Derived values of this (immutable) message, computed once (``message_memo``): what
    the harness derives from a message per request (wire blocks, token weights, bytes) is
    then O(new messages) per iteration instead of O(history). Not a value: excluded from
    equality, hashing and repr, and a ``replace()`` copy starts empty."""

    @property
    def wire_text(self) -> str:
        """The text to replay to the provider: the sidecar if present, else content."""
        return self.sent_content if self.sent_content is not None else self.content

    def with_id(self, id: int) -> Message:
        return replace(self, id=id)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.sent_content is not None:
            data["sent_content"] = self.sent_content
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.tool_name is not None:
            data["tool_name"] = self.tool_name
        if self.is_error:
            data["is_error"] = True
        if self.reasoning:
            data["reasoning"] = self.reasoning
        if self.stable_prefix_len is not None:
            data["stable_prefix_len"] = self.stable_prefix_len
        if self.kind:
            data["kind"] = self.kind
        if self.id is not None:
            data["id"] = self.id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content", ""),
            sent_content=data.get("sent_content"),
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            tool_call_id=data.get("tool_call_id"),
            tool_name=data.get("tool_name"),
            is_error=bool(data.get("is_error", False)),
            reasoning=data.get("reasoning"),
            stable_prefix_len=data.get("stable_prefix_len"),
            kind=data.get("kind", ""),
            id=data.get("id"),
        )


def message_memo(message: Message) -> dict[str, Any]:
    """The memo dict of ``message`` (created empty on first use). Keys are owned by the
    module that derives the value (e.g. "anthropic.blocks"); values must be pure functions of
    the message's fields, so a memo can never make a result differ from a fresh computation.
    A race between threads at worst computes a value twice."""
    memo = message._memo
    if memo is None:
        memo = {}
        object.__setattr__(message, "_memo", memo)  # frozen: the memo is not a field value
    return memo


def common_prefix(a: Sequence[Message], b: Sequence[Message]) -> int:
    """How many leading messages ``a`` and ``b`` share: equal values, the same objects being
    the case of every iteration of a growing history. Memos of values derived from messages
    (weights, digests, wire forms) are valid exactly that far. Sequence equality compares
    identity first and runs in C, ~10x faster than a Python-level walk; a difference is
    located by halving, so the whole costs O(len) comparisons either way."""
    if not (type(a) is type(b) and type(a) in (list, tuple)):
        a, b = list(a), list(b)
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; the first difference is in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def tool_result(call: ToolCall, content: str, *, is_error: bool = False) -> Message:
    """Build the tool-result message answering ``call``."""
    return Message(role="tool", content=content, tool_call_id=call.id, tool_name=call.name,
                   is_error=is_error)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage of one provider call in four disjoint priced buckets (seed, "The struct
    that makes cost accounting possible"; hermes-facts §13).

    All fields are token counts. ``input_tokens`` is uncached input only; cache writes are
    split by TTL. ``reasoning_tokens`` is a breakdown of output, not a peer. ``raw`` is the
    provider's usage object as received.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def prompt_tokens(self) -> int:
        """Billed prompt size, derived (never stored): input + cache read + cache write."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_5m_tokens": self.cache_write_5m_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "reasoning_tokens": self.reasoning_tokens, "raw": self.raw,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(**{k: data.get(k, 0) for k in (
            "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_5m_tokens",
            "cache_write_1h_tokens", "reasoning_tokens")}, raw=data.get("raw") or {})


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool's schema as sent to the model: name, description, JSON-schema input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Breakpoint:
    """One cache breakpoint chosen by the planner (agents/cache.py).

    ``target``: "system_stable" (end of the stable tier), "system" (end of the system
    prompt) or "message" (end of ``messages[index]``). ``split_at``: for a message whose
    stable prefix is registered, the char offset where the cached block ends; the transport
    then sends two text blocks and marks the first. ``ttl``: "5m" or "1h".
    """

    target: Literal["system_stable", "system", "message"]
    index: int = -1
    ttl: TTL = "5m"
    split_at: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything a transport needs for one call, provider-neutral.

    ``system``: the stored system prompt bytes. ``stable_len``: chars of ``system`` that are
    the stable tier (None when the boundary is unknown; seed "restart recovery").
    ``tools``: the session's schema snapshot; empty for the finalizer call.
    ``breakpoints``: planned on this copy; transports for routes without caching ignore them.
    ``max_tokens``: output cap in tokens.
    """

    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    stable_len: int | None = None
    breakpoints: tuple[Breakpoint, ...] = ()
    max_tokens: int = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class BilledAttempt:
    """A provider attempt that failed after the provider had begun to answer it: its stream
    opened (Anthropic's message_start reports the input and cache buckets), so the provider
    bills it though no reply came (a cut connection, an error event mid-stream). ``usage``:
    as reported before the failure (output as far as reported). ``provider``, ``model``,
    ``credential``: the route that billed it ("" until the failover layer names it)."""

    usage: Usage
    provider: str = ""
    model: str = ""
    credential: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """A provider's reply: the assistant message, usage (None when the provider sent none),
    the stop reason ("end_turn", "tool_use", "max_tokens", "refusal", ...), the model name,
    and which route served it: ``provider`` (profile name) and ``credential`` (the key's
    label, never the secret), "" when the transport does not say (issue 10, build 1).
    ``billed_before``: attempts of this call that failed but were billed (retries, other
    routes, throttled waits), oldest first; each gets its own usage record."""

    message: Message
    usage: Usage | None
    stop_reason: str = "end_turn"
    model: str = ""
    provider: str = ""
    credential: str = ""
    billed_before: tuple[BilledAttempt, ...] = ()
