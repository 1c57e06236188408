"""What the person (or the delegating agent) actually asked, inside the framing the harness
wraps around it.

The harness sends some user messages nobody typed as they stand: a scheduled run and a
webhook delivery (agents/unattended.py), a ``/skill`` invocation (agents/tools/skills.py),
a child agent's first message (agents/tools/delegate.py child_prompt), and a compaction
summary that the Anthropic wire merges into the message after it
(agents/context/compaction.py). That framing is useful context for a real model, which
reads it as framing. The demo policy matches phrases ("run …", "write …", "delegate …"), so
it must be handed only the instruction inside: a schedule or webhook named "run echo" is a
name, never a command, and a webhook's payload is data, never an instruction.

``instruction`` first drops the blocks of the newest user message that are wholly the
harness's background (a summary, an orphaned tool output, the history stand-in), then
``own_words`` recognises each framing by the exact shape its builder produces, anchored at
the start of the message (never by searching for a phrase anywhere, which is how the name in
``<scheduled-run schedule="run echo">`` became a command). A message with no framing is
returned as it stands. The shapes are mirrored here rather than imported because the
simulator stands in for a provider and reads only what is on the wire;
tests/agents/test_simulator_framing.py builds each message with the harness's own builder,
so a changed framing fails there instead of silently turning into commands.
"""

from __future__ import annotations

import re

from simulator.script import ScriptRequest

_BACKGROUND_BLOCKS = (
    re.compile(r"\[CONTEXT COMPACTION — REFERENCE ONLY\] "),
    re.compile(r"\[ROLLING SUMMARY — absorbed messages through #\d+\]\n"),
    re.compile(r"\[output of [^\n]* \(call [^\n]*\), whose call is no longer in the "
               r"history\]\n"),
    re.compile(r"\(conversation continues\)\Z"),
)
"""Whole user messages the harness inserts that are never a request (compaction's summary
and rolling summary, agents/context/history.py's orphan note and stand-in). The Anthropic
wire merges them into the person's message as blocks of their own, so they are dropped by
block, before any text is read."""

_SCHEDULE_OPEN = re.compile(r'<scheduled-run schedule="[^"\n]*">\n')
_SCHEDULE_CLOSE = "\n</scheduled-run>\n\n"
"""A scheduled run: the prompt is the element's content. The name is only in the tag (and
the sentence after it), the run number and time only in the tail after the scaffold."""

_WEBHOOK_OPEN = re.compile(r'<webhook name="[^"\n]*">\n')
_WEBHOOK_CLOSE = "\n</webhook>\n\n"
"""A webhook delivery: the owner's instructions are the element's content; the payload in
the tail is data from an outside service (the framing says so)."""

_SKILL_OPEN = re.compile(r'<skill name="([^"\n]*)">\n')
_SKILL_CLOSE = ('\n</skill>\n\nThe user invoked the skill "{name}". Follow its instructions '
                'above.\n\n')
_SKILL_ARGUMENTS = re.compile(r"\s*Arguments: (.*)\Z", re.DOTALL)
_NO_ARGUMENTS = "(none)"
"""A skill invocation: the skill's body, then what the user typed after ``/name``."""

_CHILD_OPEN = "You are a child agent working on one task delegated by another agent."
_CHILD_GOAL = "\nGoal:\n"
_CHILD_CONTEXT = "\n\nContext:\n"
_CHILD_CLOSE = "\n\nWhen you are done, reply with a concise summary"
"""A child agent's first message: only its goal is an instruction; the context is
background and the rest is the harness's briefing."""

_SUMMARY_OPEN = "[CONTEXT COMPACTION"
_SUMMARY_CLOSE = "--- END OF CONTEXT SUMMARY"
"""A compaction summary, merged on the Anthropic wire with the message after it: the
summary is background (it says so); the message below its end line is the new request."""


def instruction(request: ScriptRequest) -> str:
    """What the newest user message asks, in the words of whoever asked it: its blocks
    without the harness's background blocks, joined as ScriptRequest joins them, then
    ``own_words``."""
    blocks = request.last_user_blocks or (request.last_user_text,)
    kept = [b for b in blocks
            if b and not any(shape.match(b) for shape in _BACKGROUND_BLOCKS)]
    return own_words("\n".join(kept))


def own_words(text: str) -> str:
    """The instruction inside ``text``: a schedule's prompt, a webhook's instructions, a
    skill's body and arguments, a child's goal, the message after a compaction summary, or
    ``text`` itself when the harness added nothing. A framing whose end cannot be found
    yields "" (nothing to act on), never the framing's own words."""
    if text.startswith(_SUMMARY_OPEN):
        end = text.find(_SUMMARY_CLOSE)
        if end < 0:
            return ""
        line_end = text.find("\n", end)
        return own_words(text[line_end:].lstrip("\n") if line_end >= 0 else "")
    if opening := _SCHEDULE_OPEN.match(text):
        return _element(text, opening.end(), _SCHEDULE_CLOSE)
    if opening := _WEBHOOK_OPEN.match(text):
        return _element(text, opening.end(), _WEBHOOK_CLOSE)
    if opening := _SKILL_OPEN.match(text):
        return _skill(text, opening)
    if text.startswith(_CHILD_OPEN):
        return _goal(text)
    return text


def _element(text: str, start: int, close: str) -> str:
    """The content of the element opened before ``start``, up to the LAST ``close``: the
    content is the owner's text and may contain anything, while what follows the scaffold
    (the run line; a payload, which is JSON and so cannot hold a raw line break inside a
    string) never holds the closing line."""
    end = text.rfind(close)
    return text[start:end].strip() if end >= start else ""


def _skill(text: str, opening: re.Match[str]) -> str:
    """The skill's body, then the arguments the user typed (none: the body alone)."""
    close = _SKILL_CLOSE.format(name=opening.group(1))
    end = text.find(close, opening.end())
    if end < 0:
        return ""
    body = text[opening.end():end].strip()
    arguments = _SKILL_ARGUMENTS.match(text, end + len(close))
    args = arguments.group(1).strip() if arguments else ""
    return body if args in ("", _NO_ARGUMENTS) else f"{body}\n\n{args}"


def _goal(text: str) -> str:
    """A child agent's goal: after the "Goal:" line, up to the first "Context:" section
    (the context may hold anything; a goal holding that header is cut short, the safe side)
    or else the closing request for a summary."""
    start = text.find(_CHILD_GOAL)
    if start < 0:
        return ""
    start += len(_CHILD_GOAL)
    end = text.find(_CHILD_CONTEXT, start)
    if end < 0:
        end = text.rfind(_CHILD_CLOSE)
    return text[start:end].strip() if end >= start else ""
