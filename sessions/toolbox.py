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
from pathlib import Path
from types import MappingProxyType

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.policy.context import GateState
from agents.tools import ToolContext
from agents.tools.code_rpc import code_rpc_handler
from agents.availability import AvailabilityCache
from agents.prompt import build_stable_tier
from agents.tools.registry import ToolRegistry, builtin_tools
from sessions.backends import (backend_for, backend_kind, backend_status,  # noqa: F401
                               confinement, protected_paths)
from sessions.cache_health import cache_health_fields  # noqa: F401
from sessions import gate, mcp
from sessions.delegation import delegation_context
from sessions.gate import (UNASKED_RULES, app_config_paths, policy_context_for,  # noqa: F401
                           private_paths, turn_unattended)
from sessions.events import event_append
from sessions.models import Session, SessionToolSchema, Turn
from sessions.search import session_search_for_tool
from sessions.tool_state import memory_change, memory_snapshot_for, todo_change
from sessions.services import provider_default
from sessions.skills import (deployment_skills_dir, skills_for, skills_index_for,  # noqa: F401
                             user_message_for)
from sessions.waits import WAITING_STATUSES


@lru_cache(maxsize=1)
def _full_registry() -> ToolRegistry:
    """Every tool a session may be given: the built-ins (agents/tools/registry.py)."""
    return ToolRegistry(builtin_tools())


AVAILABILITY = AvailabilityCache()
"""The process's availability cache (agents/availability.py: a success trusted for 30 s, a
failure within 60 s of the last success ignored)."""


def registry_for(session: Session) -> ToolRegistry:
    """The tools this session may call: its pinned snapshot (all built-ins for a new one)
    plus the MCP tools of its stored snapshot, with their stored schemas (the bytes the
    model was offered), calling through this worker's connections."""
    registry = _full_registry()
    base = registry.subset(session.tool_names) if session.tool_names else registry
    specs = _stored_mcp_specs(session)
    if not specs:
        return base
    wanted = set(session.tool_names or ())
    extra = mcp.tools_from_snapshot({n: s for n, s in specs.items() if n in wanted},
                                    mcp.team_servers(session.team_id))
    return ToolRegistry([*(base.get(n) for n in base.names()), *extra])


def tool_names_for(session: Session) -> tuple[str, ...]:
    """The tools a rebuild would offer ``session`` now: every built-in whose availability
    predicate (a tool's optional ``availability`` attribute) holds, plus the exposed tools
    of the team's connected MCP servers. Sorted."""
    names, _ = _offered(session, mcp.team_servers(session.team_id))
    return names


def _offered(session: Session, rows) -> tuple[tuple[str, ...], dict[str, dict]]:
    registry = _full_registry()
    builtins = [name for name in registry.names()
                if (probe := getattr(registry.get(name), "availability", None)) is None
                or AVAILABILITY.check(f"tool:{name}", probe)]
    specs = mcp.offered_specs(rows, AVAILABILITY)
    return tuple(sorted({*builtins, *specs})), specs


_SPECS_READ = "_hermes_mcp_specs_read"
"""Instance key under which tool_schema_refresh leaves the specs it read, for the one
registry_for call of the same turn (taken, so never reused by a later turn)."""


def _stored_mcp_specs(session: Session) -> dict[str, dict]:
    read = session.__dict__.pop(_SPECS_READ, None)
    if read is not None:
        return read
    schema = SessionToolSchema.objects.filter(session_id=session.pk).first()
    if schema is None and session.parent_id:
        # A delegated child is created with its parent's names minus the blocklist and no
        # snapshot row of its own: its MCP schemas are the parent's (it never gains one).
        schema = SessionToolSchema.objects.filter(session_id=session.parent_id).first()
    return dict(schema.mcp_specs or {}) if schema is not None else {}


def _turn_in_flight(session: Session) -> bool:
    return Turn.objects.filter(session=session, status__in=[Turn.Status.RUNNING,
                                                            *WAITING_STATUSES]).exists()


def tool_schema_rebuild(session: Session, *, reason: str,
                        between_turns: bool = False) -> dict | None:
    """THE one function that changes a session's tool schema snapshot (seed, "The tool
    schema is built once": one named rebuild with every caller funnelled into it).

    Callers: the turn start (``tool_schema_refresh``: a new session, availability changed,
    an MCP server connected late or reconnected with other tools, a pending request) and
    the Django admin action. Never mid-turn: unless ``between_turns`` (the caller is the
    turn start, before the first request), a session with a turn running or waiting gets
    the request recorded as ``pending`` and rebuilt before its next turn; returns None.

    Otherwise stores the tools offered now (``tool_names_for``) as Session.tool_names and
    the MCP specs in SessionToolSchema, clears the stored system prompt (rebuilt from the
    new names by the runner; its tool guidance depends on them), appends a "tools.rebuilt"
    event, all in one transaction. Returns the event payload {reason, added, removed,
    tool_names}."""
    if not between_turns and _turn_in_flight(session):
        SessionToolSchema.objects.update_or_create(session=session,
                                                   defaults={"pending": reason[:100]})
        return None
    return _rebuild(session, reason, mcp.mcp_sync(session.team_id))


