"""terminal: run a shell command in the session workspace through the session's backend.

The tool clamps the timeout and reports the exit code and a timed-out flag in the result.
It never cuts output itself: a large result is spilled to a file with a preview by the one
spill layer (agents/tools/spill.py), as every tool's is, so the model can page all of it
back (failure case B36: a 50,000-char cap here cut a 60,000-char output inline with no
file). The backend's capture bound (agents/backends/local.py, 2 MB) only guards memory. Process lifetime
and the environment belong to the backend (agents/backends/); whether the command may run
at all belongs to agents/policy/__init__.py. The terminal is never read-only and has no path scope,
so the scheduler always runs it as a barrier.
"""

from __future__ import annotations

from typing import Any

from agents.availability import binary_installed
from agents.errors import ToolError
from agents.messages import ToolSpec
from agents.tools import CURRENT_CALL_SANCTIONED, Access, PathScope, ToolContext, ToolOutput
from agents.tools.steering import run_guarded, steering_notice
from agents.tools.workspace import Workspace

DEFAULT_TIMEOUT = 60
MAX_TIMEOUT = 600
"""Seconds. Longer requests are clamped, and the result says so."""

class Terminal:
    """terminal {command, timeout=60 (max 600)} → output, then "[exit code N]" (and the
    timeout notice). A timed-out command is an error result; a non-zero exit is not (the
    model reads the code)."""

    spec = ToolSpec(
        name="terminal",
        description=(
            "Run a bash command in the workspace directory and return its combined "
            "stdout/stderr and exit code. Non-interactive (stdin is closed). Background jobs "
            "are stopped when the command ends. timeout is in seconds (default 60, max 600)."),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run."},
                "timeout": {"type": "integer", "minimum": 1,
                            "description": "Seconds before the command is killed."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    )
    read_only = False
    interactive = False
    availability = staticmethod(binary_installed("bash"))  # both backends run `bash -c`

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return []  # what a command touches is parsed by the policy (agents/policy/commands.py)

    def command(self, args: dict[str, Any]) -> str | None:
        command = args.get("command")
        return command if isinstance(command, str) else ""  # "" → the policy denies

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("'command' must be a non-empty string")
        if ctx.backend is None:
            raise ToolError("no command backend is configured for this session")
        requested = int(args.get("timeout", DEFAULT_TIMEOUT))
        timeout = max(1, min(requested, MAX_TIMEOUT))
        result, undone = run_guarded(
            Workspace(ctx.workspace), lambda: ctx.backend.run(
                command, cwd=ctx.workspace, timeout=timeout,
                should_stop=ctx.extras.get("should_stop")),
            sanctioned=CURRENT_CALL_SANCTIONED.get())
        lines = [result.output.rstrip("\n")] if result.output.strip() else [
            "(no output)"]
        if requested > MAX_TIMEOUT:
            lines.append(f"[timeout clamped to {MAX_TIMEOUT} s]")
        if result.timed_out:
            lines.append(f"[timed out after {timeout} s; the command and its children were "
                         "killed]")
        if result.interrupted:
            lines.append("[stopped by the user; the command and its children were killed]")
        lines.append(f"[exit code {result.exit_code}]")
        if undone:
            lines.append(steering_notice(undone))
        return ToolOutput(text="\n".join(lines), is_error=result.timed_out or result.interrupted,
                          metadata={"exit_code": result.exit_code,
                                    "timed_out": result.timed_out,
                                    **({"steering_undone": undone} if undone else {}),
                                    **({"stopped": True} if result.interrupted else {})})
