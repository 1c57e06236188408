"""Durable memory: the pure rules of a user's notes (add / replace / remove, the cap, the
snapshot the prompt's volatile tier carries). No Django; storage is sessions/memory.py.

Seed, "The system prompt is built in three tiers": the volatile tier holds "a memory
snapshot", taken when a session's prompt is built, so a memory write mid-session never moves
the cached stable prefix (the next session's prompt carries it). hermes keeps entries as
short notes matched by a unique substring (replace/remove name an entry by ``old_text``) and
bounds the store in characters; a write past the bound is refused with the bound named, never
truncated. Child agents never write memory (seed, delegation: "no memory writes").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_MEMORY_CHAR_LIMIT = 2200
"""Characters of all entries together (hermes' memory_char_limit default)."""
ENTRY_SEPARATOR = "\n§\n"
"""Between entries in the snapshot (hermes' delimiter): an entry may span lines."""
ACTIONS = ("add", "replace", "remove")

Action = Literal["add", "replace", "remove"]


class MemoryRefused(ValueError):
    """A memory operation that cannot be applied; the message is the tool result (or the
    form error) and names what to do, e.g. the character cap."""


@dataclass(frozen=True, slots=True)
class MemoryChange:
    """The entries after one operation and a sentence saying what changed."""

    entries: tuple[str, ...]
    summary: str


def memory_size(entries: tuple[str, ...] | list[str]) -> int:
    """Characters the entries take in the snapshot (separators included)."""
    return len(ENTRY_SEPARATOR.join(entries))


def _clean(text: object, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise MemoryRefused(f"{what} must be a non-empty string")
    if "\0" in text:
        raise MemoryRefused(f"{what} must not contain NUL characters")
    return text.strip()


def _find(entries: tuple[str, ...], old_text: object) -> int:
    needle = _clean(old_text, "old_text")
    hits = [i for i, entry in enumerate(entries) if needle in entry]
    if not hits:
        raise MemoryRefused(f"no memory entry contains {needle!r}; nothing changed")
    if len(hits) > 1 and len({entries[i] for i in hits}) > 1:
        raise MemoryRefused(f"{len(hits)} memory entries contain {needle!r}; quote more of "
                            "the one you mean")
    return hits[0]


def memory_apply(entries: tuple[str, ...], action: str, *, content: object = None,
                 old_text: object = None,
                 limit: int = DEFAULT_MEMORY_CHAR_LIMIT) -> MemoryChange:
    """Apply one operation to ``entries`` (oldest first) and return the new entries.

    - ``add`` appends ``content`` (an exact duplicate is a no-op, reported as such);
    - ``replace`` swaps the one entry containing ``old_text`` for ``content``;
    - ``remove`` drops the one entry containing ``old_text``.
    Raises MemoryRefused for an unknown action, empty text, no or several matching entries,
    or a result larger than ``limit`` characters (the message names the cap and the size;
    nothing is changed).
    """
    if action not in ACTIONS:
        raise MemoryRefused(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    current = tuple(entries)
    if action == "remove":
        index = _find(current, old_text)
        return MemoryChange(current[:index] + current[index + 1:],
                            f"removed: {current[index]!r}")
    text = _clean(content, "content")
    if action == "add":
        if text in current:
            return MemoryChange(current, "already remembered; nothing changed")
        new = current + (text,)
        summary = f"added: {text!r}"
    else:
        index = _find(current, old_text)
        new = current[:index] + (text,) + current[index + 1:]
        summary = f"replaced {current[index]!r} with {text!r}"
    size = memory_size(new)
    if size > limit:
        raise MemoryRefused(
            f"memory is capped at {limit} characters; this would make it {size} "
            f"(now {memory_size(current)}). Remove or shorten entries first; nothing changed.")
    return MemoryChange(new, summary)


def memory_snapshot(entries: tuple[str, ...] | list[str]) -> str:
    """The text the volatile tier carries ("" when there are no entries). Deterministic:
    the same entries give the same bytes."""
    return ENTRY_SEPARATOR.join(e.strip() for e in entries if e.strip())


def memory_usage_line(entries: tuple[str, ...], limit: int) -> str:
    """"N/limit characters used" for tool results and the page."""
    return f"{memory_size(entries)}/{limit} characters used"


def memory_edit(entries: tuple[str, ...], index: int, content: object | None, *,
                limit: int = DEFAULT_MEMORY_CHAR_LIMIT) -> tuple[str, ...]:
    """The user's own edit on the memory page: entry ``index`` replaced by ``content``, or
    removed when ``content`` is None. Same rules as the tool (non-empty, the cap); raises
    MemoryRefused, also for an index that no longer exists (the page was stale)."""
    if not 0 <= index < len(entries):
        raise MemoryRefused("that entry no longer exists; reload the page")
    if content is None:
        return entries[:index] + entries[index + 1:]
    text = _clean(content, "an entry")
    new = entries[:index] + (text,) + entries[index + 1:]
    size = memory_size(new)
    if size > limit:
        raise MemoryRefused(f"memory is capped at {limit} characters; this would make it "
                            f"{size}. Shorten it; nothing changed.")
    return new
