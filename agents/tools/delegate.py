"""The delegate tool and its decisions: a child agent that starts empty.

Seed, "Delegation: a child that starts empty". The model asks for one child task or a batch;
each child gets a fresh conversation, a focused prompt built from its goal and context, the
parent's toolset minus a blocklist, and its own iteration budget. The parent sees only the
call and one summary per child, never a child's transcript: the parent pays a summary
rather than a transcript.

What is decided here (pure, no Django, no I/O except the spill write through Workspace):

- ``child_toolset``: parent's tools ∩ the requested toolsets − BLOCKED_TOOLS. A child never
  gains a tool its parent lacks. Depth: the parent session has depth 0, its children 1; a
  child keeps ``delegate`` (and only that one of the blocked tools) when its depth is below
  the configured maximum (default 1, so no child delegates).
- ``child_prompt``: the child's first user message from goal + context.
- ``summary_budget_tokens``: half of the parent's remaining context headroom divided across
  the batch, floored at SUMMARY_FLOOR_TOKENS.
- ``delegate_result``: the tool result the parent reads; a summary over its budget is
  spilled to a workspace file (agents/tools/spill.py) and replaced by a preview.

The tool's ``run`` validates the batch and raises DelegationRequested; the caller
(sessions/runner.py) creates the children and suspends the parent's turn, and writes the
call's tool result when the last child ends (sessions/delegation.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.errors import DelegationRequested, ToolError
from agents.messages import Message, ToolSpec
from agents.context.tokens import estimate_text_tokens
from agents.tools import NoPathArguments, PathScope, ToolContext, ToolOutput
from agents.tools.spill import CHARS_PER_TOKEN, SpillLimits, spill_message
from agents.wording import plural

DELEGATE_TOOL = "delegate"

BLOCKED_TOOLS: frozenset[str] = frozenset({
    "delegate",       # no delegating: no fan-out amplification (re-opened by depth only)
    "clarify",        # no asking the user: nothing competes for the one human
    "memory",         # no memory writes: no racing on shared long-term state
    "send_message",   # no messaging: no side effects the parent cannot see
    "schedule",       # no scheduling: no work outliving the session in the parent's name
    "cronjob",
})
"""Tools stripped from every leaf child (seed: five axes; hermes' names and ours)."""

DEFAULT_MAX_DEPTH = 1
"""Shipped spawn depth: children (depth 1) may not delegate. 2 lets an orchestrator child
delegate once more; grandchildren are leaves."""

CHILD_MAX_ITERATIONS = 50
"""A child's own iteration budget (hermes' default for delegated tasks)."""

MAX_BATCH = 8
"""Children one delegate call may ask for (bounds fan-out and the summary floor's total)."""

SUMMARY_FLOOR_TOKENS = 1_000
"""The least a child's summary may use, whatever the parent's headroom.

Why 1,000 tokens (~4,000 chars): a useful summary says what was done, what was found, the
paths or handles to check and what is unverified; in practice that is 150–600 tokens, so
the floor never cuts a normal summary, while a smaller floor (say 200) would turn a
nearly-full parent's summaries into a sentence each, which is noise. The spill preview
(PREVIEW_CHARS, 1,500 chars) must fit inside it with room for the spill notice. With
MAX_BATCH children the floor's total is 8,000 tokens, 4% of a 200k window: the floor alone
cannot blow the window the parent still has to think in."""

TOOLSETS: Mapping[str, frozenset[str]] = {
    "files": frozenset({"read_file", "write_file", "patch", "search_files"}),
    "read": frozenset({"read_file", "search_files"}),
    "terminal": frozenset({"terminal"}),
    "search": frozenset({"search_files", "session_search"}),
    "skills": frozenset({"skills_list", "skill_view"}),
}
"""Named groups a delegate call may ask for; a plain tool name is accepted too."""

DESCRIPTION = (
    "Delegate one task or a batch of independent tasks to child agents that run "
    "concurrently. Each child starts with an EMPTY conversation: it sees only the goal and "
    "context you write here (put every file path, constraint and fact it needs in "
    "`context`), works with your tools minus delegate, clarify, memory, messaging and "
    "scheduling, and has its own budget of iterations. You receive one summary per child, "
    "never its transcript. Summaries are the children's self-reports, not verified facts: "
    "if a child claims it wrote or changed something, check it yourself (read the file, run "
    "the test) before relying on it. Use it for work that would flood your context "
    "(broad searches, many-file reviews) or that splits into independent parts.")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal": {"type": "string",
                 "description": "What one child should achieve (use `tasks` for a batch)."},
        "context": {"type": "string",
                    "description": "Everything the child needs to know: it has none of "
                                   "this conversation."},
        "toolsets": {"type": "array", "items": {"type": "string"},
                     "description": "Optional: limit the child to these toolsets (files, "
                                    "read, terminal, search, skills) or tool names."},
        "tasks": {"type": "array", "minItems": 1, "maxItems": MAX_BATCH,
                  "description": "A batch of child tasks run concurrently.",
                  "items": {"type": "object", "required": ["goal"], "properties": {
                      "goal": {"type": "string"}, "context": {"type": "string"},
                      "toolsets": {"type": "array", "items": {"type": "string"}}}}},
    },
}

