"""Tools: the vocabulary every tool shares (Tool, ToolContext, ToolOutput).

A tool is an object with a schema (``spec``), a ``run`` method, and three facts the
dispatcher's scheduler needs: is it read-only, is it interactive, which paths does a call
touch. The registry lives in agents/tools/registry.py, the scheduler in dispatch.py, large
output handling in spill.py, the built-in tools in files.py, search.py and terminal.py.
Whether a call may run at all is not decided here (agents/policy/__init__.py).
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agents.errors import ToolError
from agents.messages import ToolSpec

if TYPE_CHECKING:
    from agents.backends import Backend

Access = Literal["read", "write"]
PathScope = list[tuple[Path, Access]]

DEFAULT_CONTEXT_WINDOW = 200_000
"""Tokens assumed when the caller does not know the model's window (spill scaling)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput:
    """What a tool returns. ``text``: the tool result the model reads. ``is_error``: the call
    failed in a way the model should see. ``metadata``: facts for the UI and tests (for the
    terminal: ``exit_code``, ``timed_out``), never sent to the model."""

    text: str
    is_error: bool = False
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """Everything a tool may use besides its arguments, fixed for one turn.

    ``workspace``: the session's workspace directory (stored canonical: realpath).
    ``backend``: where terminal commands run. ``context_window``: the model's window in
    tokens (spill thresholds scale with it). ``spill_dir``: where oversized results are
    written; defaults to ``<workspace>/.hermes/spill`` and must lie inside the workspace so
    read_file can page it back. ``extras``: values later tools need (skills dir, search
    callables), keyed by the tool's own names.
    """

    workspace: Path
    session_id: str = ""
    user_id: str = ""
    backend: Backend | None = None
    context_window: int = DEFAULT_CONTEXT_WINDOW
    spill_dir: Path | None = None
    extras: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        workspace = Path(os.path.realpath(self.workspace))
        object.__setattr__(self, "workspace", workspace)
        if self.spill_dir is None:
            object.__setattr__(self, "spill_dir", workspace / ".hermes" / "spill")


CURRENT_CALL_ID: ContextVar[str] = ContextVar("hermes_current_call_id", default="")
"""The id of the tool call being run (set by the dispatcher around ``Tool.run``): a tool
whose answer was stored per call (clarify) finds it by id."""

CURRENT_CALL_SANCTIONED: ContextVar[bool] = ContextVar("hermes_current_call_sanctioned",
                                                       default=False)
"""True while a call runs whose policy decision allowed it knowing it writes an instruction
file (a human's approval of that card, an approved rule, bypass): the terminal and
execute_code tools then keep such changes instead of undoing them (agents/tools/steering.py).
Set by the dispatcher; False everywhere else (fail closed)."""


class Tool(Protocol):
    """One tool the model can call.

    ``read_only``: never changes anything (may join a concurrent run without paths).
    ``interactive``: needs a human mid-call (always a barrier). ``targets(args)``: the paths
    a call names, as given (lexical), each with its access, ``[]`` for none; raises
    ToolError when the arguments name no usable path. ``command(args)``: the shell command
    a call runs, else None. ``paths(args, ctx)``: the canonical paths a call reads or
    writes (``targets`` resolved in the workspace), ``[]`` when it has no path scope,
    ``None`` when the scope cannot be determined (the scheduler then treats the call as a
    barrier; seed, "Dispatch: not parallel, not serial, segmented"). The policy
    (agents/policy/__init__.py) judges what ``read_only``, ``targets`` and ``command`` declare, so a
    tool's path arguments are read in one place. ``run`` raises agents.errors.ToolError for
    failures the model should read. Optional ``availability``: a zero-argument
    predicate (agents/availability.py) deciding whether a rebuilt schema offers the tool;
    a tool without one is always offered.
    """

    spec: ToolSpec
    read_only: bool
    interactive: bool

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]: ...

    def command(self, args: dict[str, Any]) -> str | None: ...

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None: ...

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput: ...


class NoPathArguments:
    """For tools whose arguments name no path and no shell command (memory, todo, clarify,
    delegate, execute_code): they declare ``targets`` = [] and ``command`` = None, and the
    policy judges their ``effect`` instead."""

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return []

    def command(self, args: dict[str, Any]) -> str | None:
        return None


EFFECTS = ("files", "state", "delegation", "code")
"""The words a tool's ``effect`` may declare (agents/policy/__init__.py decide)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFacts:
    """What a tool declares about one call, for the policy (agents/policy/__init__.py decide).

    ``declared``: False for an unknown tool, or one that declares no ``targets``/``command``
    (the policy then asks). ``read_only``: Tool.read_only. ``targets``: Tool.targets(args),
    None when the arguments name no usable path (ToolError). ``command``: Tool.command(args).
    ``effect``: Tool.effect, what the tool does besides paths and commands: "files" (the
    default: judged by targets/command), "state" (notes, a task list, a question to the
    user), "delegation" (child agents), "code" (Python through the command backend).
    """

    declared: bool
    effect: str = "files"
    read_only: bool = False
    targets: tuple[tuple[str, Access], ...] | None = ()
    command: str | None = None


def tool_facts(tool: Tool | None, args: dict[str, Any]) -> ToolFacts:
    """The ToolFacts of a call of ``tool`` (None: not registered) with ``args``."""
    # A tool written before targets/command were declared says nothing the policy can
    # judge: undeclared, so it asks (fail closed) instead of being guessed at by name.
    targets_of, command_of = (getattr(tool, "targets", None), getattr(tool, "command", None))
    effect = getattr(tool, "effect", "files")
    if effect not in EFFECTS:
        effect = "files"  # an unknown word is judged as files: never a looser path
    if tool is None or targets_of is None or command_of is None:
        return ToolFacts(declared=False, effect=effect)
    try:
        targets: tuple[tuple[str, Access], ...] | None = tuple(targets_of(args))
    except ToolError:
        targets = None
    if targets is not None and not all(isinstance(p, str) and p.strip() and "\0" not in p
                                       for p, _ in targets):
        targets = None
    return ToolFacts(declared=True, effect=effect, read_only=bool(tool.read_only),
                     targets=targets, command=command_of(args))


__all__ = ["CURRENT_CALL_ID", "CURRENT_CALL_SANCTIONED", "Access", "NoPathArguments", "PathScope", "Tool", "ToolContext", "ToolFacts", "ToolOutput",
           "DEFAULT_CONTEXT_WINDOW", "tool_facts"]
