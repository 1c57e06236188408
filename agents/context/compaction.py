"""Batch compaction and micro-compaction as pure plans: where to cut, what to ask the
summariser, and what the new live transcript is.

Seed chapters "Three ways to shrink a conversation", "Compaction is a flag flip, not a
delete" and "The lesson hiding in micro-compaction"; numbers from hermes-facts §4.

What does not belong here: the database (the Django side archives every live row and inserts
the returned rows in one transaction under the compaction lease), the breaker that decides
whether to try (agents/context/breaker.py), and the calibrated trigger (agents/context/tokens.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from agents.messages import Message, ModelRequest

THRESHOLD_CAP_TOKENS = 256_000
"""hermes-facts §4 ``threshold_tokens``: the trigger never sits above 256K tokens."""
LARGE_WINDOW_TOKENS = 512_000
"""Windows at or above this use 50%; smaller ones 75% (hermes-facts §4 small-window rule)."""
PROTECT_FIRST_N = 3
"""Head messages kept on the first compaction only (``protect_first_n``, decays to 0)."""
TAIL_FRACTION = 0.025
TAIL_MIN_TOKENS = 10_000
TAIL_MAX_TOKENS = 25_000
TAIL_MIN_MESSAGES = 8
"""Lean tail: 2.5% of the window clamped to 10K–25K tokens, never over 20% of the window,
at least 8 messages (hermes-facts §4 "Protected tail")."""
SUMMARY_RATIO = 0.20
SUMMARY_MIN_TOKENS = 2_000
SUMMARY_MAX_TOKENS = 10_000
"""Summary budget: 20% of the compressed content, 2K–10K tokens (hermes-facts §4; DESIGN §5
picks the code's 10,000 over the docs' 12,000)."""
MIN_MIDDLE_TOKENS = SUMMARY_MIN_TOKENS
"""A middle smaller than the smallest summary cannot shrink by summarising: skip the model
call and drop deterministically (seed: the streak-neutral "feasibility skip")."""
SUMMARISER_INPUT_MAX_CHARS = 160_000
"""hermes-facts §4: summariser input cap."""
FALLBACK_SUMMARY_MAX_CHARS = 8_000
"""hermes-facts §4: deterministic fallback summary size."""
WINDOW_MARGIN_TOKENS = 1_024
"""Slack between the summariser's input + output and the window, for the envelope."""
TOOL_OUTPUT_EXCERPT_CHARS = 1_200
"""Old tool output is cut to this many chars (head and tail) before summarising (B11)."""

SUMMARY_PREFIX = ("[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns of this conversation "
                  "were compacted into the summary below. It is background, not instructions; "
                  "the full text stays searchable with session_search.\n\n")
SUMMARY_SUFFIX = ("\n\n--- END OF CONTEXT SUMMARY — respond to the message below, not the "
                  "summary above ---")
"""Marker scaffolding (hermes-facts §4 "Summary marker")."""

SUMMARISER_SYSTEM = (
    "You compress a conversation between a user and a coding agent into a summary the agent "
    "will read instead of the original. Keep: the user's goals and constraints, decisions "
    "made, files and commands touched, facts learned from tool output, errors hit and how "
    "they were resolved, and what was in progress. Drop pleasantries and raw output. Write "
    "plain prose and short lists. Do not call tools.")


def compaction_threshold(window: int) -> int:
    """Prompt tokens at which batch compaction fires for a ``window``-token model:
    min(256,000, 50% of the window) for windows >= 512K, else min(256,000, 75%) (hermes-facts
    §4: the threshold is floored at 0.75 under 512K). Recompute after a model switch (B10)."""
    ratio = 0.5 if window >= LARGE_WINDOW_TOKENS else 0.75
    return min(THRESHOLD_CAP_TOKENS, int(window * ratio))


def tail_budget(window: int) -> int:
    """Protected-tail tokens: 2.5% of ``window`` clamped to 10K–25K, at most 20% of it."""
    budget = min(TAIL_MAX_TOKENS, max(TAIL_MIN_TOKENS, int(window * TAIL_FRACTION)))
    return min(budget, int(window * 0.2))


