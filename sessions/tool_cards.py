"""What a tool card says: a one-line description of the call, per tool, and its status word.

Built from the call's arguments (as the model sent them) and the result's metadata
(Message.tool_meta: agents.tools.ToolOutput.metadata, stored by sessions/sink.py), never by
pattern-matching the stored output text (issue 14, broken item 6: cards read
``hello.txt, old, new, false``). Examples: ``patch hello.txt: 1 replacement``,
``read README.md``, ``terminal: ls -la``, ``search "foo" in src/: 3 matches``.
Display only: nothing here decides what runs. Hidden and control characters (bidi
controls, zero-width characters, CR, ESC...) show as visible escapes such as ``⟨U+202E⟩``
(sessions/visible.py), so a summary cannot read differently from the call.
"""

from __future__ import annotations

import json
from typing import Any

from agents.wording import plural
from sessions.visible import visible_text

SUMMARY_CHARS = 120
"""Longest card summary (chars); longer ones end with an ellipsis."""
FINISHED_STATUSES = frozenset({"done", "error", "failed", "stopped", "cancelled", "denied",
                               "expired"})
"""Statuses after which a card never goes back to "running" or "queued" (static/chat.js has
the same)."""
APPROVAL_STATUSES = {"cancelled": "cancelled", "denied": "denied", "expired": "expired"}
"""Approval request state → card status, for calls that never ran because of it."""
AWAITING_ANSWER = "awaiting_answer"
"""The wait state of a clarify call whose question is pending (sessions/clarify.py): its card
says it waits for the user's answer, not that it runs (nothing runs until they answer)."""
WAITING_LABEL = "waiting for your answer"
APPROVAL_WAITING_LABEL = "awaiting approval"


def call_arguments(arguments: Any) -> dict | None:
    """The call's arguments as a dict (they arrive as JSON text or already parsed); None
    when they are not a JSON object."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return None
    return arguments if isinstance(arguments, dict) else None


def _text(value: Any) -> str:
    """One line: strings as they are, anything else as compact JSON; hidden and control
    characters escaped (CR would otherwise be collapsed into a space), whitespace collapsed."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(visible_text(text).split())


def _count(meta: dict, key: str) -> int | None:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _terminal(args: dict, meta: dict) -> str:
    return f"terminal: {_text(args.get('command', ''))}"


def _read_file(args: dict, meta: dict) -> str:
    text = f"read {_text(args.get('path', '?'))}"
    offset, limit = args.get("offset"), args.get("limit")
    if isinstance(offset, int) and isinstance(limit, int):
        text += f" lines {offset:,}–{offset + limit - 1:,}"
    elif isinstance(offset, int):
        text += f" from line {offset:,}"
    total = _count(meta, "total_lines")
    return text + (f" ({plural(total, 'line')})" if total is not None else "")


def _write_file(args: dict, meta: dict) -> str:
    verb = {True: "create", False: "overwrite"}.get(meta.get("created"), "write")
    text = f"{verb} {_text(args.get('path', '?'))}"
    lines = _count(meta, "lines")
    return text + (f": {plural(lines, 'line')}" if lines is not None else "")


def _patch(args: dict, meta: dict) -> str:
    edits = args.get("edits")
    if isinstance(edits, list) and edits:
        paths = list(dict.fromkeys(_text(e.get("path", "?")) for e in edits
                                   if isinstance(e, dict)))
        target = paths[0] if len(paths) == 1 else ", ".join(paths)
    else:
        target = _text(args.get("path", "?"))
    replacements = _count(meta, "replacements")
    return f"patch {target}" + (f": {plural(replacements, 'replacement')}"
                                if replacements is not None else "")


def _search_files(args: dict, meta: dict) -> str:
    text = f'search "{_text(args.get("pattern", ""))}" in {_text(args.get("path") or ".")}'
    if args.get("glob"):
        text += f" ({_text(args['glob'])})"
    hits = _count(meta, "hits")
    if hits is not None:
        text += f": {plural(hits, 'match', 'matches')}{'+' if meta.get('truncated') else ''}"
    return text


