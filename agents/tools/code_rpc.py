"""The handler behind execute_code's RPC: one tool call from inside a script, through the
same three steps as a model's call (validate against the registry, the one policy gate,
run the tool on the turn's ToolContext and so its Workspace). No Django."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable

from agents.messages import ToolCall
from agents.policy.context import Decision
from agents.tools import CURRENT_CALL_ID, ToolContext, ToolOutput
from agents.tools.dispatch import execute_call, validate_call
from agents.tools.execute_code import RPC_TOOLS
from agents.tools.registry import ToolRegistry


def code_rpc_handler(*, registry: ToolRegistry, gate: Callable[[ToolCall], Decision],
                     ctx: ToolContext, allowed: Iterable[str] = RPC_TOOLS
                     ) -> Callable[[str, dict], ToolOutput]:
    """handler(name, args) -> ToolOutput for execute_code's RPC. ``name`` must be in
    ``allowed`` and in ``registry`` (the session's tools); the call gets an id derived from
    the execute_code call's (``<id>.rpc<n>``) so the policy and the audit see one call each.
    An "ask" is refused (no human can approve inside a running script), a "deny" gives
    its reason; never raises for bad input."""
    permitted = frozenset(allowed) & frozenset(registry.names())
    counter = itertools.count(1)

    def handle(name: str, args: dict) -> ToolOutput:
        if name not in permitted:
            return ToolOutput(text=f"{name!r} cannot be called from execute_code (allowed: "
                                   f"{', '.join(sorted(permitted))})", is_error=True)
        parent = CURRENT_CALL_ID.get() or "execute_code"
        call = ToolCall(id=f"{parent}.rpc{next(counter)}", name=name,
                        arguments=json.dumps(args))
        prepared = validate_call(call, registry)
        if prepared.error is not None or prepared.tool is None:
            return ToolOutput(text=prepared.error or "invalid call", is_error=True)
        decision = gate(prepared.call)
        if decision.verdict == "deny":
            return ToolOutput(text=f"not executed: {decision.reason}", is_error=True)
        if decision.verdict != "allow":
            return ToolOutput(text=f"not executed: this call needs a person's approval "
                                   f"({decision.reason}); make it as a direct tool call",
                              is_error=True)
        return execute_call(prepared.tool, prepared.args, ctx)

    return handle
