"""Per-session tool wiring: the registry, the tool context, the policy gate, skills.

The Django-side facts a tool or the policy needs (workspace, backend, skills dirs, approval
state) are fetched here and handed to agents/ as plain values; agents/ never reaches back.
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

from agents.backends import Backend
from agents.backends.confine import landlock_abi
from agents.backends.local import LocalBackend
from agents.backends.sandbox import DEFAULT_HIDE, SandboxBackend, sandbox_available
from agents.command_rules import DESTRUCTIVE_CLASSES
from agents.identity import current_identity
from agents.messages import Message as AgentMessage
from agents.messages import ToolCall
from agents.prompt import build_stable_tier
from agents.policy import Decision, PolicyContext, bypass_frozen, decide
from agents.tools import ToolContext
from agents.tools.delegate import DelegateTool
from agents.tools.registry import ToolRegistry, default_registry
from agents.availability import AvailabilityCache
from agents.tools.skills import (SkillsListTool, SkillViewTool, build_skill_invocation,
                                 load_skills, parse_skill_command, skill_dirs, skill_scaffold,
                                 skills_index)
from approvals.models import AuditEntry
from sessions import mcp
from sessions.delegation import delegation_context
from sessions.events import event_append
from sessions.inputs import turn_input_built
from sessions.models import Session, SessionToolSchema, Turn
from sessions.services import provider_default
from sessions.waits import WAITING_STATUSES


@lru_cache(maxsize=1)
def _full_registry() -> ToolRegistry:
    registry = default_registry()
    registry.register(SkillsListTool())
    registry.register(SkillViewTool())
    from agents.tools.recall import SessionSearchTool

    registry.register(SessionSearchTool())
    registry.register(DelegateTool())
    return registry


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


def _stored_mcp_specs(session: Session) -> dict[str, dict]:
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
    return None


def toolset_tokens(session: Session | None = None, *, team_id: int | None = None) -> dict:
    """The floor every request carries, in estimated tokens (agents/tokens.py): the system
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


def deployment_skills_dir() -> Path:
    """The deployment-wide skills directory: <HERMES_HOME>/skills."""
    return Path(settings.HERMES["HOME"]) / "skills"


def skills_for(workspace: Path):
    """Skills visible to a session: the deployment's, overridden by the workspace's."""
    return load_skills(skill_dirs(deployment_dir=deployment_skills_dir(), workspace=workspace))


def skills_index_for(session: Session, workspace: Path) -> str:
    """The skills index for the volatile prompt tier (deterministic text)."""
    return skills_index(skills_for(workspace))


def backend_kind() -> str:
    """The command backend in force: HERMES_BACKEND=local|sandbox, or auto (the sandbox when
    bubblewrap works on this host, else local). Raises RuntimeError when the sandbox is
    demanded but does not work (fail closed rather than silently run on the host). The one
    selector: the tools, the policy and the Settings page all ask this."""
    return _backend_kind(settings.HERMES["BACKEND"])


@lru_cache(maxsize=4)
def _backend_kind(choice: str) -> str:
    if choice in ("sandbox", "auto"):
        if sandbox_available():
            return "sandbox"
        if choice == "sandbox":
            raise RuntimeError("HERMES_BACKEND=sandbox but bubblewrap does not work here")
    return "local"


backend_kind.cache_clear = _backend_kind.cache_clear  # type: ignore[attr-defined]


def protected_paths() -> tuple[str, ...]:
    """Host paths no command may read: the data dir (database, secret key, passwords), the
    app's code, every workspace but the session's own, the deployment home."""
    paths = (settings.DATA_DIR, settings.BASE_DIR, settings.HERMES["WORKSPACE_ROOT"],
             settings.HERMES["HOME"])
    return tuple(dict.fromkeys(str(Path(p).resolve()) for p in paths))


def backend_for(workspace: Path) -> Backend:
    """A backend whose only writable host directory is ``workspace``. The sandbox also hides
    every other workspace and the application directory (its code and secrets); the local
    backend confines with Landlock where the kernel has it (HERMES_LOCAL_CONFINEMENT)."""
    if backend_kind() == "sandbox":
        uid = settings.HERMES.get("SANDBOX_UID", 61000)
        return SandboxBackend(workspace, hide=tuple(dict.fromkeys((*DEFAULT_HIDE,
                                                                    *protected_paths()))),
                              host_uid=uid, host_gid=uid)
    return LocalBackend(workspace=workspace, protected=protected_paths(),
                        confine=settings.HERMES.get("LOCAL_CONFINEMENT", "auto"))


