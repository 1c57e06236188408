"""The default script: a demo policy that exercises every built-in tool without an API key.

Every reply says "(simulated model)" so nobody mistakes it for a real model (DESIGN.md §7).
It only calls tools the request offers; without tools (a finalizer call) it answers in text.
Tool names and argument shapes are those of agents/tools/ (read_file, write_file, patch,
search_files, terminal, skills_list, skill_view, session_search). Rule matching and wire
rendering live in ``simulator.script`` and the API modules.

It acts only on the asker's own words (``simulator.framing.instruction``): a scheduled run's
prompt, a webhook's instructions, a skill's body and arguments, a child's goal; never a
schedule's or webhook's name, a payload, a summary or any other text the harness framed
them with.
"""

from __future__ import annotations

import json
import re
from typing import Any

from simulator.framing import instruction
from simulator.script import Reply, ScriptRequest, ToolCallSpec, ToolExchange

LABEL = "(simulated model)"
TOKEN_DELAY = 0.01
"""Seconds per streamed token, so the demo visibly streams."""

SLOW_STEP_SECONDS = 4
"""How long each step of the "slow demo" sleeps (a real `sleep` in the command backend, so
the turn runs long enough for a person to type a correction and steer it)."""
SLOW_STEPS = 3
_SLOW = re.compile(r"^\s*(?:slow|steer(?:ing)?)\s+demo\s*[.!]*\s*$", re.IGNORECASE)
"""The slow demo's trigger: the whole message, like a command (a user's finding: "recall
slow demo" ran the demo instead of searching for it, because the phrase matched anywhere)."""
_HELP = re.compile(r"^\s*help\s*[.!?]*\s*$", re.IGNORECASE)
"""The help trigger: the whole message, so "help me write hello.txt" writes the file."""
_STEERED = "the user steered the turn"
"""What agents/steer.py STEERED_RESULT says in each call a correction overtook (read as text,
as a real model reads it)."""

HELP = (f"{LABEL} I am the provider simulator, not a real model. Type any phrase in "
        "double quotes as it stands; each works in a new session's workspace:\n"
        "- \"list the files and read README.md\" (terminal + read_file)\n"
        "- \"write hello.txt\" or \"write hello.txt with hi there\" (write_file)\n"
        "- \"patch README.md: Welcome -> Hello\" or \"replace Hermes with demo in README.md\" "
        "(patch)\n"
        "- \"search workspace\" (search_files), \"run wc -l README.md\" (terminal)\n"
        "- \"skills\" (skills_list; view one by typing skill and its name), \"recall README\" "
        "or \"search history README\" (session_search)\n"
        "- \"delegate three tasks\" or \"delegate: list the files; read README.md\" (child "
        "agents, one per task)\n"
        f"- \"slow demo\" (three steps of {SLOW_STEP_SECONDS} s each, to try Steer: while they "
        "run, type a correction such as \u201cstop after step one\u201d and press Steer or "
        "Alt+Enter)")
"""What "help" answers. Every phrase in straight double quotes is an example a new user can
type as-is in a brand-new session (tests/sessions/test_demo_help.py runs each one), so they
only name files every new workspace has (the welcome README.md) or that they create; the
steer correction is in curly quotes because it is typed inside a running slow demo."""

DEFAULT_DELEGATED = ("list the files", "read README.md", "search workspace")
"""The tasks of "delegate three tasks" when the user names none."""


def _text(text: str) -> Reply:
    return Reply(text=text, token_delay=TOKEN_DELAY)


def _calls(request: ScriptRequest, text: str, calls: list[ToolCallSpec]) -> Reply:
    offered = [c for c in calls if c.name in request.tool_names]
    missing = [c.name for c in calls if c.name not in request.tool_names]
    if not offered:
        names = ", ".join(missing)
        return _text(f"{LABEL} I would call {names}, but that tool is not available in this "
                     "session, so I can only answer in text.")
    return Reply(text=text, tool_calls=tuple(offered), token_delay=TOKEN_DELAY)


def _delegation(text: str) -> ToolCallSpec | None:
    """"delegate: a; b; c" → one delegate call with a child task per part (the default
    three tasks when none are named), else None."""
    match = re.search(r"\bdelegate\b(.*)", text, re.IGNORECASE | re.DOTALL)
    if match is None:
        return None
    rest = match.group(1).strip()
    parts = [p.strip() for p in rest.lstrip(":").split(";") if p.strip()] \
        if rest.startswith(":") else []
    goals = parts or list(DEFAULT_DELEGATED)
    return ToolCallSpec(name="delegate", input={"tasks": [
        {"goal": goal, "context": "The workspace is your current directory."}
        for goal in goals]})


