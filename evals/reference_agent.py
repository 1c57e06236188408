"""The reference agent: a deterministic simulator script that does a task's plan, step by
step, deciding each tool call ONLY from the request it receives (issue 17 item 2).

Why it exists: a real model would notice little when the harness drops, reorders or
mis-pairs what it sends; this agent notices everything, because it keeps no state between
requests. Each request is re-read from scratch:

1. The plan is the newest user text holding a ``[plan]`` block (the task's instructions, a
   steer correction, or a child agent's goal). Its lines::

       [plan]
       1. search_files {"pattern": "TIMEOUT"} => file:^(\\S+?):\\d+:
       2. read_file {"path": "${file}"} => old:TIMEOUT = (\\d+)
       3. read_file {"path": "a.txt"} => a:(\\d+) || read_file {"path": "b.txt"} => b:(\\d+)
       answer: TIMEOUT was ${old}; a=${a}
       [/plan]

   A step is one or more tool calls (``||`` = a batch sent in one reply), each with JSON
   arguments and captures ``=> name:regex`` (group 1, else the whole match) applied to that
   call's result. ``${name}`` is replaced in later arguments and in the answer.
2. Progress is read from the visible history after that plan: each of this agent's replies
   says ``step N``; its calls are paired with the results that follow, which must carry the
   same call ids IN THE SAME ORDER as the calls (the harness's contract: results are stored
   and sent in call order). A missing, extra, reordered or mis-paired result, a capture that
   does not match, or an error result with no capture, ends the task with ``FAILED: ...``
   (what a harness break looks like to the grader).
   ``recall: name:regex`` looks ``name`` up in the history BEFORE the plan (the newest
   text or tool result that matches: what an earlier turn learned), then in the system
   prompt (where memory from earlier sessions appears).
3. Facts: any visible line ``FACT name = value`` (a user message or a compaction summary)
   defines ``${name}``; captures override facts.

The summariser (a compaction request: no tools, a ``<transcript>``) is extractive: it keeps
every ``FACT`` line of the transcript, in order, once. A request with no tools that is not a
summary (the finalizer, when the iteration budget ran out) is answered ``FAILED``.
No Django; pure functions of the request body.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from simulator.prefix import content_text
from simulator.script import Reply, ScriptRequest, ToolCallSpec

PLAN_RE = re.compile(r"^\[plan\]\s*$(.*?)^\[/plan\]\s*$", re.MULTILINE | re.DOTALL)
STEP_RE = re.compile(r"^(\d+)\.\s+(.+)$")
STEP_MARK_RE = re.compile(r"^step (\d+)\b")
FACT_RE = re.compile(r"\bFACT (\w+) = (.+?)\s*$", re.MULTILINE)
VAR_RE = re.compile(r"(?<!\$)\$\{(\w+)\}")
"""``${name}``; ``$${name}`` is a literal ``${name}`` (a child's plan inside the parent's)."""
FAILED = "FAILED"


# --- the request as a list of events ----------------------------------------------------

@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of an assistant reply: wire id, tool name, arguments."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Result:
    """One tool result: the id it answers, its text, its error flag."""

    id: str
    text: str
    is_error: bool = False


@dataclass(slots=True)
class Event:
    """``kind`` "user" (text), "assistant" (text, calls) or "results" (results)."""

    kind: str
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)


def events_of(endpoint: str, body: dict[str, Any]) -> list[Event]:
    """The visible history of a request, in order, in one shape for both wires. An Anthropic
    user message is split into its results event then its text event (block order)."""
    out: list[Event] = []
    for message in body.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        if endpoint == "anthropic":
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (
                content or [])
            if role == "assistant":
                out.append(Event("assistant", text="".join(
                    str(b.get("text", "")) for b in blocks if b.get("type") == "text"),
                    calls=[Call(str(b.get("id")), str(b.get("name")), dict(b.get("input") or {}))
                           for b in blocks if b.get("type") == "tool_use"]))
                continue
            for block in blocks:
                if block.get("type") == "tool_result":
                    result = Result(str(block.get("tool_use_id")),
                                    content_text(block.get("content", "")),
                                    bool(block.get("is_error", False)))
                    if out and out[-1].kind == "results":
                        out[-1].results.append(result)
                    else:
                        out.append(Event("results", results=[result]))
                elif block.get("type") == "text" and str(block.get("text", "")).strip():
                    out.append(Event("user", text=str(block["text"])))
            continue
        if role == "system":
            continue
        if role == "tool":
            result = Result(str(message.get("tool_call_id")), content_text(content))
            if out and out[-1].kind == "results":
                out[-1].results.append(result)
            else:
                out.append(Event("results", results=[result]))
        elif role == "assistant":
            calls = []
            for c in message.get("tool_calls") or []:
                function = c.get("function") or {}
                try:
                    args = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    args = {}
                calls.append(Call(str(c.get("id")), str(function.get("name")),
                                  args if isinstance(args, dict) else {}))
            out.append(Event("assistant", text=content_text(content), calls=calls))
        elif role == "user":
            out.append(Event("user", text=content_text(content)))
    return out


def system_text(endpoint: str, body: dict[str, Any]) -> str:
    """The system prompt of the request as text (Anthropic ``system`` string or blocks;
    the OpenAI system message)."""
    if endpoint == "anthropic":
        system = body.get("system") or ""
        return system if isinstance(system, str) else "\n".join(
            str(b.get("text", "")) for b in system if isinstance(b, dict))
    return "\n".join(content_text(m.get("content")) for m in body.get("messages") or []
                     if m.get("role") == "system")


# --- the plan ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SubStep:
    """One call of a step: tool name, argument template (JSON text), captures."""

    tool: str
    args: str
    captures: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Plan:
    steps: dict[int, tuple[SubStep, ...]]
    answer: str
    recalls: tuple[tuple[str, str], ...] = ()


class PlanError(ValueError):
    """The plan text cannot be parsed (a task-authoring bug: said in the answer)."""


def parse_plan(text: str) -> Plan | None:
    """The ``[plan]`` block of ``text`` (the last one), or None. Raises PlanError."""
    blocks = PLAN_RE.findall(text)
    if not blocks:
        return None
    steps: dict[int, tuple[SubStep, ...]] = {}
    answer = ""
    recalls = []
    for raw in blocks[-1].splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.lower().startswith("recall:"):
            name, sep, regex = line.split(":", 1)[1].strip().partition(":")
            if not sep:
                raise PlanError(f"recall {line!r} needs name:regex")
            recalls.append((name.strip(), regex))
            continue
        if line.lower().startswith("answer:"):
            answer = line.split(":", 1)[1].strip()
            continue
        match = STEP_RE.match(line)
        if match is None:
            raise PlanError(f"cannot read plan line {line!r}")
        steps[int(match.group(1))] = _substeps(match.group(2))
    return Plan(steps=steps, answer=answer, recalls=tuple(recalls))


def _substeps(text: str) -> tuple[SubStep, ...]:
    """``tool {json} => name:regex ... || tool {json} ...``. The JSON is decoded first, so
    its strings may hold `` => `` and `` || `` (a child's plan inside a delegate call)."""
    out = []
    rest = text.strip()
    while rest:
        tool, _, rest = rest.partition(" ")
        rest = rest.lstrip()
        args = "{}"
        if rest.startswith("{"):
            # ${name} may stand for a number ({"offset": ${line}}): parse a copy with each
            # placeholder replaced by as many digits, so the JSON's extent is the same.
            probe = VAR_RE.sub(lambda m: "1" * len(m.group(0)), rest)
            try:
                _, end = json.JSONDecoder().raw_decode(probe)
            except ValueError as error:
                raise PlanError(f"bad JSON arguments for {tool}: {error}") from error
            args, rest = rest[:end], rest[end:]
        part, _, rest = rest.partition(" || ")
        rest = rest.strip()
        captures = []
        for cap in part.split(" => "):
            if not cap.strip():
                continue
            name, sep, regex = cap.strip().partition(":")
            if not sep:
                raise PlanError(f"capture {cap!r} needs name:regex")
            captures.append((name.strip(), regex))
        out.append(SubStep(tool=tool, args=args, captures=tuple(captures)))
    return tuple(out)


def _fill(template: str, values: dict[str, str], *, json_text: bool) -> str:
    def sub(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(name)
        value = values[name]
        return json.dumps(value)[1:-1] if json_text else value
    return VAR_RE.sub(sub, template).replace("$${", "${")


# --- the policy -------------------------------------------------------------------------

def _fail(reason: str) -> Reply:
    return Reply(text=f"{FAILED}: {reason}")


def summarise(text: str) -> str:
    """Extractive summary: every FACT line of the transcript, once, in order."""
    seen: list[str] = []
    for match in FACT_RE.finditer(text):
        line = f"FACT {match.group(1)} = {match.group(2)}"
        if line not in seen:
            seen.append(line)
    return "Facts kept from the earlier conversation:\n" + "\n".join(seen) if seen else (
        "Nothing factual to keep from the earlier conversation.")


def decide(endpoint: str, body: dict[str, Any], tool_names: tuple[str, ...]) -> Reply:
    """The next reply for this request (see the module docstring). Never raises."""
    events = events_of(endpoint, body)
    users = [e for e in events if e.kind == "user"]
    if not tool_names:
        if len(users) == 1 and "<transcript>" in users[0].text:
            return Reply(text=summarise(users[0].text))
        return _fail("asked to answer without tools (the iteration budget ran out)")
    plan_at, plan = None, None
    for index in range(len(events) - 1, -1, -1):
        if events[index].kind == "user" and "[plan]" in events[index].text:
            try:
                plan = parse_plan(events[index].text)
            except PlanError as error:
                return _fail(str(error))
            if plan is not None:
                plan_at = index
                break
    if plan is None or plan_at is None:
        return Reply(text="No plan in this conversation: nothing to do.")
    values: dict[str, str] = {}
    for event in events:
        if event.kind == "user":
            for match in FACT_RE.finditer(event.text):
                values[match.group(1)] = match.group(2)
    before = events[:plan_at]
    system = system_text(endpoint, body)
    for name, regex in plan.recalls:  # the newest earlier text that matches, then the prompt
        for text in [t for e in reversed(before) for t in [*(r.text for r in e.results), e.text]
                     ] + [system]:
            found = re.search(regex, text, re.MULTILINE)
            if found is not None:
                values[name] = found.group(1) if found.groups() else found.group(0)
                break
        else:
            return _fail(f"recall: {name} is nowhere in the visible history or the prompt")
    done: set[int] = set()
    tail = events[plan_at + 1:]
    for position, event in enumerate(tail):
        if event.kind != "assistant" or not event.calls:
            continue
        mark = STEP_MARK_RE.match(event.text)
        if mark is None or int(mark.group(1)) not in plan.steps:
            return _fail(f"a reply without a step mark holds tool calls: {event.text[:60]!r}")
        number = int(mark.group(1))
        subs = plan.steps[number]
        following = tail[position + 1] if position + 1 < len(tail) else None
        if following is None or following.kind != "results":
            return _fail(f"step {number}: its tool results are missing")
        got = [r.id for r in following.results]
        want = [c.id for c in event.calls]
        if got != want:
            kind = "out of order" if sorted(got) == sorted(want) else "missing or mis-paired"
            return _fail(f"step {number}: results {kind} (calls {want}, results {got})")
        if len(event.calls) != len(subs):
            return _fail(f"step {number}: {len(event.calls)} calls for {len(subs)} planned")
        for call, result, sub in zip(event.calls, following.results, subs):
            if call.name != sub.tool:
                return _fail(f"step {number}: call {call.name} where {sub.tool} was planned")
            if result.is_error and not sub.captures:
                return _fail(f"step {number}: {sub.tool} failed: {result.text[:200]}")
            for name, regex in sub.captures:
                found = re.search(regex, result.text, re.MULTILINE)
                if found is None:
                    return _fail(f"step {number}: {name} not found in the {sub.tool} result "
                                 f"({result.text[:120]!r})")
                values[name] = found.group(1) if found.groups() else found.group(0)
        done.add(number)
    pending = [n for n in sorted(plan.steps) if n not in done]
    if not pending:
        try:
            return Reply(text=_fill(plan.answer or "Done.", values, json_text=False))
        except KeyError as missing:
            return _fail(f"the answer needs {missing.args[0]}, which was never found")
    number = pending[0]
    calls = []
    for sub in plan.steps[number]:
        if sub.tool not in tool_names:
            return _fail(f"step {number}: tool {sub.tool} is not offered")
        try:
            args = json.loads(_fill(sub.args, values, json_text=True))
        except KeyError as missing:
            return _fail(f"step {number} needs {missing.args[0]}, which was never found")
        except ValueError as error:
            return _fail(f"step {number}: bad arguments {sub.args!r}: {error}")
        calls.append(ToolCallSpec(name=sub.tool, input=args))
    names = ", ".join(c.name for c in calls)
    return Reply(text=f"step {number}: {names}", tool_calls=tuple(calls))


def reference_policy(request: ScriptRequest) -> Reply:
    """The simulator script (simulator/script.py Policy)."""
    return decide(request.endpoint, request.body, request.tool_names)
