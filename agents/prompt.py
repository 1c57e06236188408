"""The three-tier system prompt, context-file discovery and restart recovery of the tier boundary.

A provider reuses work only when the bytes match from the first one, so the prompt is joined
stable -> context -> volatile and built ONCE per session (seed, "The system prompt is built in
three tiers, and the order is the point"; hermes-facts §2). Nothing time-varying goes in the
stable tier, and the volatile tier's date is the session's start date, never now. The caller
stores ``SystemPrompt.text`` byte-exact on the Session; only a compaction rebuilds it. Where
breakpoints go is agents/cache.py's business, not this module's; so is any database access.
"""

from __future__ import annotations

import hashlib
import stat
import threading
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Iterable

from cachetools import LRUCache

from agents.errors import ToolError
from agents.tools.workspace import Workspace

TIER_SEPARATOR = "\n\n"
"""Tiers and sections are joined with a blank line (hermes-facts §2)."""
CONTEXT_FILE_MAX_CHARS = 20_000
"""Cap on one project context file, in chars (hermes-facts §2, ``context_file_max_chars``)."""
CONTEXT_HEAD_SHARE = 0.7
CONTEXT_TAIL_SHARE = 0.2
"""Truncation keeps 70% of the cap from the head and 20% from the tail (hermes-facts §2)."""
RECOVERY_MEMO_MAX = 256
"""Bound on memoised restart-recovery verdicts (entries)."""

DEFAULT_IDENTITY = (
    "You are Hermes, a capable assistant running inside Hermes Web. You help the user by "
    "reasoning carefully, using the tools you are given, and reporting plainly what you did "
    "and what you found. When you are unsure, say so; never invent tool results."
)
"""Identity used when the configured home has no SOUL.md (hermes-facts §2)."""

TASK_COMPLETION_GUIDANCE = (
    "Work until the user's request is complete, then stop calling tools and answer in text. "
    "If a tool fails, read the error and try a different approach rather than repeating it."
)
PARALLEL_TOOL_CALL_GUIDANCE = (
    "When several tool calls do not depend on each other, issue them together in one response."
)

TOOL_GUIDANCE: tuple[tuple[str, str], ...] = (
    ("memory", "Use the memory tool to save durable facts about the user or project; do not "
               "save transient task state."),
    ("session_search", "Use session_search to recall earlier conversations before asking the "
                       "user to repeat themselves."),
    ("skills_list", "Skills are reusable instructions: list them with skills_list and read one "
                    "with skill_view before following it."),
    ("todo", "For multi-step work, keep a todo list with the todo tool and update it as you go."),
    ("delegate", "Delegate large independent subtasks with the delegate tool; a child's summary "
                 "is its own report, so verify important claims."),
    ("clarify", "Ask the user with clarify only when you cannot proceed without an answer."),
    ("terminal", "Shell commands run in the session workspace; prefer non-interactive flags."),
)
"""(tool name, guidance) in the fixed order they appear; each only when that tool is loaded."""

MODEL_NOTES: tuple[tuple[str, str], ...] = (
    ("gemini", "Call tools through the function-calling interface, never by writing code that "
               "imitates a call."),
    ("gemma", "Call tools through the function-calling interface, never by writing code that "
              "imitates a call."),
    ("gpt", "Use tools to act; do not describe an action you could take with a tool."),
    ("qwen", "Use tools to act; do not describe an action you could take with a tool."),
)
"""(model-name substring, note): per-model operational notes (hermes-facts §2, tool-use
enforcement). The first matching substring wins."""

ENVIRONMENT_HINTS = (
    "Environment: you are served through a web chat that renders Markdown. File and shell "
    "tools act inside this session's workspace directory; paths are relative to it."
)
"""Environment hints; deliberately identical for every session so the stable tier is shared."""

CONTEXT_FILE_HEADER = ("# Project Context\n\nThe following project context file ({name}) was "
                       "found and should be followed:")

LOCAL_CONTEXT_FILES = ("AGENTS.md", "CLAUDE.md", ".cursorrules")
"""Looked up in the workspace only, in this order, after the HERMES.md walk (hermes-facts §2)."""
HERMES_CONTEXT_FILES = ("HERMES.md", ".hermes.md")
"""Looked up first, in the workspace root only (never above it: issue 8 finding 4)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemPrompt:
    """The built prompt: ``text`` (store byte-exact) and ``stable_len``, the chars of ``text``
    that are the stable tier (the cache boundary the planner marks as "system_stable")."""

    text: str
    stable_len: int


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def load_identity(home: Path | None) -> str:
    """SOUL.md from ``home`` (trailing whitespace dropped) if present and non-blank, else
    ``DEFAULT_IDENTITY``."""
    if home is not None:
        soul = home / "SOUL.md"
        if soul.is_file():
            text = _read(soul).rstrip()
            if text.strip():
                return text
    return DEFAULT_IDENTITY


def build_stable_tier(*, home: Path | None, tool_names: Iterable[str], model: str,
                      provider: str) -> str:
    """The stable tier: identity, tool guidance for the loaded tools, per-model notes,
    environment hints. Depends only on its arguments and SOUL.md; contains no time, session or
    workspace detail, so sessions on the same deployment share it (seed, "Four breakpoints").
    ``provider`` is accepted so provider-specific notes can be added without changing callers.
    """
    loaded = set(tool_names)
    parts = [load_identity(home)]
    if loaded:
        parts.append(TASK_COMPLETION_GUIDANCE + " " + PARALLEL_TOOL_CALL_GUIDANCE)
        guidance = [text for name, text in TOOL_GUIDANCE if name in loaded]
        if guidance:
            parts.append(" ".join(guidance))
    lowered = model.lower()
    for needle, note in MODEL_NOTES:
        if needle in lowered:
            parts.append(note)
            break
    parts.append(ENVIRONMENT_HINTS)
    return TIER_SEPARATOR.join(parts)


def strip_front_matter(text: str) -> str:
    """Drop a leading YAML front-matter block (``---`` line ... ``---`` line), if closed."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return text
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[i + 1:]).lstrip("\n")
    return text