def confinement() -> dict[str, str]:
    """What stands between a command and the host, for the Settings page: ``kind``
    ("sandbox", "landlock" or "policy"), a short ``label`` and a ``detail`` sentence."""
    if backend_kind() == "sandbox":
        return {"kind": "sandbox", "label": "sandbox (bubblewrap)",
                "detail": "each command runs in bubblewrap as an unprivileged user: only its "
                          "workspace is writable, system directories are read-only, nothing "
                          "else of the host is visible, no network"}
    choice = settings.HERMES.get("LOCAL_CONFINEMENT", "auto")
    abi = landlock_abi()
    if choice != "none" and abi > 0:
        return {"kind": "landlock", "label": f"local + Landlock (ABI {abi})",
                "detail": "commands run on the server host confined by Landlock: writes only "
                          "to the session workspace and a private tmp, reads only system "
                          "directories and the workspace (not the app's data, code or other "
                          "workspaces); the network is not confined; risky commands ask"}
    return {"kind": "policy", "label": "local, policy only",
            "detail": "commands run on the server host with no OS confinement (Landlock is "
                      "unavailable or off): only the approval policy stands in the way"}


def tool_context(ctx, *, should_stop=None) -> ToolContext:
    """The ToolContext of one turn (``ctx``: sessions.runner.TurnContext). ``should_stop``:
    the turn's stop flag, polled by long-running tools (the terminal kills its command)."""
    from sessions.search import session_search_for_tool

    session = ctx.session
    return ToolContext(
        workspace=ctx.workspace, session_id=str(session.pk), user_id=str(session.owner_id),
        backend=backend_for(ctx.workspace), context_window=ctx.profile.context_window,
        extras=MappingProxyType({
            "skills_dir": deployment_skills_dir(),
            "should_stop": should_stop,
            "session_search": lambda query: session_search_for_tool(session=session,
                                                                    query=query),
            "delegation": delegation_context(ctx),
        }))


def policy_context_for(*, user, session: Session | None, state=None,
                       workspace: Path | None = None, unattended: bool = False
                       ) -> PolicyContext:
    """The PolicyContext for ``user`` acting in ``session`` (None: a check outside any
    session, as the `hermes policy` CLI does), fed the approval state of the current turn
    when given. ``unattended``: the turn has no human to ask (Turn.unattended: a schedule,
    a webhook, or a child of such a turn); a child of a person's turn asks its owner like
    any turn (issue 12: a child's approvals reach the same owner and team admins). The one
    place a PolicyContext is built."""
    isolated = backend_kind() == "sandbox"
    team_deny: tuple[str, ...] = ()
    admin_only: tuple[str, ...] = ()
    if session is not None and session.team_id:
        team_deny = tuple(session.team.deny_rules or ())
        admin_only = tuple(c for c in (session.team.admin_only_risk_classes or ())
                           if isinstance(c, str))
    return PolicyContext(
        session_id=str(session.pk) if session is not None else "cli",
        user_id=str(user.pk) if user is not None else None,
        workspace=str(workspace or (Path(settings.HERMES["WORKSPACE_ROOT"]) /
                                    (str(session.pk) if session is not None else "cli"))),
        backend_isolated=isolated, backend_has_host_paths=False,
        deny_rules=tuple(state.deny_rules) if state is not None else team_deny,
        approved_call_ids=({i: "approved" for i in state.approved_call_ids}
                           if state is not None else {}),
        denied_call_ids=dict(state.denied_call_ids) if state is not None else {},
        bypass=bypass_frozen() or bool(state is not None and state.bypass),
        unattended=unattended,
        app_config_paths=tuple(str(p) for p in app_config_paths()),
        private_paths=tuple(str(p) for p in private_paths()),
        admin_only_risk_classes=admin_only,
        tool_policies=(mcp.tool_policies(mcp.team_servers(session.team_id),
                                         session.tool_names or ())
                       if session is not None else {}))


def policy_gate(ctx, state):
    """gate(call) -> Decision: the one policy function, fed this turn's approval state."""
    policy_ctx = policy_context_for(user=ctx.session.owner, session=ctx.session, state=state,
                                    workspace=ctx.workspace, unattended=ctx.turn.unattended)

    def gate(call: ToolCall) -> Decision:
        # Rules are per tool: an "always" grant for one tool never covers another.
        call_ctx = replace(policy_ctx, always_rules=state.patterns_for(call.name),
                           session_rules=state.patterns_for(call.name, scope="session"),
                           # a schedule or webhook turn: no human can answer an "ask"
                           unattended=policy_ctx.unattended or ctx.turn.unattended)
        if current_identity() is None:
            # Called where the acting identity did not travel (a bare thread): the ids read
            # from the row must not stand in for it; decide() denies without identity.
            call_ctx = replace(call_ctx, session_id=None, user_id=None)
        decision = decide(call, call_ctx)
        if decision.rule == "always_rule":
            _count_rule_hit(call, call_ctx, state)
        _audit_unasked(ctx.session, call, decision)
        return decision

    return gate


