"""Deterministic prune: shrink old tool output without a model call, behind a reclaim gate
and a persisted re-arm level (hysteresis).

Seed chapters "Three ways to shrink a conversation" and "What happens when you do switch
pruning on"; numbers from hermes-facts §4 "Deterministic (proactive) prune". Cold-resume
pruning is beyond hermes (seed, "The boundary they built and left switched off").

Edits never delete: a pruned tool result keeps its ``content`` (what humans and search read)
and gets a short stub as ``sent_content`` (what the model is sent from now on), so the full
output stays retrievable as the same row. What does not belong here: storage (the caller
persists the edited rows and ``PrunePlan.rearm_level`` in one transaction) and deciding when
a session is idle (the caller passes ``cold``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from agents.messages import Message, ToolCall, common_prefix

MIN_RECLAIM_TOKENS = 4_096
"""``proactive_prune_min_reclaim_tokens``: a prune that frees less is not worth a cache break."""
MIN_RESULT_CHARS = 8_000
"""``proactive_prune_min_result_chars``: old results longer than this become a stub."""
PROTECT_LAST_N = 20
"""``protect_last_n``: the recent tail is never pruned."""
DEDUPE_MIN_CHARS = 200
"""Shorter duplicates are left alone: the stub would cost about as much (hermes prunes >200)."""
MIN_ARGUMENT_CHARS = 2_000
ARGUMENT_VALUE_MAX_CHARS = 500
ARGUMENT_VALUE_KEEP_CHARS = 200
"""Calls whose arguments pass 2,000 chars get each string value over 500 chars cut to its
first 200 (a stub marker names the original length). Chosen here; hermes gives no number."""
COLD_MIN_RESULT_CHARS = 2_000
COLD_MIN_ARGUMENT_CHARS = 500
COLD_PROTECT_LAST_N = 8
"""Cold resume (past the cache TTL): nothing warm to protect, so prune harder."""
STUB_PREFIX = "[pruned:"

EditKind = Literal["duplicate", "oversized", "arguments"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneEdit:
    """One changed message: ``index`` in the input list, the message ``before`` and
    ``after`` (same id), and the tokens it frees."""

    index: int
    kind: EditKind
    before: Message
    after: Message
    reclaimed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PrunePlan:
    """A prune to commit. ``messages``: the new live view (same rows, edited in place).
    Tokens: ``tokens_before`` / ``tokens_after`` / ``reclaimed``. ``rearm_level``: the prompt
    size below which the next unforced prune is refused; persist it with the edits."""

    messages: tuple[Message, ...]
    edits: tuple[PruneEdit, ...]
    tokens_before: int
    tokens_after: int
    reclaimed: int
    rearm_level: int


def may_prune(current_tokens: int, rearm_level: int, *,
              compaction_threshold: int | None = None) -> bool:
    """The hysteresis gate: true once the prompt has regrown to ``rearm_level`` (0 = never
    pruned), or is over the compaction threshold anyway (hermes-facts §4)."""
    if compaction_threshold is not None and current_tokens >= compaction_threshold:
        return True
    return current_tokens >= rearm_level


def rearm_level_after(tokens_after: int, reclaimed: int, trigger_tokens: int) -> int:
    """Re-arm level = after + max(reclaimed, trigger, 4,096) (seed: the runway)."""
    return tokens_after + max(reclaimed, trigger_tokens, MIN_RECLAIM_TOKENS)


def is_cold_resume(idle_seconds: float, cache_ttl_seconds: float) -> bool:
    """True when the session was idle longer than its cache TTL: the prefix is gone, so a
    rewrite costs nothing (prune hard before the first request; never mid-burst)."""
    return idle_seconds > cache_ttl_seconds


def _stub(m: Message, text: str) -> Message:
    return replace(m, sent_content=text)


def _cut_values(value: Any) -> Any:
    if isinstance(value, str) and len(value) > ARGUMENT_VALUE_MAX_CHARS:
        return f"{value[:ARGUMENT_VALUE_KEEP_CHARS]}… [{STUB_PREFIX[1:]} {len(value):,} chars]"
    if isinstance(value, dict):
        return {k: _cut_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_values(v) for v in value]
    return value


def _cut_call(call: ToolCall, min_chars: int) -> ToolCall:
    if len(call.arguments) <= min_chars:
        return call
    try:
        parsed = json.loads(call.arguments)
    except ValueError:
        return call
    text = json.dumps(_cut_values(parsed), ensure_ascii=False)
    return replace(call, arguments=text) if len(text) < len(call.arguments) else call


def _edit(m: Message, newer: Message | None, *, min_result_chars: int,
          min_argument_chars: int) -> tuple[EditKind, Message] | None:
    """The edit an old message gets, if any: ``newer`` is the nearest newer tool result
    with the same wire text (None when there is none)."""
    text = m.wire_text
    if m.role == "tool" and not text.startswith(STUB_PREFIX):
        tool = m.tool_name or "tool"
        if newer is not None and len(text) >= DEDUPE_MIN_CHARS:
            where = f"message #{newer.id}" if newer.id is not None else "a newer message"
            return "duplicate", _stub(m, f"{STUB_PREFIX} duplicate {tool} output, "
                                         f"{len(text):,} chars; identical to {where}]")
        if len(text) > min_result_chars:
            where = f"message #{m.id}" if m.id is not None else "this message's stored row"
            return "oversized", _stub(m, f"{STUB_PREFIX} {tool} output, {len(text):,} chars; "
                                         f"full text kept as {where} — use session_search "
                                         "or ask to re-run]")
    elif m.role == "assistant" and m.tool_calls:
        calls = tuple(_cut_call(c, min_argument_chars) for c in m.tool_calls)
        if calls != m.tool_calls:
            return "arguments", replace(m, tool_calls=calls)
    return None


def _edits(messages: Sequence[Message], *, old_end: int, min_result_chars: int,
           min_argument_chars: int) -> list[tuple[int, EditKind, Message]]:
    edits: list[tuple[int, EditKind, Message]] = []
    # The nearest newer tool result with the same text, per index: one backward pass (a
    # forward scan per result was quadratic: ~2M comparisons on a 2,000-message session).
    nearest: dict[int, Message] = {}
    seen: dict[str, Message] = {}
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "tool":
            text = m.wire_text
            if i < old_end and text in seen:
                nearest[i] = seen[text]
            seen[text] = m
    for i in range(old_end):
        found = _edit(messages[i], nearest.get(i), min_result_chars=min_result_chars,
                      min_argument_chars=min_argument_chars)
        if found is not None:
            edits.append((i, *found))
    return edits


def _old_end(messages: Sequence[Message], protect: int) -> int:
    """End of the prunable span: before the protected tail, and before a tool group whose
    results reach into the tail (kept whole)."""
    old_end = len(messages) - protect
    while old_end > 0 and messages[old_end].role == "tool":
        old_end -= 1
    return old_end


def plan_prune(messages: Sequence[Message], *, estimate: Callable[[Message], int],
               trigger_tokens: int, rearm_level: int, current_tokens: int | None = None,
               compaction_threshold: int | None = None, forced: bool = False,
               cold: bool = False) -> PrunePlan | None:
    """Plan a prune of the live transcript, or None when a gate refuses or nothing is freed.

    ``estimate``: tokens of one message. ``current_tokens``: the projected prompt size
    (default: the sum of ``estimate``). Gates for an automatic prune (hermes-facts §4):
    ``trigger_tokens`` > 0 (0 = off) and current >= trigger; the last message is a tool result
    (never on a bare user turn); ``may_prune``; more than ``PROTECT_LAST_N`` + 1 messages;
    reclaimed >= ``MIN_RECLAIM_TOKENS``. ``forced`` (/prune) and ``cold`` (resume past the
    cache TTL, see ``is_cold_resume``) skip the trigger, last-message and re-arm gates and
    commit any reclaim >= 1 token; ``cold`` also uses the lower ``COLD_*`` limits. Edits touch
    only messages before the protected tail. Idempotent: pruning the result frees nothing.
    A full compaction resets the runway: the caller then stores a re-arm level of 0.
    """
    before = sum(estimate(m) for m in messages) if current_tokens is None else current_tokens
    bypass = forced or cold
    if not bypass and (trigger_tokens <= 0 or before < trigger_tokens
                       or not messages or messages[-1].role != "tool"
                       or not may_prune(before, rearm_level,
                                        compaction_threshold=compaction_threshold)):
        return None
    protect = COLD_PROTECT_LAST_N if cold else PROTECT_LAST_N
    if len(messages) <= protect + 1:
        return None
    old_end = _old_end(messages, protect)
    found = _edits(messages, old_end=old_end,
                   min_result_chars=COLD_MIN_RESULT_CHARS if cold else MIN_RESULT_CHARS,
                   min_argument_chars=COLD_MIN_ARGUMENT_CHARS if cold else MIN_ARGUMENT_CHARS)
    edits = tuple(e for e in (PruneEdit(index=i, kind=kind, before=messages[i], after=after,
                                        reclaimed=estimate(messages[i]) - estimate(after))
                              for i, kind, after in found) if e.reclaimed > 0)
    reclaimed = sum(e.reclaimed for e in edits)
    if reclaimed < (1 if bypass else MIN_RECLAIM_TOKENS):
        return None
    new = list(messages)
    for e in edits:
        new[e.index] = e.after
    after = before - reclaimed
    return PrunePlan(messages=tuple(new), edits=edits, tokens_before=before, tokens_after=after,
                     reclaimed=reclaimed,
                     rearm_level=rearm_level_after(after, reclaimed, trigger_tokens))


class ColdReclaimTally:
    """Tokens a cold prune would free, kept for a history that grows by appending: equal to
    ``plan_prune(messages, estimate=estimate, trigger_tokens=0, rearm_level=0, cold=True)``'s
    ``reclaimed`` (0 when it plans nothing), and ``tokens`` the summed ``estimate``.

    Each message's gain as if it were old is kept (a duplicate's depends on its nearest newer
    twin, which only an appended message can become), so ``update`` costs the appended
    messages and the answer the protected tail; a history that is not the previous one plus
    appended messages (equal ones) is tallied afresh. Not thread-safe."""

    def __init__(self, estimate: Callable[[Message], int]) -> None:
        self._estimate = estimate
        self._messages: list[Message] = []
        self._gains: list[int] = []
        self._newest: dict[str, int] = {}  # a tool result's wire text -> its newest index
        self._total = 0
        self.tokens = 0

    def update(self, messages: Sequence[Message]) -> ColdReclaimTally:
        """Bring the tally to ``messages``; returns self."""
        if not self._extends(messages):
            self.__init__(self._estimate)  # type: ignore[misc]
        for m in messages[len(self._messages):]:
            index = len(self._messages)
            self._messages.append(m)
            self.tokens += self._estimate(m)
            if m.role == "tool":
                twin = self._newest.get(m.wire_text)
                if twin is not None:  # m is now that one's nearest newer twin
                    gain = self._gain(self._messages[twin], m)
                    self._total += gain - self._gains[twin]
                    self._gains[twin] = gain
                self._newest[m.wire_text] = index
            self._gains.append(self._gain(m, None))
            self._total += self._gains[-1]
        return self

    def _extends(self, messages: Sequence[Message]) -> bool:
        """True when ``messages`` starts with the tallied messages: equal ones, or
        copies differing only in ``reasoning`` (the repair drops it; nothing here reads it),
        which then replace the tallied ones."""
        done = len(self._messages)
        i = common_prefix(messages, self._messages)
        while i < done:
            if i >= len(messages) or messages[i] != replace(self._messages[i],
                                                             reasoning=messages[i].reasoning):
                return False
            self._messages[i] = messages[i]
            i += 1 + common_prefix(messages[i + 1:], self._messages[i + 1:])
        return True

    @property
    def reclaimed(self) -> int:
        """Tokens the cold prune of the tallied history would free (0: it plans nothing)."""
        if len(self._messages) <= COLD_PROTECT_LAST_N + 1:
            return 0
        return self._total - sum(self._gains[_old_end(self._messages, COLD_PROTECT_LAST_N):])

    def _gain(self, m: Message, newer: Message | None) -> int:
        found = _edit(m, newer, min_result_chars=COLD_MIN_RESULT_CHARS,
                      min_argument_chars=COLD_MIN_ARGUMENT_CHARS)
        return 0 if found is None else max(0, self._estimate(m) - self._estimate(found[1]))
