"""The policy gate of a session's turn: the PolicyContext built from the session, the team
and the approval state (a GateState value the runner reads through sessions/hooks.py), the
gate that calls agents.policy.decide for every tool call, and what the gate records (rule
hits, destructive calls let through unasked)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from django.conf import settings

from agents.policy.command_rules import DESTRUCTIVE_CLASSES
from agents.identity import current_identity
from agents.messages import ToolCall
from agents.policy import Decision, PolicyContext, bypass_frozen, decide
from agents.policy.context import GateState
from agents.tools.clarify import clarify_gate
from agents.tools.registry import ToolRegistry
from sessions.backends import backend_kind, local_confined
from sessions import mcp
from sessions.hooks import APPROVALS, TEAMS
from sessions.models import Session, Turn


def turn_unattended(session: Session, turn: Turn) -> bool:
    """Nobody can answer a question in this turn: a schedule, a webhook, a child agent."""
    return bool(turn.unattended or session.parent_id is not None)


def policy_context_for(*, user, session: Session | None, state: GateState | None = None,
                       workspace: Path | None = None, unattended: bool = False,
                       user_id: int | None = None) -> PolicyContext:
    """The PolicyContext for ``user`` (or, when None, the user whose id is ``user_id``)
    acting in ``session`` (None: a check outside any
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
    elif session is not None:  # no team: its owner's teams' reservations still bind
        admin_only = tuple(state.reserved if state is not None
                           else TEAMS.admin_only_classes(session.owner_id))
    return PolicyContext(
        session_id=str(session.pk) if session is not None else "cli",
        user_id=(str(user.pk) if user is not None
                 else str(user_id) if user_id is not None else None),
        workspace=str(workspace or (Path(settings.HERMES["WORKSPACE_ROOT"]) /
                                    (str(session.pk) if session is not None else "cli"))),
        backend_isolated=isolated, backend_has_host_paths=False,
        host_confined=not isolated and local_confined(),
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


def policy_gate(ctx, state: GateState, tools: ToolRegistry):
    """gate(call) -> Decision: the one policy function, fed this turn's approval state and
    the session's tools (the policy judges what they declare). ``ctx``: the runner's
    TurnContext: its ``clarify_answers`` and ``registry`` are read once
    per run)."""
    # The acting user is the session's owner; only the id is needed (no row read).
    policy_ctx = policy_context_for(user=None, user_id=ctx.session.owner_id,
                                    session=ctx.session, state=state,
                                    workspace=ctx.workspace, unattended=ctx.turn.unattended)
    answered = frozenset(ctx.clarify_answers)
    no_one_to_answer = turn_unattended(ctx.session, ctx.turn)

    def gate(call: ToolCall) -> Decision:
        # Rules are per tool: an "always" grant for one tool never covers another.
        call_ctx = replace(policy_ctx, always_rules=state.patterns_for(call.name),
                           session_rules=state.patterns_for(call.name, scope="session"))
        if current_identity() is None:
            # Called where the acting identity did not travel (a bare thread): the ids read
            # from the row must not stand in for it; decide() denies without identity.
            call_ctx = replace(call_ctx, session_id=None, user_id=None)
        decision = decide(call, call_ctx, tools)
        if decision.rule == "always_rule":
            _count_rule_hit(call, call_ctx, state, tools)
        _audit_unasked(ctx.session, call, decision)
        # An unanswered question waits like an approval (agents/tools/clarify.py).
        return clarify_gate(call, decision, answered=call.id in answered,
                            unattended=no_one_to_answer)

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
    APPROVALS.audit(action="command.unasked", session=session,
                    detail={"tool_call_id": call.id, "tool_name": call.name,
                            "rule": decision.rule, "risk_classes": classes,
                            "command": decision.normalized[:2000]})


def _count_rule_hit(call: ToolCall, ctx: PolicyContext, state: GateState,
                    tools: ToolRegistry) -> None:
    """Credit the "always" rule that allowed ``call`` (admins see hit counts)."""
    for pattern in ctx.always_rules:
        if decide(call, replace(ctx, always_rules=(pattern,)), tools).rule == "always_rule":
            rule_id = state.always_rule_ids.get((call.name, pattern))
            if rule_id is not None:
                APPROVALS.rule_hit(rule_id)
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