def _rebuild(session: Session, reason: str, rows) -> dict:
    names, specs = _offered(session, rows)
    old = set(session.tool_names or ())
    payload = {"reason": reason[:100], "added": sorted(set(names) - old),
               "removed": sorted(old - set(names)), "tool_names": list(names)}
    with transaction.atomic():
        Session.objects.filter(pk=session.pk).update(tool_names=list(names), system_prompt="")
        SessionToolSchema.objects.get_or_create(session=session)
        SessionToolSchema.objects.filter(session=session).update(
            mcp_specs=specs, reason=reason[:100], pending="", rebuilt_at=timezone.now(),
            rebuilds=F("rebuilds") + 1)
        event_append(session_id=session.pk, type="tools.rebuilt", payload=payload)
    session.tool_names, session.system_prompt = list(names), ""
    return payload


def tool_schema_refresh(session: Session) -> dict | None:
    """Between turns (the runner calls it before a new turn's first request): rebuild
    when the session has no snapshot yet, a rebuild is pending, or what would be offered
    now differs from the snapshot (names or MCP schemas). A delegated child keeps the
    toolset it was created with (it never gains a tool its parent lacks). Returns the
    rebuild's payload, or None when nothing changed."""
    if session.parent_id and session.tool_names:
        return None
    schema = SessionToolSchema.objects.filter(session_id=session.pk).first()
    rows = mcp.mcp_sync(session.team_id)
    if not session.tool_names:
        return _rebuild(session, "new session", rows)
    if schema is not None and schema.pending:
        return _rebuild(session, schema.pending, rows)
    names, specs = _offered(session, rows)
    stored = dict(schema.mcp_specs or {}) if schema is not None else {}
    if sorted(names) != sorted(session.tool_names) or specs != stored:
        return _rebuild(session, "availability", rows)
    # Unchanged: the turn's registry (registry_for, next) takes the specs read here once
    # instead of reading the same row again.
    session.__dict__[_SPECS_READ] = stored
    return None


def toolset_tokens(session: Session | None = None, *, team_id: int | None = None) -> dict:
    """The floor every request carries, in estimated tokens (agents/context/tokens.py): the system
    prompt and the tool schemas, per toolset. For ``session``: its stored prompt and
    snapshot; otherwise a new session's on ``team_id``: the stable prompt tier (the rest is
    per session) and the built-ins plus every enabled MCP server's listed, exposed tools. Returns {"system": int, "toolsets": [{"name",
    "tools", "tokens"}], "tools": int, "total": int}; see agents/floor.py."""
    from agents.floor import floor_tokens

    if session is not None:
        specs = registry_for(session).specs(session.tool_names or None)
        system = session.system_prompt or ""
    else:
        rows = mcp.team_servers(team_id)
        extra = mcp.tools_from_snapshot(
            {n: s for n, s in mcp.offered_specs(rows, _ALWAYS).items()}, rows)
        registry = ToolRegistry([*(_full_registry().get(n) for n in _full_registry().names()),
                                 *extra])
        specs = registry.specs()
        provider, model = provider_default()
        system = build_stable_tier(home=Path(settings.HERMES["HOME"]),
                                   tool_names=registry.names(), model=model, provider=provider)
    return floor_tokens(system=system, tools=specs)


class _Always:
    """An availability cache that says yes: the floor a team's servers WOULD add."""

    @staticmethod
    def check(key, probe) -> bool:
        return True


_ALWAYS = _Always()


def memory_for(session: Session) -> str:
    """The memory snapshot for the volatile tier of ``session``'s prompt: its owner's notes,
    read when the prompt is built (a write later in the session never moves the prefix)."""
    return memory_snapshot_for(user_id=session.owner_id)


def policy_gate(ctx, state: GateState, *, registry: ToolRegistry | None = None):
    """gate(call) -> Decision for a turn (``ctx``: the runner's TurnContext): sessions/gate.py
    's gate, which calls agents.policy.decide, over this session's registry (``registry``:
    the caller's, already loaded; else the turn's ``ctx.registry``)."""
    return gate.policy_gate(ctx, state, registry if registry is not None else ctx.registry)


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
            "clarify_answers": MappingProxyType(ctx.clarify_answers),
            "code_output_cap": settings.HERMES.get("CODE_OUTPUT_CAP", 50_000),
        }))


def with_code_rpc(tool_ctx: ToolContext, *, registry: ToolRegistry, gate) -> ToolContext:
    """``tool_ctx`` with execute_code's RPC handler: a script's tool calls are validated
    against ``registry``, decided by ``gate`` (policy_gate's) and run on this context."""
    extras = dict(tool_ctx.extras)
    with_rpc = replace(tool_ctx, extras=MappingProxyType(extras))
    extras["code_rpc"] = code_rpc_handler(registry=registry, gate=gate, ctx=with_rpc)
    return with_rpc