UNASKED_RULES = frozenset({"bypass", "always_rule", "session_rule", "isolated_backend"})


def _audit_unasked(session: Session, call: ToolCall, decision: Decision) -> None:
    """A destructive class let through with no human on this call (bypass, a rule, the
    sandbox) gets an AuditEntry "command.unasked" (failure case B32: a recursive delete
    ran unasked with no trace)."""
    if decision.verdict != "allow" or decision.rule not in UNASKED_RULES:
        return
    classes = [c for c in decision.risk_classes if c in DESTRUCTIVE_CLASSES]
    if not classes:
        return
    AuditEntry.objects.create(actor=None, action="command.unasked", session=session,
                              detail={"tool_call_id": call.id, "tool_name": call.name,
                                      "rule": decision.rule, "risk_classes": classes,
                                      "command": decision.normalized[:2000]})


def _count_rule_hit(call: ToolCall, ctx: PolicyContext, state) -> None:
    """Credit the "always" rule that allowed ``call`` (admins see hit counts)."""
    from approvals.services import rule_hit

    for pattern in ctx.always_rules:
        if decide(call, replace(ctx, always_rules=(pattern,))).rule == "always_rule":
            rule_id = state.always_rule_ids.get((call.name, pattern))
            if rule_id is not None:
                rule_hit(rule_id)
            return


def app_config_paths() -> tuple[Path, ...]:
    """The application's own settings, environment files, secret key and database: denied
    to every tool and command, by any spelling (resolved, symlinks included: B32/B33)."""
    base = Path(settings.BASE_DIR)
    paths = [base / "hermes_web" / "settings.py", base / ".env", base / ".ci",
             settings.DATA_DIR / "secret_key", Path(settings.HERMES["HOME"]) / "config.yaml",
             settings.DATA_DIR / "hermes.sqlite3"]
    db = settings.DATABASES["default"]
    if "sqlite" in db.get("ENGINE", "") and str(db.get("NAME", "")).startswith("/"):
        paths.append(Path(db["NAME"]))
    return tuple(dict.fromkeys(paths))


def private_paths() -> tuple[Path, ...]:
    """Where a host command may not read without asking nor write at all (the session's
    own workspace excepted): the app's code, its data directory, every workspace, HERMES
    home (issue 8 finding 2)."""
    return tuple(dict.fromkeys((Path(settings.BASE_DIR), settings.DATA_DIR,
                                Path(settings.HERMES["WORKSPACE_ROOT"]),
                                Path(settings.HERMES["HOME"]))))


def user_message_for(session: Session, turn: Turn, workspace: Path) -> AgentMessage:
    """The user message a queued turn becomes. ``/skill-name args`` expands to the skill's
    scaffold plus the arguments (the builder registers the scaffold as a stable prefix), kept
    as sent_content so replay is byte-exact while the chat shows what the user typed."""
    built = turn_input_built(turn)
    if built is not None:
        return built
    text = turn.input_text
    if turn.kind == "skill":
        parsed = parse_skill_command(text, skills_for(workspace))
        if parsed is not None:
            skill, args = parsed
            return AgentMessage(role="user", content=text,
                                sent_content=build_skill_invocation(skill, args),
                                stable_prefix_len=len(skill_scaffold(skill)))
    return AgentMessage(role="user", content=text)


def cache_health_fields(ctx, usage) -> dict:
    """Feed one call's usage to the cache-health tracker (agents/cache.py); three calls in a
    row that write the cache and read nothing raise a warning event and the admin flag.
    Returns the Session columns to write (the caller writes them with its own UPDATE)."""
    from agents.cache import CacheHealth
    from sessions.events import event_append

    session = ctx.session
    health = CacheHealth.from_dict(session.cache_health or {})
    warning = health.observe(usage, caching=ctx.profile.supports_caching)
    session.cache_health = health.to_dict()
    updates = {"cache_health": session.cache_health}
    if warning:
        updates["cache_warning"] = True
        event_append(session_id=session.pk, type="cache.warning",
                     payload={"turn_id": ctx.turn.pk, "reason": warning})
    return updates