def cap_context_text(text: str, name: str, *, limit: int = CONTEXT_FILE_MAX_CHARS) -> str:
    """``text`` unchanged if it has at most ``limit`` chars; else its first 70% of ``limit``
    chars, a truncation marker naming ``name`` and the count dropped, and its last 20%."""
    if len(text) <= limit:
        return text
    head = int(limit * CONTEXT_HEAD_SHARE)
    tail = int(limit * CONTEXT_TAIL_SHARE)
    dropped = len(text) - head - tail
    marker = f"\n\n[... {dropped} chars of {name} truncated ...]\n\n"
    return text[:head] + marker + text[len(text) - tail:]


def find_context_file(workspace: Path) -> Path | None:
    """The first project context file, first match wins (hermes-facts §2, narrowed by issue 8
    finding 4): HERMES.md, .hermes.md, AGENTS.md, CLAUDE.md, .cursorrules, in the workspace
    root only. hermes walks up to the git root; here the walk stops at the workspace root,
    because everything above it (the workspaces root, a checkout holding it) is shared with
    other users, and a file planted there would reach their prompts. A name that is a
    symlink, a hard-linked file, a FIFO or a socket does not count (agents/tools/workspace.py).
    """
    ws = Workspace(workspace)
    for name in (*HERMES_CONTEXT_FILES, *LOCAL_CONTEXT_FILES):
        info = ws.lstat(name)
        if info is not None and stat.S_ISREG(info.st_mode):
            return ws.root / name
    return None


def load_context_file(workspace: Path) -> str:
    """The context-file section for the context tier, or "" when none is found, it is blank,
    or it cannot be opened confined (a link swapped in after discovery): the header, then
    the file's text with front-matter stripped and capped at 20,000 chars."""
    path = find_context_file(workspace)
    if path is None:
        return ""
    try:
        raw = Workspace(workspace).read_bytes(path.name)
    except ToolError:
        return ""
    body = strip_front_matter(raw.decode("utf-8", errors="replace")).strip()
    if not body:
        return ""
    return (CONTEXT_FILE_HEADER.format(name=path.name) + TIER_SEPARATOR
            + cap_context_text(body, path.name))


def build_system_prompt(*, home: Path | None, tool_names: Iterable[str], model: str,
                        provider: str, workspace: Path, caller_context: str, skills_index: str,
                        memory: str, user_profile: str, session_id: str,
                        started_at: date) -> SystemPrompt:
    """Join the three tiers (hermes-facts §2): stable (``build_stable_tier``), context
    (``caller_context`` then the project context file), volatile (skills index, memory
    snapshot, user profile, "Session: <id> · Model: <m> · Provider: <p>", and
    "Conversation started: <YYYY-MM-DD>" from ``started_at``). Empty sections are omitted.
    The same inputs and files give the same bytes; nothing reads the clock.
    """
    stable = build_stable_tier(home=home, tool_names=tool_names, model=model, provider=provider)
    context = [caller_context.strip(), load_context_file(workspace)]
    volatile = [skills_index.strip()]
    if memory.strip():
        volatile.append("# Memory\n\n" + memory.strip())
    if user_profile.strip():
        volatile.append("# User profile\n\n" + user_profile.strip())
    volatile.append(f"Session: {session_id} · Model: {model} · Provider: {provider}")
    volatile.append(f"Conversation started: {started_at.isoformat()}")
    tiers = [stable, *[part for part in context + volatile if part]]
    return SystemPrompt(text=TIER_SEPARATOR.join(tiers), stable_len=len(stable))


_recovery_memo: LRUCache[tuple, int | None] = LRUCache(maxsize=RECOVERY_MEMO_MAX)
_recovery_lock = threading.Lock()  # cachetools caches are not thread-safe
_UNKNOWN = object()


def _soul_stamp(home: Path | None) -> tuple[int, int] | None:
    if home is None:
        return None
    try:
        stat = (home / "SOUL.md").stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def recover_stable_len(stored_text: str, *, home: Path | None, tool_names: Iterable[str],
                       model: str, provider: str) -> int | None:
    """The stable-tier length of a STORED prompt, or None when it cannot be proven.

    Rebuilds the stable tier from current inputs and accepts the boundary only if
    ``stored_text`` starts with exactly those bytes followed by the tier separator (seed, "The
    failure they designed for"). On None the caller sends the stored prompt unchanged with one
    system breakpoint; it never rewrites it. Verdicts are memoised per (sha256 of the stored
    prompt, inputs, SOUL.md mtime and size), so a resumed session does not
    rebuild the tier every turn and an edited SOUL.md is noticed. The memo is a cachetools
    LRUCache of RECOVERY_MEMO_MAX entries.
    """
    names = tuple(sorted(set(tool_names)))
    key = (hashlib.sha256(stored_text.encode("utf-8", "surrogatepass")).hexdigest(),
           str(home), _soul_stamp(home), names, model, provider)
    with _recovery_lock:
        known = _recovery_memo.get(key, _UNKNOWN)  # a hit refreshes its recency
    if known is not _UNKNOWN:
        return known
    stable = build_stable_tier(home=home, tool_names=names, model=model, provider=provider)
    verdict = len(stable) if stored_text.startswith(stable + TIER_SEPARATOR) else None
    with _recovery_lock:
        _recovery_memo[key] = verdict  # past RECOVERY_MEMO_MAX the least recent goes
    return verdict