def _planned_calls(text: str) -> list[ToolCallSpec] | None:
    """Tool calls the user's text asks for, or None for plain chat."""
    lowered = text.lower()
    calls: list[ToolCallSpec] = []
    if (delegate := _delegation(text)) is not None:
        return [delegate]
    if re.search(r"\blist\b", lowered):
        calls.append(ToolCallSpec(name="terminal", input={"command": "ls -la", "timeout": 30}))
    read = re.search(r"\bread\s+(?:the\s+file\s+)?([\w./-]+)", text, re.IGNORECASE)
    if read:
        calls.append(ToolCallSpec(name="read_file",
                                  input={"path": read.group(1), "offset": 1, "limit": 500}))
    if calls:
        return calls
    if m := re.search(r"\bwrite\s+([\w./-]+)(?:\s+(?:with|containing)\s+(.+))?", text,
                      re.IGNORECASE | re.DOTALL):
        content = (m.group(2) or "Hello from the simulated model.").strip() + "\n"
        return [ToolCallSpec(name="write_file", input={"path": m.group(1), "content": content})]
    if m := re.search(r"\bpatch\s+([\w./-]+):?\s+(.+?)\s*->\s*(.+)", text, re.IGNORECASE):
        return [_patch(m.group(1), m.group(2), m.group(3))]
    if m := re.search(r"\breplace\s+(.+?)\s+with\s+(.+?)\s+in\s+([\w./-]+)", text,
                      re.IGNORECASE):
        return [_patch(m.group(3), m.group(1), m.group(2))]
    if m := re.search(r"\bsearch\s+history\s+(?:for\s+)?(.+)|\b(?:remember|recall)\s+(.+)",
                      text, re.IGNORECASE):
        query = (m.group(1) or m.group(2)).strip()
        return [ToolCallSpec(name="session_search", input={"query": query})]
    if m := re.search(r"\bsearch\s+(?:for\s+)?(\S+)(?:\s+in\s+([\w./-]+))?", text,
                      re.IGNORECASE):
        return [ToolCallSpec(name="search_files",
                             input={"pattern": m.group(1), "path": m.group(2) or "."})]
    if m := re.search(r"\brun\s+(.+)", text, re.IGNORECASE):
        return [ToolCallSpec(name="terminal",
                             input={"command": m.group(1).strip().strip("`"), "timeout": 60})]
    if m := re.search(r"\bskill\s+([\w-]+)", text, re.IGNORECASE):
        return [ToolCallSpec(name="skill_view", input={"name": m.group(1)})]
    if re.search(r"\bskills\b", lowered):
        return [ToolCallSpec(name="skills_list", input={})]
    return None


def _patch(path: str, old: str, new: str) -> ToolCallSpec:
    return ToolCallSpec(name="patch", input={"path": path, "old_string": old.strip(),
                                             "new_string": new.strip(), "replace_all": False})


def _output(result: str) -> str:
    """The readable output inside a tool result (tools may wrap it in JSON)."""
    try:
        value: Any = json.loads(result)
    except ValueError:
        return result
    if isinstance(value, dict):
        for key in ("output", "content", "result", "text"):
            if isinstance(value.get(key), str):
                return value[key]
    return result


_LONG_ENTRY = re.compile(r"^[-bcdlpsD?][-rwxsStT?]{9}[.+@]?\s")
"""A line of `ls -l` output: file type and nine permission characters, then a space."""
_RESULT_NOTE = re.compile(r"^\[(exit code -?\d+|timed out .*)\]$")
"""The lines agents/tools/terminal.py appends to a command's output."""


def _listing(command: str, output: str) -> str:
    """One line saying how many entries an ``ls`` listing shows. Long format counts the
    entry lines (never "total N"), one name per line otherwise; "." and ".." are counted
    apart so the number matches what a person sees besides them."""
    lines = [line for line in output.splitlines()
             if line.strip() and not _RESULT_NOTE.match(line.strip())
             and not line.startswith("ls: ")]
    entries = [line for line in lines if _LONG_ENTRY.match(line)]
    names = [line.split(" -> ")[0].split()[-1] for line in entries] if entries else [
        line.strip() for line in lines
        if not re.match(r"total \d", line) and not line.endswith(":")]
    dots = sum(1 for name in names if name in (".", ".."))
    count = len(names) - dots
    noun = "entry" if count == 1 else "entries"
    besides = " (not counting the folder itself and its parent)" if dots else ""
    return f"- `{command}` lists {count} {noun}{besides}."


