"""Per-session tool wiring: the registry a session's tools come from and the tool context
of a turn. Each other word has its own module (issue 11 item 3), re-exported here for the
callers that name them through ``toolbox``: sessions/backends.py (where commands run),
sessions/gate.py (the policy gate), sessions/skills.py (skills and skill turns),
sessions/cache_health.py (prompt-cache health).

The Django-side facts a tool needs (workspace, backend, skills dir) are fetched here and
handed to agents/ as plain values; agents/ never reaches back.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from types import MappingProxyType

from django.conf import settings

from agents.policy_context import GateState
from agents.tools import ToolContext
from agents.tools.code_rpc import code_rpc_handler
from agents.tools.registry import ToolRegistry, builtin_tools
from sessions.backends import (backend_for, backend_kind, backend_status,  # noqa: F401
                               confinement, protected_paths)
from sessions.cache_health import cache_health_fields  # noqa: F401
from sessions import gate
from sessions.clarify import clarify_answers
from sessions.delegation import delegation_context
from sessions.gate import (UNASKED_RULES, app_config_paths, policy_context_for,  # noqa: F401
                           private_paths, turn_unattended)
from sessions.models import Session
from sessions.search import session_search_for_tool
from sessions.tool_state import memory_change, memory_snapshot_for, todo_change
from sessions.skills import (deployment_skills_dir, skills_for, skills_index_for,  # noqa: F401
                             user_message_for)


@lru_cache(maxsize=1)
def _full_registry() -> ToolRegistry:
    """Every tool a session may be given: the built-ins (agents/tools/registry.py)."""
    return ToolRegistry(builtin_tools())


def registry_for(session: Session) -> ToolRegistry:
    """The tools this session may call: its pinned snapshot (all built-ins for a new one)."""
    registry = _full_registry()
    return registry.subset(session.tool_names) if session.tool_names else registry


def tool_names_for(session: Session) -> tuple[str, ...]:
    """The schema snapshot for a new session (pinned once; seed "built once")."""
    return _full_registry().names()


def memory_for(session: Session) -> str:
    """The memory snapshot for the volatile tier of ``session``'s prompt: its owner's notes,
    read when the prompt is built (a write later in the session never moves the prefix)."""
    return memory_snapshot_for(user_id=session.owner_id)


def policy_gate(ctx, state: GateState):
    """gate(call) -> Decision for a turn (``ctx``: the runner's TurnContext): sessions/gate.py
    's gate, which calls agents.policy.decide, over this session's registry."""
    return gate.policy_gate(ctx, state, registry_for(ctx.session))


def tool_context(ctx, *, should_stop=None) -> ToolContext:
    """The ToolContext of one turn (``ctx``: sessions.runner.TurnContext). ``should_stop``:
    the turn's stop flag, polled by long-running tools (the terminal kills its command)."""
    session = ctx.session
    owner_id = session.owner_id
    return ToolContext(
        workspace=ctx.workspace, session_id=str(session.pk), user_id=str(session.owner_id),
        backend=backend_for(ctx.workspace), context_window=ctx.profile.context_window,
        extras=MappingProxyType({
            "skills_dir": deployment_skills_dir(),
            "should_stop": should_stop,
            "session_search": lambda query: session_search_for_tool(session=session,
                                                                    query=query),
            "delegation": delegation_context(ctx),
            "memory": lambda action, content, old_text: memory_change(
                user_id=owner_id, action=action, content=content, old_text=old_text),
            "is_child": session.parent_id is not None,
            "todo": lambda todos, merge: todo_change(session=session, todos=todos, merge=merge),
            "unattended": turn_unattended(session, ctx.turn),
            "clarify_answers": MappingProxyType(clarify_answers(turn=ctx.turn)),
            "code_output_cap": settings.HERMES.get("CODE_OUTPUT_CAP", 50_000),
        }))


def with_code_rpc(tool_ctx: ToolContext, *, registry: ToolRegistry, gate) -> ToolContext:
    """``tool_ctx`` with execute_code's RPC handler: a script's tool calls are validated
    against ``registry``, decided by ``gate`` (policy_gate's) and run on this context."""
    extras = dict(tool_ctx.extras)
    with_rpc = replace(tool_ctx, extras=MappingProxyType(extras))
    extras["code_rpc"] = code_rpc_handler(registry=registry, gate=gate, ctx=with_rpc)
    return with_rpc