def _skill_view(args: dict, meta: dict) -> str:
    return f"view skill {_text(args.get('name', '?'))}"


def _session_search(args: dict, meta: dict) -> str:
    return f'search past sessions for "{_text(args.get("query", ""))}"'


DESCRIBERS = {
    "terminal": _terminal, "read_file": _read_file, "write_file": _write_file,
    "patch": _patch, "search_files": _search_files, "skills_list": lambda a, m: "list skills",
    "skill_view": _skill_view, "session_search": _session_search,
}
"""Tool name → (arguments, metadata) → description. Other tools (MCP, new ones) get
``name: value, value``."""


def tool_summary(name: str, arguments: Any, meta: dict | None = None) -> str:
    """The card's one-line description of a call (see the module docstring), at most
    SUMMARY_CHARS chars. Never raises: arguments that are not a JSON object, or of
    unexpected types, fall back to a plain rendering."""
    meta = meta if isinstance(meta, dict) else {}
    args = call_arguments(arguments)
    describe = DESCRIBERS.get(name)
    if args is None:
        text = f"{name}: {_text(arguments)}" if arguments not in (None, "", {}) else name
    elif describe is not None:
        try:
            text = describe(args, meta)
        except (AttributeError, TypeError, ValueError):
            text = f"{name}: {_text(args)}"
    else:
        values = ", ".join(_text(v) for v in args.values())
        text = f"{name}: {values}" if values else name
    # Escaped before whitespace is collapsed: str.split() would turn CR into a space.
    text = " ".join(visible_text(text).split())
    if len(text) <= SUMMARY_CHARS:
        return text
    cut = text[:SUMMARY_CHARS - 1]
    if cut.rfind("⟨") > cut.rfind("⟩"):  # never end inside an escape
        cut = cut[:cut.rfind("⟨")]
    return cut + "…"


def tool_status(*, result: dict | None, approval_state: str | None = None,
                started: bool = True) -> tuple[str, str]:
    """(status, label) of a card. ``result``: the tool message dict (None while it has not
    answered); ``approval_state``: the state of the call's approval request, if any, or
    AWAITING_ANSWER for a clarify call whose question is pending; ``started``: the call was
    announced as started (``tool.called``). A model reply's calls run one segment after
    another (agents/tools/dispatch.py): a card said "running" for every call from the
    moment the reply arrived, so three sequential 4-second steps all looked running at once.

    queued (not started yet) · running · waiting (label WAITING_LABEL: a clarify question
    waits for the user; label APPROVAL_WAITING_LABEL: its approval is pending) · done ·
    error (the tool failed) · failed with label "exit N" (a command that
    ran and exited non-zero, from metadata exit_code) · stopped (the user pressed stop: the
    command was killed, or the call was skipped; metadata stopped; label "not run: steered"
    when a correction overtook it, metadata steered) · cancelled / denied /
    expired (its approval was, so it never ran) · denied (metadata denied: the policy or a
    person refused it; the request's own state wins when there is one)."""
    meta = (result or {}).get("tool_meta") or {}
    if meta.get("stopped"):
        return "stopped", "stopped"
    if meta.get("steered"):  # skipped: the user's correction overtook it (agents/steer.py)
        return "stopped", "not run: steered"
    if approval_state in APPROVAL_STATUSES and (result is None or result.get("is_error")):
        status = APPROVAL_STATUSES[approval_state]
        return status, status
    if meta.get("denied") and approval_state is None:  # never ran: policy or a person said no
        return "denied", "denied"
    if result is None and approval_state == AWAITING_ANSWER:
        return "waiting", WAITING_LABEL
    if result is None and approval_state == "pending":
        return "waiting", APPROVAL_WAITING_LABEL
    if result is None:
        return ("running", "running") if started else ("queued", "queued")
    if result.get("is_error"):
        return "error", "timed out" if meta.get("timed_out") else "error"
    exit_code = _count(meta, "exit_code")
    if exit_code not in (None, 0):
        return "failed", f"exit {exit_code}"
    return "done", "done"