def _summary(exchange: ToolExchange) -> str:
    output = _output(exchange.result)
    if exchange.is_error:
        return f"- {exchange.name} failed: {output.strip()[:200]}"
    command = str(exchange.input.get("command", "")).strip()
    if exchange.name == "delegate":
        heads = [line[3:] for line in output.splitlines() if line.startswith("## Child ")]
        return "- delegate: " + ("; ".join(heads) or output.strip()[:200])
    if exchange.name == "terminal" and re.match(r"ls(\s|$)", command):
        return _listing(command, output)
    if exchange.name == "read_file":
        lines = [re.sub(r"^\s*\d+\s*[\t|:→]\s?", "", line) for line in output.splitlines()]
        first = next((line for line in lines if line.strip()), "")
        count = f"{len(lines)} line{'' if len(lines) == 1 else 's'}"  # never "1 lines"
        return (f"- {exchange.input.get('path', 'the file')} has {count}; the first "
                f"is: {first.strip()[:160]}")
    first = next((line for line in output.splitlines() if line.strip()), "(no output)")
    return f"- {exchange.name}: {first.strip()[:200]}"


def _slow_demo() -> Reply:
    """Three real, slow terminal steps, so a new user can try Steer on a running turn."""
    return Reply(text=f"{LABEL} Slow demo: {SLOW_STEPS} steps of {SLOW_STEP_SECONDS} s each. "
                      "While they run, type a correction (for example \"stop after step one\") "
                      "and press Steer (or Alt+Enter): it lands between two steps, and the "
                      "steps not started yet are not run.",
                 tool_calls=tuple(ToolCallSpec(name="terminal", input={
                     "command": f"sleep {SLOW_STEP_SECONDS}; echo step {n} of {SLOW_STEPS} done",
                     "timeout": 60}) for n in range(1, SLOW_STEPS + 1)),
                 token_delay=TOKEN_DELAY)


def _after_last_reply(request: ScriptRequest) -> list[dict]:
    """The messages after the newest assistant message (what this request adds)."""
    messages = request.body.get("messages") or []
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return messages[last + 1:]


def _overtaken(request: ScriptRequest) -> int:
    """When the newest user text follows tool results that say a correction overtook them
    (it landed in the running turn between two calls, agents/steer.py): how many planned
    calls it overtook; 0 otherwise (an ordinary message, or one sent after a stopped turn)."""
    if request.tool_results or not request.last_user_text:
        return 0
    return json.dumps(_after_last_reply(request)).count(_STEERED)


def _corrected(request: ScriptRequest, text: str, overtaken: int) -> Reply:
    """The reply to a correction: it obeys a correction that asks for something the demo
    can do, else acknowledges it, saying how many planned steps it stopped."""
    skipped = (f"{overtaken} planned step{'s were' if overtaken != 1 else ' was'} not run")
    said = f"{LABEL} Got your correction (“{text.strip()[:200]}”): {skipped}."
    calls = _planned_calls(text)
    if calls is None:
        return _text(said + " I stopped there.")
    return _calls(request, said + " Doing what you asked instead.", calls)


def demo_policy(request: ScriptRequest) -> Reply:
    """The default script (see module docstring). Never raises."""
    overtaken = _overtaken(request)
    if overtaken and request.tool_names:
        return _corrected(request, instruction(request), overtaken)
    if request.tool_results:
        lines = [_summary(x) for x in request.tool_results]
        return _text(f"{LABEL} Here is what the tools returned:\n" + "\n".join(lines))
    # Only the asker's own words are instructions: never a schedule's or webhook's name,
    # a payload, a skill's or a child's briefing, or a summary (simulator/framing.py).
    text = instruction(request)
    if not request.tool_names:
        return _text(f"{LABEL} Summary: the conversation so far had {request.iteration} "
                     "assistant replies; no tools are available for this answer.")
    if _HELP.match(text):
        return _text(HELP)
    if _SLOW.match(text):
        return _slow_demo()
    calls = _planned_calls(text)
    if calls is None:
        return _text(f"{LABEL} Hello! I am the provider simulator, so my answers are scripted. "
                     "Type \"help\" to see what I can demonstrate.")
    names = " and ".join(c.name for c in calls)
    return _calls(request, f"{LABEL} Sure, I will use {names}.", calls)