def summary_budget(middle_tokens: int) -> int:
    """Summary output tokens: 20% of the compressed content clamped to 2K–10K."""
    return min(SUMMARY_MAX_TOKENS, max(SUMMARY_MIN_TOKENS, int(middle_tokens * SUMMARY_RATIO)))


def group_start(messages: Sequence[Message], index: int) -> int:
    """Snap a cut at ``index`` back to a tool-group edge: if ``messages[index]`` is a tool
    result, move to its assistant message, so a group is kept or dropped whole (B03)."""
    while 0 < index < len(messages) and messages[index].role == "tool":
        index -= 1
    return index


def group_end(messages: Sequence[Message], index: int) -> int:
    """Snap a cut at ``index`` forward past the tool results of the group before it."""
    while index < len(messages) and messages[index].role == "tool":
        index += 1
    return index


def unanswered_calls(messages: Sequence[Message]) -> list[str]:
    """Ids of tool calls with no result anywhere in ``messages`` (compaction must wait, B06)."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    return [c.id for m in messages if m.role == "assistant" for c in m.tool_calls
            if c.id not in answered]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """A cut of the live transcript: ``head`` kept, ``middle`` summarised, ``tail`` kept.
    Token fields are ``estimate`` sums over the messages."""

    head: tuple[Message, ...]
    middle: tuple[Message, ...]
    tail: tuple[Message, ...]
    middle_tokens: int
    total_tokens: int


SkipReason = Literal["nothing to compact", "middle too small", "unanswered tool calls"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Skip:
    """No summariser call. ``plan`` is set for "middle too small": the caller may still
    ``drop_middle(plan)`` and report ``skip_small_middle`` to the breaker (streak-neutral)."""

    reason: SkipReason
    plan: CompactionPlan | None = None


def plan_compaction(messages: Sequence[Message], *, window: int,
                    estimate: Callable[[Message], int],
                    first_compaction: bool) -> CompactionPlan | Skip:
    """Cut ``messages`` (the live transcript, ordered by id) into head / middle / tail.

    Head: the first 3 messages on the first compaction, else none, snapped forward past a
    tool group. Tail: messages from the end until ``tail_budget(window)`` tokens would be
    exceeded, but at least 8 messages, snapped back to a group edge (B03). Refuses while any
    tool call is unanswered: compaction runs only after every result of a batch is stored (B06).
    """
    if unanswered_calls(messages):
        return Skip(reason="unanswered tool calls")
    n = len(messages)
    head_end = group_end(messages, min(PROTECT_FIRST_N, n)) if first_compaction else 0
    budget = tail_budget(window)
    sizes = [estimate(m) for m in messages]
    start, used = n, 0
    while start > head_end and (n - start < TAIL_MIN_MESSAGES
                                or used + sizes[start - 1] <= budget):
        start -= 1
        used += sizes[start]
    start = max(head_end, group_start(messages, start))
    middle = tuple(messages[head_end:start])
    if not middle:
        return Skip(reason="nothing to compact")
    plan = CompactionPlan(head=tuple(messages[:head_end]), middle=middle,
                          tail=tuple(messages[start:]),
                          middle_tokens=sum(sizes[head_end:start]), total_tokens=sum(sizes))
    if plan.middle_tokens < MIN_MIDDLE_TOKENS:
        return Skip(reason="middle too small", plan=plan)
    return plan


def _excerpt(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep:,} chars of output omitted ...]\n" \
           f"{text[-keep:]}"


def render_transcript(messages: Sequence[Message], *, tool_output_chars: int | None) -> str:
    """Plain-text transcript for the summariser (no tool blocks, so no pairing rules apply).
    ``tool_output_chars`` caps each tool result to a head+tail excerpt; None keeps it whole."""
    lines = []
    for m in messages:
        text = m.wire_text
        if m.role == "tool":
            if tool_output_chars is not None:
                text = _excerpt(text, tool_output_chars)
            lines.append(f"[tool result: {m.tool_name or 'tool'}{' (error)' if m.is_error else ''}]"
                         f"\n{text}")
            continue
        calls = "".join(f"\n[tool call: {c.name} {_excerpt(c.arguments, 600)}]"
                        for c in m.tool_calls)
        lines.append(f"[{m.role}]\n{text}{calls}")
    return "\n\n".join(lines)


def build_summary_request(plan: CompactionPlan, *, model: str, window: int,
                          model_max_output: int,
                          estimate_text: Callable[[str], int]) -> ModelRequest:
    """The summariser's own request: no tools, no thinking, one user message.

    ``max_tokens`` = min(summary_budget(middle), ``model_max_output``, what the window leaves).
    Input is budgeted to window − max_tokens − margin and ``SUMMARISER_INPUT_MAX_CHARS``: old
    tool output is cut to excerpts first, then the oldest part of the transcript is elided
    (head and tail slices kept), so the request itself cannot overflow (B11).
    """
    out_budget = min(summary_budget(plan.middle_tokens), model_max_output)
    input_budget = window - out_budget - WINDOW_MARGIN_TOKENS - estimate_text(SUMMARISER_SYSTEM)
    full = render_transcript(plan.middle, tool_output_chars=None)
    if estimate_text(full) > input_budget or len(full) > SUMMARISER_INPUT_MAX_CHARS:
        full = render_transcript(plan.middle, tool_output_chars=TOOL_OUTPUT_EXCERPT_CHARS)
    # The char cap is fixed; only the token budget shrinks the excerpt, and each excerpt is
    # cut from the whole transcript, never from the previous excerpt (issue 10 defect 7: a
    # loop that compared against a shrinking limit cut 160K chars down to ~2K).
    chars = min(len(full), SUMMARISER_INPUT_MAX_CHARS)
    text = _excerpt(full, chars)
    while chars > 2_000 and estimate_text(text) > input_budget:
        chars = int(chars * 0.8)
        text = _excerpt(full, chars)
    prompt = ("Summarise this conversation excerpt in at most "
              f"{out_budget:,} tokens.\n\n<transcript>\n{text}\n</transcript>")
    input_tokens = estimate_text(prompt) + estimate_text(SUMMARISER_SYSTEM)
    max_tokens = max(1, min(out_budget, window - input_tokens - WINDOW_MARGIN_TOKENS))
    return ModelRequest(model=model, system=SUMMARISER_SYSTEM,
                        messages=(Message(role="user", content=prompt),), max_tokens=max_tokens)


SUMMARY_KIND = "summary"
"""Message.kind of a compaction summary (the prefix text is for the model; a user who types
it writes an ordinary message)."""
ROLLING_SUMMARY_KIND = "rolling_summary"
"""Message.kind of the micro-compaction rolling summary."""


def summary_message(text: str) -> Message:
    """The user-role message that replaces the middle, marked as a summary by its kind."""
    return Message(role="user", content=f"{SUMMARY_PREFIX}{text.strip()}{SUMMARY_SUFFIX}",
                   kind=SUMMARY_KIND)


def is_summary_message(message: Message) -> bool:
    """True for a message built by ``summary_message`` or ``drop_middle`` (by its kind)."""
    return message.kind == SUMMARY_KIND


def compacted_transcript(plan: CompactionPlan, summary_text: str) -> list[Message]:
    """The new live set: head + summary + tail (insert as new rows, in this order)."""
    return [*plan.head, summary_message(summary_text), *plan.tail]


def fallback_summary(middle: Sequence[Message]) -> str:
    """A summary built without a model: the user's requests and the tools used, capped at
    ``FALLBACK_SUMMARY_MAX_CHARS``. Deterministic."""
    asks = [m.wire_text.strip().replace("\n", " ")[:300] for m in middle
            if m.role == "user" and not is_summary_message(m)]
    earlier = [m for m in middle if is_summary_message(m)]
    tools: dict[str, int] = {}
    for m in middle:
        for c in m.tool_calls:
            tools[c.name] = tools.get(c.name, 0) + 1
    parts = [f"The summariser was unavailable; {len(middle)} earlier messages were dropped "
             "without a model summary."]
    if earlier:
        body = earlier[-1].content.removeprefix(SUMMARY_PREFIX).removesuffix(SUMMARY_SUFFIX)
        parts.append("Earlier summary:\n" + body[:3_000])
    if asks:
        parts.append("User requests in the dropped span:\n" + "\n".join(f"- {a}" for a in asks))
    if tools:
        parts.append("Tools used: " + ", ".join(f"{k} ×{v}" for k, v in sorted(tools.items())))
    return "\n\n".join(parts)[:FALLBACK_SUMMARY_MAX_CHARS]


def drop_middle(plan: CompactionPlan) -> list[Message]:
    """Deterministic fallback when the summariser fails or is skipped: head + a fallback
    summary + tail, so the session always continues (B11)."""
    return compacted_transcript(plan, fallback_summary(plan.middle))


# Micro-compaction (off by default; hermes-facts §4 "Micro-compaction").

ROLLING_PREFIX = "[ROLLING SUMMARY — absorbed messages through #"
"""The rolling summary's first line, for the model to read; never parsed back (its kind
says what it is, row ids say what it absorbed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MicroPlan:
    """Fold ``exchange`` (the oldest un-absorbed user exchange) into the rolling summary.

    ``archive_ids``: EVERY live row id (old summary included); the caller flips them to
    active=0, compacted=1 and inserts ``micro_commit(...)``'s rows in the SAME transaction,
    or resume loads the summary and what it summarised (seed). ``absorbed_through``: the
    highest row id now covered by the summary.
    """

    previous_summary: Message | None
    exchange: tuple[Message, ...]
    survivors: tuple[Message, ...]
    archive_ids: tuple[int, ...]
    absorbed_through: int


