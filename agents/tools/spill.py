"""Large tool output is relocated, not truncated: spill to a workspace file, keep a preview.

Two layers after each tool's own cap (seed, "Large output gets relocated, not truncated";
hermes-facts §9): any single result over the per-result cap is spilled; then, if the results
of one assistant message still add up past the per-turn cap, the largest are spilled until
the total fits. Both caps scale down with the model's window and never up. read_file is
exempt from the per-result layer (the recovery instruction names read_file; capping it would
spill the recovery read forever) but not from the per-turn sweep.

The spilled message keeps the full text in ``content`` (what the UI shows) and puts the
spill block in ``sent_content`` (what the model sees; replayed verbatim). Summarising with a
model is not done here, nor is deleting old spill files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from agents.errors import ToolError
from agents.messages import Message
from agents.tools import ToolContext
from agents.tools.files import READ_MAX_LINE_CHARS
from agents.tools.workspace import Workspace, display_path
from agents.wording import plural

PER_RESULT_CHARS = 100_000
PER_TURN_CHARS = 200_000
PREVIEW_CHARS = 1_500
PER_RESULT_FLOOR = 8_000
PER_TURN_FLOOR = 16_000
PER_RESULT_SHARE = 0.15
PER_TURN_SHARE = 0.30
CHARS_PER_TOKEN = 4
"""hermes-facts §9: chars available = window tokens × 4; per result 15%, per turn 30%,
clamped to [8,000, 100,000] and [16,000, 200,000]."""
EXEMPT_FROM_PER_RESULT = frozenset({"read_file", "delegate"})
EXEMPT_FROM_SWEEP = frozenset({"delegate"})
"""delegate results are bounded by their own summary budget (half of the parent's headroom
across the batch, each summary spilled past its share: agents/tools/delegate.py); a second
cap here would spill the spill and turn the budget into the smaller per-turn share."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpillLimits:
    """Caps in chars for one assistant message's tool results."""

    per_result: int = PER_RESULT_CHARS
    per_turn: int = PER_TURN_CHARS
    preview: int = PREVIEW_CHARS


def spill_limits(context_window: int | None) -> SpillLimits:
    """Caps for a model with ``context_window`` tokens; the defaults when unknown (<= 0)."""
    if not context_window or context_window <= 0:
        return SpillLimits()
    chars = context_window * CHARS_PER_TOKEN
    return SpillLimits(
        per_result=max(PER_RESULT_FLOOR, min(PER_RESULT_CHARS, int(chars * PER_RESULT_SHARE))),
        per_turn=max(PER_TURN_FLOOR, min(PER_TURN_CHARS, int(chars * PER_TURN_SHARE))),
    )


def apply_spill(results: Sequence[Message], ctx: ToolContext) -> tuple[Message, ...]:
    """Return ``results`` (tool-result messages of one assistant message, any order kept)
    with oversized ones spilled to ``ctx.spill_dir``. Sizes are measured on ``wire_text``.
    Never raises for a failed write: that result is truncated inline with a note instead.
    """
    limits = spill_limits(ctx.context_window)
    out = list(results)
    done: set[int] = set()
    for index, message in enumerate(out):
        if message.tool_name in EXEMPT_FROM_PER_RESULT:
            continue
        if len(message.wire_text) > limits.per_result:
            out[index] = spill_message(message, ctx, limits)
            done.add(index)
    total = sum(len(m.wire_text) for m in out)
    if total > limits.per_turn:
        by_size = sorted((i for i in range(len(out))
                          if i not in done and out[i].tool_name not in EXEMPT_FROM_SWEEP),
                         key=lambda i: len(out[i].wire_text), reverse=True)
        for index in by_size:
            if total <= limits.per_turn:
                break
            before = len(out[index].wire_text)
            spilled = spill_message(out[index], ctx, limits)
            if len(spilled.wire_text) < before:
                out[index] = spilled
                total -= before - len(spilled.wire_text)
    return tuple(out)


def spill_message(message: Message, ctx: ToolContext, limits: SpillLimits) -> Message:
    """Write ``message.wire_text`` to a file and return the message with the spill block as
    ``sent_content`` (``content`` keeps the full text for display)."""
    text = message.wire_text
    try:
        path = _write_spill(text, ctx, message.tool_call_id or "result")
    except (OSError, ToolError) as exc:
        keep = limits.per_result
        reason = getattr(exc, "strerror", None) or exc
        note = (f"\n[Truncated: {len(text) - keep} of {len(text)} chars omitted; the full "
                f"output could not be saved ({reason})]")
        return replace(message, sent_content=text[:keep] + note)
    block = spill_block(text, display_path(ctx.workspace, path), limits.preview)
    return replace(message, sent_content=block)


def spill_block(text: str, shown: str, preview_chars: int = PREVIEW_CHARS) -> str:
    """The text the model sees instead of ``text``: size, path, how to page it, preview."""
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    long_lines = any(len(line) > READ_MAX_LINE_CHARS for line in text.split("\n"))
    head, tail = _preview(text, preview_chars)
    parts = [
        "<persisted-output>",
        f"This tool result was too large for the conversation ({len(text):,} chars, "
        f"{plural(lines, 'line')}). Nothing was lost: the full output is saved at {shown}.",
        f"Page it with read_file(path=\"{shown}\", offset=<first line, 1-based>, limit=<lines>)"
        f" or search it with search_files(pattern=..., path=\"{shown}\").",
    ]
    if long_lines:
        parts.append(f"Some lines exceed {READ_MAX_LINE_CHARS:,} chars and are cut by "
                     "read_file; use terminal (e.g. fold or cut) to see them whole.")
    parts.append("Preview (start):")
    parts.append(head)
    if tail:
        parts.append(f"[... {len(text) - len(head) - len(tail):,} chars not shown ...]")
        parts.append("Preview (end):")
        parts.append(tail)
    parts.append("</persisted-output>")
    return "\n".join(parts)


def _preview(text: str, budget: int) -> tuple[str, str]:
    """Head (two thirds of ``budget``) and tail (the rest), each cut at a line boundary when
    that keeps at least half of its share (hermes-facts §9: cut at the last newline past the
    halfway point)."""
    if len(text) <= budget:
        return text, ""
    head_budget = budget * 2 // 3
    tail_budget = budget - head_budget
    head = text[:head_budget]
    cut = head.rfind("\n")
    if cut > head_budget // 2:
        head = head[:cut]
    tail = text[-tail_budget:]
    cut = tail.find("\n")
    if 0 <= cut < tail_budget // 2:
        tail = tail[cut + 1:]
    return head, tail


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _write_spill(text: str, ctx: ToolContext, call_id: str) -> Path:
    """Write raw text (real newlines, no JSON wrapper; case B36) to a fresh file named after
    the call id, through the confined Workspace (a spill dir or name planted as a link by a
    command is refused, never written through). Raises OSError or ToolError."""
    assert ctx.spill_dir is not None
    ws = Workspace(ctx.workspace)
    directory = str(ws.relative(str(ctx.spill_dir)))
    stem = _UNSAFE.sub("_", call_id).lstrip(".") or "result"
    data = text.encode("utf-8", "surrogatepass")
    for attempt in range(1, 1000):
        name = f"{stem}.txt" if attempt == 1 else f"{stem}-{attempt}.txt"
        if ws.create_exclusive(directory, name, data):
            return ws.root / directory / name
    raise OSError(f"no free spill file name for {stem}")