GOAL_MAX_CHARS = 2_000
CONTEXT_MAX_CHARS = 20_000


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationContext:
    """What the delegate tool needs to know about its caller, as plain values (fetched by
    sessions/toolbox.py): ``parent_tools`` the parent session's pinned tool names;
    ``depth`` the parent session's depth (0 for a session a person started);
    ``max_depth`` the configured spawn depth; ``context_window`` the parent's model window
    and ``context_used`` its current prompt size, both in tokens."""

    parent_tools: tuple[str, ...]
    depth: int = 0
    max_depth: int = DEFAULT_MAX_DEPTH
    context_window: int = 200_000
    context_used: int = 0
    max_iterations: int = CHILD_MAX_ITERATIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSpec:
    """One child to create: its ``goal``, ``context``, ``tool_names`` (sorted), the
    ``prompt`` (its first user message), ``max_iterations`` and ``summary_budget`` (tokens
    its summary may take in the parent's context)."""

    goal: str
    context: str
    tool_names: tuple[str, ...]
    prompt: str
    max_iterations: int
    summary_budget: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationRequest:
    """A validated delegate call: the children in the order the model listed them."""

    children: tuple[ChildSpec, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildOutcome:
    """How one child ended, for the parent's tool result: ``status`` a Turn status
    (completed, failed, cancelled, budget_blocked), ``summary`` its final reply ("" if
    none), ``error`` why it failed, ``iterations`` model calls it made."""

    index: int
    goal: str
    status: str
    summary: str = ""
    error: str = ""
    iterations: int = 0
    summary_budget: int = SUMMARY_FLOOR_TOKENS


def expand_toolsets(requested: Iterable[str], known_tools: Collection[str]) -> frozenset[str]:
    """Tool names for ``requested`` toolset or tool names. Raises ToolError naming the
    unknown entries (and what is accepted)."""
    names: set[str] = set()
    unknown: list[str] = []
    for item in requested:
        key = str(item).strip()
        if key in TOOLSETS:
            names |= TOOLSETS[key]
        elif key in known_tools:
            names.add(key)
        else:
            unknown.append(key)
    if unknown:
        raise ToolError(f"unknown toolset(s): {', '.join(unknown)}. Use one of "
                        f"{', '.join(sorted(TOOLSETS))} or a tool name you have.")
    return frozenset(names)


def child_toolset(parent_tools: Iterable[str], *, requested: Iterable[str] | None = None,
                  child_depth: int = 1, max_depth: int = DEFAULT_MAX_DEPTH,
                  ) -> tuple[str, ...]:
    """The child's tool names, sorted: the parent's, narrowed to ``requested`` when given,
    minus BLOCKED_TOOLS; ``delegate`` is kept (when the parent has it) only while
    ``child_depth < max_depth``. Never a name outside ``parent_tools``. Raises ToolError for
    an unknown requested toolset."""
    parent = frozenset(parent_tools)
    allowed = parent
    if requested is not None:
        allowed = parent & expand_toolsets(requested, parent)
    blocked = BLOCKED_TOOLS - ({DELEGATE_TOOL} if child_depth < max_depth else set())
    return tuple(sorted(allowed - blocked))


def child_prompt(goal: str, context: str = "") -> str:
    """The child's first user message: the goal, the context, and what to hand back."""
    parts = ["You are a child agent working on one task delegated by another agent. You "
             "start with no conversation history: the goal and context below are all you "
             "know. Work on your own; nobody can answer questions.",
             "", "Goal:", goal.strip()]
    if context.strip():
        parts += ["", "Context:", context.strip()]
    parts += ["", "When you are done, reply with a concise summary for the delegating agent: "
              "what you did, what you found (with file paths), and what you could not do or "
              "did not verify. That reply is all it will see."]
    return "\n".join(parts)


def summary_budget_tokens(*, context_window: int, context_used: int, batch_size: int,
                          floor: int = SUMMARY_FLOOR_TOKENS) -> int:
    """Tokens one summary of a batch may take: half of the parent's remaining headroom
    (``context_window - context_used``, never negative) divided by ``batch_size`` (≥ 1),
    never below ``floor``."""
    headroom = max(0, int(context_window) - max(0, int(context_used)))
    return max(int(floor), headroom // 2 // max(1, int(batch_size)))


def _task_list(args: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tasks = args.get("tasks")
    if tasks is not None and args.get("goal") is not None:
        raise ToolError("pass either `goal` (one child) or `tasks` (a batch), not both")
    if tasks is None:
        if not isinstance(args.get("goal"), str):
            raise ToolError("delegate needs a `goal` or a non-empty `tasks` list")
        return [args]
    if not isinstance(tasks, list) or not tasks:
        raise ToolError("`tasks` must be a non-empty list of {goal, context, toolsets}")
    if len(tasks) > MAX_BATCH:
        raise ToolError(f"at most {MAX_BATCH} child tasks per delegate call "
                        f"(asked for {len(tasks)})")
    if not all(isinstance(t, Mapping) for t in tasks):
        raise ToolError("every entry of `tasks` must be an object with a `goal`")
    return list(tasks)


def plan_delegation(args: Mapping[str, Any], dctx: DelegationContext) -> DelegationRequest:
    """Validate a delegate call's arguments and plan its children. Raises ToolError (the
    model reads it) for a missing or oversized goal, an unknown toolset, a batch over
    MAX_BATCH, a child left with no tools, or a caller at the depth limit."""
    if dctx.depth >= dctx.max_depth:
        raise ToolError(f"this agent is at the delegation depth limit ({dctx.max_depth}); "
                        "do the work yourself")
    tasks = _task_list(args)
    budget = summary_budget_tokens(context_window=dctx.context_window,
                                   context_used=dctx.context_used, batch_size=len(tasks))
    children = []
    for number, task in enumerate(tasks, 1):
        goal, context = task.get("goal"), task.get("context", "") or ""
        if not isinstance(goal, str) or not goal.strip():
            raise ToolError(f"task {number}: `goal` must be a non-empty string")
        if not isinstance(context, str):
            raise ToolError(f"task {number}: `context` must be a string")
        if len(goal) > GOAL_MAX_CHARS or len(context) > CONTEXT_MAX_CHARS:
            raise ToolError(f"task {number}: goal is limited to {GOAL_MAX_CHARS} chars and "
                            f"context to {CONTEXT_MAX_CHARS}; write the rest to a file and "
                            "name it in the context")
        requested = task.get("toolsets")
        if requested is not None and not (isinstance(requested, list)
                                          and all(isinstance(t, str) for t in requested)):
            raise ToolError(f"task {number}: `toolsets` must be a list of names")
        tools = child_toolset(dctx.parent_tools, requested=requested,
                              child_depth=dctx.depth + 1, max_depth=dctx.max_depth)
        if not tools:
            raise ToolError(f"task {number}: the child would have no tools left "
                            f"(asked for {requested}); ask for toolsets you have")
        children.append(ChildSpec(goal=goal.strip(), context=context, tool_names=tools,
                                  prompt=child_prompt(goal, context),
                                  max_iterations=dctx.max_iterations, summary_budget=budget))
    return DelegationRequest(children=tuple(children))


def _outcome_text(outcome: ChildOutcome) -> str:
    if outcome.status == "completed":
        return outcome.summary.strip() or "(the child ended without a summary)"
    why = outcome.error.strip() or outcome.status
    partial = f"\nIts last reply:\n{outcome.summary.strip()}" if outcome.summary.strip() else ""
    return f"(the child did not finish: {why}){partial}"


def delegate_result(outcomes: Sequence[ChildOutcome], *, ctx: ToolContext,
                    call_id: str) -> str:
    """The delegate call's tool result: one section per child (goal, status, iterations,
    its self-reported summary). A summary over its ``summary_budget`` tokens is written to
    ``ctx.spill_dir`` through the Workspace and replaced by a spill block whose preview
    fits the budget (a failed write truncates inline with a note; spill.py)."""
    total = len(outcomes)
    sections = [f"{plural(total, 'child agent')} ended. Summaries are the children's own "
                "reports, not verified facts."]
    for outcome in outcomes:
        body = _outcome_text(outcome)
        if estimate_text_tokens(body) > outcome.summary_budget:
            chars = outcome.summary_budget * CHARS_PER_TOKEN
            limits = SpillLimits(per_result=chars, preview=max(200, chars - 600))
            spilled = spill_message(Message(role="tool", content=body,
                                            tool_call_id=f"{call_id}-child{outcome.index}"),
                                    ctx, limits)
            body = spilled.wire_text
        sections.append(f"\n## Child {outcome.index}/{total}: {outcome.goal[:200]}\n"
                        f"status: {outcome.status} · iterations: {outcome.iterations}\n"
                        f"{body}")
    return "\n".join(sections)


@dataclass(frozen=True, slots=True)
class DelegateTool(NoPathArguments):
    """The delegate tool. Needs ``ctx.extras["delegation"]`` (a DelegationContext); without
    it the call fails with a clear error (delegation not available here). ``run`` never
    returns normally for a valid call: it raises DelegationRequested."""

    spec: ToolSpec = field(default_factory=lambda: ToolSpec(
        name=DELEGATE_TOOL, description=DESCRIPTION, input_schema=SCHEMA))
    read_only: bool = False

    effect = "delegation"  # child agents, each gated in its own session
    interactive: bool = False

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []  # no path scope and not read-only: the scheduler runs it alone

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        dctx = ctx.extras.get("delegation")
        if not isinstance(dctx, DelegationContext):
            raise ToolError("delegation is not available in this session")
        raise DelegationRequested(plan_delegation(args, dctx))
