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

from agents.backends import Backend
from agents.backends.confine import landlock_abi
from agents.backends.local import LocalBackend
from agents.backends.sandbox import DEFAULT_HIDE, SandboxBackend, sandbox_available
from agents.command_rules import DESTRUCTIVE_CLASSES
from agents.identity import current_identity
from agents.messages import Message as AgentMessage
from agents.messages import ToolCall
from agents.policy import Decision, PolicyContext, bypass_frozen, decide
from agents.tools import ToolContext
from agents.tools.clarify import ClarifyTool, clarify_gate
from agents.tools.code_rpc import code_rpc_handler
from agents.tools.delegate import DelegateTool
from agents.tools.execute_code import ExecuteCode
from agents.tools.notes import MemoryTool, TodoTool
from agents.tools.registry import ToolRegistry, default_registry
from agents.tools.skills import (SkillsListTool, SkillViewTool, build_skill_invocation,
                                 load_skills, parse_skill_command, skill_dirs, skill_scaffold,
                                 skills_index)
from approvals.models import AuditEntry
from sessions.clarify import clarify_answers
from sessions.delegation import delegation_context
from sessions.inputs import turn_input_built
from sessions.models import Session, Turn
from sessions.tool_state import memory_change, memory_snapshot_for, todo_change


@lru_cache(maxsize=1)
def _full_registry() -> ToolRegistry:
    registry = default_registry()
    registry.register(SkillsListTool())
    registry.register(SkillViewTool())
    from agents.tools.recall import SessionSearchTool

    registry.register(SessionSearchTool())
    registry.register(DelegateTool())
    # Issue 13: durable memory, the todo list, clarify questions, code execution.
    for tool in (MemoryTool(), TodoTool(), ClarifyTool(), ExecuteCode()):
        registry.register(tool)
    return registry


def registry_for(session: Session) -> ToolRegistry:
    """The tools this session may call: its pinned snapshot (all built-ins for a new one)."""
    registry = _full_registry()
    return registry.subset(session.tool_names) if session.tool_names else registry


def tool_names_for(session: Session) -> tuple[str, ...]:
    """The schema snapshot for a new session (pinned once; seed "built once")."""
    return _full_registry().names()


def deployment_skills_dir() -> Path:
    """The deployment-wide skills directory: <HERMES_HOME>/skills."""
    return Path(settings.HERMES["HOME"]) / "skills"


def skills_for(workspace: Path):
    """Skills visible to a session: the deployment's, overridden by the workspace's."""
    return load_skills(skill_dirs(deployment_dir=deployment_skills_dir(), workspace=workspace))


def memory_for(session: Session) -> str:
    """The memory snapshot for the volatile tier of ``session``'s prompt: its owner's notes,
    read when the prompt is built (a write later in the session never moves the prefix)."""
    return memory_snapshot_for(user_id=session.owner_id)


def turn_unattended(session: Session, turn: Turn) -> bool:
    """Nobody can answer a question in this turn: a schedule, a webhook, a child agent."""
    return bool(turn.unattended or session.parent_id is not None)


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
        admin_only_risk_classes=admin_only)


def policy_gate(ctx, state):
    """gate(call) -> Decision: the one policy function, fed this turn's approval state."""
    policy_ctx = policy_context_for(user=ctx.session.owner, session=ctx.session, state=state,
                                    workspace=ctx.workspace, unattended=ctx.turn.unattended)
    answered = frozenset(clarify_answers(turn=ctx.turn))
    unattended = turn_unattended(ctx.session, ctx.turn)  # nobody to answer a clarify

    def gate(call: ToolCall) -> Decision:
        # Rules are per tool: an "always" grant for one tool never covers another.
        call_ctx = replace(policy_ctx, always_rules=state.patterns_for(call.name),
                           session_rules=state.patterns_for(call.name, scope="session"))
        if current_identity() is None:
            # Called where the acting identity did not travel (a bare thread): the ids read
            # from the row must not stand in for it; decide() denies without identity.
            call_ctx = replace(call_ctx, session_id=None, user_id=None)
        decision = decide(call, call_ctx)
        if decision.rule == "always_rule":
            _count_rule_hit(call, call_ctx, state)
        _audit_unasked(ctx.session, call, decision)
        # An unanswered question waits like an approval (agents/tools/clarify.py).
        return clarify_gate(call, decision, answered=call.id in answered, unattended=unattended)

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
