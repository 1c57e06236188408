"""Per-session tool wiring: the registry a session's tools come from and the tool context
of a turn. Each other word has its own module (issue 11 item 3), re-exported here for the
callers that name them through ``toolbox``: sessions/backends.py (where commands run),
sessions/gate.py (the policy gate), sessions/skills.py (skills and skill turns),
sessions/cache_health.py (prompt-cache health).

The Django-side facts a tool needs (workspace, backend, skills dir) are fetched here and
handed to agents/ as plain values; agents/ never reaches back.
"""

from __future__ import annotations

from functools import lru_cache
from types import MappingProxyType

from agents.policy_context import GateState
from agents.tools import ToolContext
from agents.tools.registry import ToolRegistry, builtin_tools
from sessions.backends import (backend_for, backend_kind, backend_status,  # noqa: F401
                               confinement, protected_paths)
from sessions.cache_health import cache_health_fields  # noqa: F401
from sessions import gate
from sessions.gate import (UNASKED_RULES, app_config_paths, policy_context_for,  # noqa: F401
                           private_paths)
from sessions.models import Session
from sessions.search import session_search_for_tool
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


def policy_gate(ctx, state: GateState):
    """gate(call) -> Decision for a turn (``ctx``: the runner's TurnContext): sessions/gate.py
    's gate, which calls agents.policy.decide, over this session's registry."""
    return gate.policy_gate(ctx, state, registry_for(ctx.session))


def tool_context(ctx, *, should_stop=None) -> ToolContext:
    """The ToolContext of one turn (``ctx``: sessions.runner.TurnContext). ``should_stop``:
    the turn's stop flag, polled by long-running tools (the terminal kills its command)."""
    session = ctx.session
    return ToolContext(
        workspace=ctx.workspace, session_id=str(session.pk), user_id=str(session.owner_id),
        backend=backend_for(ctx.workspace), context_window=ctx.profile.context_window,
        extras=MappingProxyType({
            "skills_dir": deployment_skills_dir(),
            "should_stop": should_stop,
            "session_search": lambda query: session_search_for_tool(session=session,
                                                                    query=query),
        }))