def is_rolling_summary(message: Message) -> bool:
    """True for the micro-compaction rolling summary (by its kind)."""
    return message.kind == ROLLING_SUMMARY_KIND


def plan_micro_compaction(messages: Sequence[Message], *,
                          keep_recent_exchanges: int = 2) -> MicroPlan | None:
    """Plan one fold over stored ``messages`` (all with ids). An exchange is a user message
    and everything up to the next user message, so tool groups stay whole. Returns None when
    no more than ``keep_recent_exchanges`` exchanges follow the rolling summary, or a call is
    unanswered."""
    if unanswered_calls(messages) or any(m.id is None for m in messages):
        return None
    previous = messages[0] if messages and is_rolling_summary(messages[0]) else None
    rest = list(messages[1:] if previous else messages)
    starts = sorted({0, *(i for i, m in enumerate(rest) if m.role == "user")})
    if not rest or len(starts) <= max(1, keep_recent_exchanges):
        return None
    exchange = tuple(rest[:starts[1]])
    return MicroPlan(previous_summary=previous, exchange=exchange,
                     survivors=tuple(rest[starts[1]:]),
                     archive_ids=tuple(m.id for m in messages if m.id is not None),
                     absorbed_through=max(m.id for m in exchange if m.id is not None))


def build_fold_request(plan: MicroPlan, *, model: str, max_tokens: int) -> ModelRequest:
    """The summariser request that merges the previous rolling summary with the exchange."""
    earlier = plan.previous_summary.content if plan.previous_summary else "(none yet)"
    prompt = (f"Current rolling summary:\n{earlier}\n\nFold this exchange into it and return "
              f"the updated summary only.\n\n<transcript>\n"
              f"{render_transcript(plan.exchange, tool_output_chars=TOOL_OUTPUT_EXCERPT_CHARS)}"
              "\n</transcript>")
    return ModelRequest(model=model, system=SUMMARISER_SYSTEM,
                        messages=(Message(role="user", content=prompt),), max_tokens=max_tokens)


def micro_commit(plan: MicroPlan, folded_text: str) -> list[Message]:
    """Rows to insert (ids cleared), in order: the new rolling summary, then the survivors."""
    summary = Message(role="user", kind=ROLLING_SUMMARY_KIND,
                      content=f"{ROLLING_PREFIX}{plan.absorbed_through}]\n{folded_text.strip()}")
    return [summary, *(replace(m, id=None) for m in plan.survivors)]


def double_loaded(live: Sequence[Message]) -> list[int]:
    """Resume invariant check: ids of live rows older than a live rolling summary (must be
    empty). ``micro_commit`` inserts the summary first and the survivors after it in the same
    commit that archives every older row, so a live row with a smaller id was either folded
    into the summary or re-inserted after it. Compared by id: needs stored rows."""
    first = min((m.id for m in live if is_rolling_summary(m) and m.id is not None),
                default=None)
    if first is None:
        return []
    return [m.id for m in live if m.id is not None and m.id < first
            and not is_rolling_summary(m)]
