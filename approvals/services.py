"""Approval services: the durable human gate between the policy's "ask" and a tool run.

The runner stores one ApprovalRequest per asking tool call and ends its task (no worker
waits on a person, DESIGN.md §4). A human decides here; the first decision wins through a
conditional UPDATE on state=pending; the last decision of a turn enqueues its resume. No
decision before ``expires_at`` means expired, fail-closed (hermes-facts §10: 300 s, no
answer means deny). Every decision, expiry, cancellation, rule revocation and bypass toggle
writes an AuditEntry. The policy itself (allow / ask / deny) is agents/policy/__init__.py; reading
for views is approvals/selectors.py; rendering is approvals/rendering.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, NamedTuple

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import F
from django.http import Http404
from django.utils import timezone

from agents.policy import UNCONFINED
from agents.policy.context import GateState  # noqa: F401  (re-exported)
from approvals.models import ApprovalRequest, ApprovalRule, AuditEntry
from approvals.selectors import approval_get, approval_list_pending, approval_rule_list
from sessions.events import event_append, group_publish, user_group
from sessions.hooks import TEAMS
from sessions.models import Session, Turn
from sessions.selectors import admin_team_ids
from sessions.waits import Wait, turn_resume_on_commit

if TYPE_CHECKING:
    from agents.messages import ToolCall
    from agents.policy import Decision

Choice = Literal["once", "session", "always", "deny"]
CHOICES: tuple[str, ...] = ("once", "session", "always", "deny")
PROTECTED_FILE_RULE = "protected_file"
"""Decision.rule of instruction-file writes: asked one at a time, never "always"
(hermes-facts §10, "Protected instruction files")."""
TIMED_OUT_REASON = "not executed: approval timed out"
CANCELLED_REASON = "not executed: the turn was stopped before a decision"
State = ApprovalRequest.State


class ApprovalAlreadyDecided(ValidationError):
    """A second decision on a request that is no longer pending (the first one won)."""


# --- Wire shapes -----------------------------------------------------------------------

def approval_to_dict(approval: ApprovalRequest) -> dict:
    """The JSON shape of one request in events (docs/protocol.md): ids, what runs, why it
    was flagged, and its state; times as ISO 8601 strings."""
    return {
        "id": approval.pk, "session_id": approval.session_id, "turn_id": approval.turn_id,
        "tool_call_id": approval.tool_call_id, "tool_name": approval.tool_name,
        "command": approval.command, "workspace": approval.workspace,
        "reason": approval.reason, "risk_class": approval.risk_class,
        "allow_always": approval.allow_always, "state": approval.state,
        "scope": approval.scope, "requester": _username(approval.requester_id),
        "decider": _username(approval.decider_id),
        "decision_reason": approval.decision_reason,
        "expires_at": approval.expires_at.isoformat(),
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
    }


def _username(user_id: int | None) -> str:
    if user_id is None:
        return ""
    from django.contrib.auth import get_user_model

    return (get_user_model().objects.filter(pk=user_id)
            .values_list("username", flat=True).first() or "")


def _call_command(call: ToolCall, decision: Decision) -> tuple[str, dict]:
    """(what a human reads: the command or the paths, the parsed arguments)."""
    try:
        args = call.parsed_arguments()
    except ValueError:
        return (decision.normalized or call.arguments), {"raw": call.arguments}
    if isinstance(args.get("command"), str):
        return args["command"], args
    paths = [args["path"]] if isinstance(args.get("path"), str) else []
    edits = args.get("edits")
    if isinstance(edits, list):
        paths += [e["path"] for e in edits
                  if isinstance(e, dict) and isinstance(e.get("path"), str)]
    if paths:
        return ", ".join(paths), args
    return (decision.normalized or json.dumps(args, sort_keys=True)), args


# --- Badges ----------------------------------------------------------------------------

def _reviewer_ids(session: Session) -> set[int]:
    """The session owner and every admin of the session's team: who sees its approvals."""
    ids = {session.owner_id}
    if session.team_id is not None:
        ids |= set(TEAMS.team_admin_ids(session.team_id))
    return ids


def _badges_publish_on_commit(session: Session) -> None:
    """After commit, push {"type": "approval.badge", "count": n} to each reviewer's user
    group, n being the pending requests that reviewer can see."""
    from django.contrib.auth import get_user_model

    user_ids = sorted(_reviewer_ids(session))

    def publish() -> None:
        for user in get_user_model().objects.filter(pk__in=user_ids):
            count = approval_list_pending(user=user).count()
            # No session_id: the consumer forwards it as is, outside the seq stream.
            group_publish(user_group(user.pk), {"type": "approval.badge", "count": count})

    transaction.on_commit(publish)


def _audit(*, actor, action: str, session: Session | None = None,
           approval: ApprovalRequest | None = None, detail: dict | None = None) -> AuditEntry:
    return AuditEntry.objects.create(actor=actor, action=action, session=session,
                                     approval=approval, detail=detail or {})


def _resume_if_settled(approval: ApprovalRequest) -> None:
    """Enqueue the turn's resume on commit when none of its requests is pending any more.
    Callers hold the session row lock, so two last decisions cannot both miss each other."""
    if approval.turn_id is None:
        return
    if ApprovalRequest.objects.filter(turn_id=approval.turn_id, state=State.PENDING).exists():
        return
    turn_resume_on_commit(approval.session_id)


def _lock_session(session_id: int) -> None:
    """Serialise decisions, expiries and cancellations of one session's requests."""
    list(Session.objects.select_for_update().filter(pk=session_id).values_list("pk", flat=True))


# --- Creating requests -----------------------------------------------------------------

def approval_request_create(*, session: Session, turn: Turn | None,
                            pending: list[tuple[ToolCall, Decision]],
                            workspace: str) -> list[ApprovalRequest]:
    """Store one pending request per call whose decision is "ask" (others are re-gated on
    resume), push each to the session (approval.requested) and the reviewers' badges.

    ``expires_at`` = now + HERMES["APPROVAL_TIMEOUT_SECONDS"] (300 s, hermes-facts §10).
    ``allow_always`` is False for the protected-instruction-file rule. Runs inside the
    caller's transaction when there is one; events publish after commit.
    """
    timeout = int(settings.HERMES["APPROVAL_TIMEOUT_SECONDS"])
    now = timezone.now()
    created: list[ApprovalRequest] = []
    with transaction.atomic():
        for call, decision in pending:
            if decision.verdict != "ask":
                continue
            command, args = _call_command(call, decision)
            approval = ApprovalRequest.objects.create(
                session=session, turn=turn, tool_call_id=call.id, tool_name=call.name,
                arguments=args, command=command, workspace=workspace,
                reason=decision.reason, rule=decision.rule, risk_class=decision.risk_class,
                risk_classes=list(decision.risk_classes or (
                    (decision.risk_class,) if decision.risk_class else ())),
                normalized=decision.normalized or command,
                allow_always=decision.rule != PROTECTED_FILE_RULE,
                requester_id=session.owner_id, created_at=now,
                expires_at=now + timedelta(seconds=timeout))
            event_append(session_id=session.pk, type="approval.requested",
                         payload={"approval": approval_to_dict(approval)})
            created.append(approval)
        if created:
            _badges_publish_on_commit(session)
    return created


# --- Deciding --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class DecidePermissions:
    """What ``user`` may do with one request. ``note`` says why approving is restricted."""

    can_approve: bool
    can_always: bool
    can_deny: bool
    note: str = ""


def approval_permissions(*, user, approval: ApprovalRequest) -> DecidePermissions:
    """The session owner or an admin of the session's team may decide. When the team lists
    the request's risk class in ``admin_only_risk_classes`` only a team admin other than the
    requester may approve (so nobody approves their own); denying stays open to the owner.
    In a session of no team, a class any team of the owner reserves cannot be approved at
    all (that team's admins do not see the session): run it in a session of the team.
    "always" is never offered for protected instruction files."""
    session = approval.session
    is_owner = session.owner_id == user.pk
    is_admin = session.team_id is not None and session.team_id in admin_team_ids(user=user)
    if not (is_owner or is_admin):
        return DecidePermissions(can_approve=False, can_always=False, can_deny=False)
    # Read fresh (the team's classes may have changed since ``approval`` was loaded).
    team = (Session.objects.select_related("team").get(pk=session.pk).team
            if session.team_id else None)
    # Every class of every finding counts, not only the first (issue 8 finding 6).
    classes = [c for c in (approval.risk_class, *(approval.risk_classes or [])) if c]
    gated = [c for c in classes if team and c in (team.admin_only_risk_classes or [])
             or c == UNCONFINED]
    note = ""
    can_approve = True
    reserved = TEAMS.admin_only_classes(session.owner_id) if team is None else {}
    held = [c for c in classes if c in reserved]
    if UNCONFINED in classes and team is None:
        # The policy was the only guard when it asked (agents/policy UNCONFINED): nobody but
        # the requester sees a session of no team, so nobody may approve it.
        can_approve = False
        note = ("This host runs commands with no OS confinement, so the policy is the only "
                "guard: what it asks about needs a team admin other than the requester. Run "
                "it in a team session, or ask the operator to enable Landlock or the sandbox.")
    elif held:  # a member's session outside any team: their team's reservation binds
        can_approve = False
        note = (f"Risk class {held[0]!r} is reserved for the admins of team "
                f"{reserved[held[0]]!r}: run it in a session of that team.")
    elif gated:
        can_approve = is_admin and user.pk != approval.requester_id
        if not can_approve:
            note = (f"Risk class {gated[0]!r} needs a team admin other than the "
                    f"requester to approve." + (
                        " (This host runs commands with no OS confinement.)"
                        if gated[0] == UNCONFINED else ""))
    if not approval.allow_always and not note:
        note = "Protected instruction file: approve one operation at a time."
    return DecidePermissions(can_approve=can_approve,
                             can_always=can_approve and approval.allow_always,
                             can_deny=True, note=note)


def _already_decided(approval_id: int) -> ApprovalAlreadyDecided:
    row = ApprovalRequest.objects.select_related("decider").get(pk=approval_id)
    who = f" by {row.decider.username}" if row.decider else ""
    return ApprovalAlreadyDecided(f"This request was already {row.state}{who}.",
                                  code="already_decided")


def _decision_record(*, approval: ApprovalRequest, user, choice: str, reason: str) -> None:
    """The rest of a won decision, in its transaction: the "always" rule, the audit entry,
    the approval.decided event, badges, and the resume when the turn is settled."""
    rule = None
    if choice == "always":
        # Scoped to the team the session works in: a grant made under one team's approval
        # policy must not carry into another team's sessions (a second user's report: a
        # self-approved rule in a team with no admin-only classes ran `rm -rf` unasked in a
        # team whose policy reserves it for another admin).
        rule = ApprovalRule.objects.create(
            user_id=approval.requester_id, team_id=approval.session.team_id,
            tool_name=approval.tool_name,
            pattern=approval.normalized or approval.command, created_by=user)
    _audit(actor=user, action=f"approval.{approval.state}", session=approval.session,
           approval=approval, detail={"choice": choice, "reason": reason,
                                      "tool_name": approval.tool_name,
                                      "command": approval.command,
                                      "risk_class": approval.risk_class,
                                      "risk_classes": approval.risk_classes,
                                      "rule_id": rule.pk if rule else None})
    event_append(session_id=approval.session_id, type="approval.decided",
                 payload={"approval": approval_to_dict(approval)})
    _badges_publish_on_commit(approval.session)
    _resume_if_settled(approval)


def approval_decide(*, user, approval_id: int, choice: Choice,
                    reason: str = "") -> ApprovalRequest:
    """Record one human decision: once / session / always approve, or deny with a reason
    (passed to the model as "denied by X: reason").

    Raises Http404 when the user cannot see the request, ValidationError when the choice is
    not allowed for this user or request, ApprovalAlreadyDecided when another decision (or
    the expiry) came first. "always" adds an ApprovalRule for the requester; "session"
    lets later calls with the same normalised command through for the session's lineage.
    Audited; emits approval.decided; the last decision of a turn enqueues its resume.
    """
    approval = approval_get(user=user, approval_id=approval_id)
    if choice not in CHOICES:
        raise ValidationError(f"Unknown choice {choice!r}.", code="invalid_choice")
    reason = (reason or "").strip()[:2000]
    perms = approval_permissions(user=user, approval=approval)
    if choice == "deny" and not perms.can_deny:
        raise Http404("No such approval")
    if choice != "deny" and not perms.can_approve:
        raise ValidationError(perms.note or "You cannot approve this request.",
                              code="admin_required")
    if choice == "always" and not approval.allow_always:
        raise ValidationError("\"Always\" is never allowed for protected instruction files.",
                              code="always_refused")
    now = timezone.now()
    state = State.DENIED if choice == "deny" else State.APPROVED
    scope = "" if choice == "deny" else choice
    with transaction.atomic():
        _lock_session(approval.session_id)
        won = ApprovalRequest.objects.filter(pk=approval.pk, state=State.PENDING,
                                             expires_at__gt=now).update(
            state=state, scope=scope, decider=user, decision_reason=reason, decided_at=now)
        if won:
            approval.refresh_from_db()
            _decision_record(approval=approval, user=user, choice=choice, reason=reason)
        elif _expire_one(approval.pk, now=now):
            # Past its deadline but not yet swept: expire it now (fail-closed), then report.
            _badges_publish_on_commit(approval.session)
            _resume_if_settled(approval)
    if not won:
        raise _already_decided(approval.pk)
    return approval


def _expire_one(approval_id: int, *, now: datetime) -> bool:
    """pending → expired for one overdue request; audit and event. True if it changed."""
    changed = ApprovalRequest.objects.filter(pk=approval_id, state=State.PENDING,
                                             expires_at__lte=now).update(
        state=State.EXPIRED, decided_at=now, decision_reason=TIMED_OUT_REASON)
    if not changed:
        return False
    approval = ApprovalRequest.objects.select_related("session").get(pk=approval_id)
    _audit(actor=None, action="approval.expired", session=approval.session, approval=approval,
           detail={"tool_name": approval.tool_name, "command": approval.command})
    event_append(session_id=approval.session_id, type="approval.decided",
                 payload={"approval": approval_to_dict(approval)})
    return True


def approval_expire_due(now: datetime | None = None) -> int:
    """Expire every pending request past ``expires_at`` (fail-closed: the call gets
    TIMED_OUT_REASON) and enqueue the resume of turns left with nothing pending. Returns
    how many expired. Run by approvals.expire_task every 15 s and by the runner before a
    resume."""
    now = now or timezone.now()
    due = list(ApprovalRequest.objects.filter(state=State.PENDING, expires_at__lte=now)
               .values_list("pk", "session_id").order_by("id"))
    expired = 0
    for approval_id, session_id in due:
        with transaction.atomic():
            _lock_session(session_id)
            if not _expire_one(approval_id, now=now):
                continue
            expired += 1
            approval = ApprovalRequest.objects.select_related("session").get(pk=approval_id)
            _badges_publish_on_commit(approval.session)
            _resume_if_settled(approval)
    return expired


def approval_cancel_for_session(*, session: Session) -> int:
    """A stopped turn: every pending request of the session → cancelled (audited, event).
    No resume is enqueued. Returns how many were cancelled."""
    now = timezone.now()
    with transaction.atomic():
        _lock_session(session.pk)
        ids = list(ApprovalRequest.objects.filter(session=session, state=State.PENDING)
                   .values_list("pk", flat=True))
        ApprovalRequest.objects.filter(pk__in=ids, state=State.PENDING).update(
            state=State.CANCELLED, decided_at=now, decision_reason=CANCELLED_REASON)
        for approval in ApprovalRequest.objects.filter(pk__in=ids).order_by("id"):
            _audit(actor=None, action="approval.cancelled", session=session, approval=approval,
                   detail={"tool_name": approval.tool_name})
            event_append(session_id=session.pk, type="approval.decided",
                         payload={"approval": approval_to_dict(approval)})
        if ids:
            _badges_publish_on_commit(session)
    return len(ids)


# --- What the runner reads -------------------------------------------------------------

def turn_has_pending_approvals(*, turn: Turn) -> bool:
    """True while any request of ``turn`` still waits for a human (the resume waits)."""
    return ApprovalRequest.objects.filter(turn=turn, state=State.PENDING).exists()


def _denied_text(approval: ApprovalRequest | _Decided, decider_name: str) -> str:
    if approval.state == State.EXPIRED:
        return TIMED_OUT_REASON
    if approval.state == State.CANCELLED:
        return CANCELLED_REASON
    text = f"denied by {decider_name or 'a reviewer'}"
    return f"{text}: {approval.decision_reason}" if approval.decision_reason else text


def gate_state(*, session: Session, turn: Turn | None, bypass: bool | None = None,
               decisions_from: GateState | None = None) -> GateState:
    """Read the gate's durable state for ``session`` (decisions limited to ``turn``, or the
    whole session when None). The latest request for a tool call id wins. ``bypass``: the
    session's bypass flag as the caller's own write just read it (the runner's transcript
    writes return it); None reads the row. Three queries (the deny patterns of the owner's
    teams and the session's team, the rules, the lineage's decided requests, which give
    both this turn's decisions and the "for this session" approvals) where it was five.

    ``decisions_from``: a GateState read earlier in the same run of ``turn``, whose
    decisions (approved and denied call ids, "for this session" approvals) are reused
    without a query: they change only while a turn waits for a human, which ends its run
    (a run's own asks end it too). The rules, teams and deny lists are read again: an
    admin may change them at any moment."""
    rule_ids: dict[tuple[str, str], int] = {}
    for pk, tool_name, pattern in _rules_in_force(session):
        rule_ids.setdefault((tool_name, pattern), pk)
    deny, reserved = TEAMS.team_rules(session.owner_id, session.team_id)
    if bypass is None:
        bypass = bool(Session.objects.filter(pk=session.pk)
                      .values_list("bypass_approvals", flat=True).first())
    if decisions_from is not None:
        return replace(decisions_from, always_rules=tuple(rule_ids),
                       always_rule_ids=rule_ids, deny_rules=tuple(deny), bypass=bypass,
                       reserved=reserved)
    latest: dict[str, _Decided] = {}
    session_rules: list[tuple[str, str]] = []
    root = session.lineage_root_id or session.pk
    with connection.cursor() as cursor:  # plain SQL: see _DECIDED_SQL
        cursor.execute(_DECIDED_SQL, [root, root, State.PENDING])
        decided = [_Decided(*row) for row in cursor.fetchall()]
    for a in decided:
        if a.state == State.APPROVED and a.scope == ApprovalRequest.Scope.SESSION:
            pair = (a.tool_name, a.normalized)
            if pair not in session_rules:  # approved "for this session", oldest first
                session_rules.append(pair)
        if a.session_id == session.pk and (turn is None or a.turn_id == turn.pk):
            latest[a.tool_call_id] = a
    approved = frozenset(cid for cid, a in latest.items() if a.state == State.APPROVED)
    denied = {cid: _denied_text(a, a.decider_name or "")
              for cid, a in latest.items() if a.state != State.APPROVED}
    return GateState(always_rules=tuple(rule_ids),
                     always_rule_ids=rule_ids, session_rules=tuple(session_rules),
                     approved_call_ids=approved, denied_call_ids=denied,
                     deny_rules=tuple(deny), bypass=bypass, reserved=reserved)


class _Decided(NamedTuple):
    """One decided request of a session's lineage, as gate_state reads it."""

    session_id: int
    turn_id: int | None
    tool_call_id: str
    tool_name: str
    normalized: str
    state: str
    scope: str
    decision_reason: str
    decider_name: str | None


def _decided_sql() -> str:
    """The plain SQL of gate_state's decisions read, built once from the models' columns:
    the ``_Decided`` fields of every request of lineage %s (the root itself, or a session
    whose lineage root it is) not in state %s, oldest first. Read at every turn start and
    resume; the ORM's build of it (a join, an OR across the join, an exclude) cost more
    than its round trip (issue 15 target 1)."""
    meta, smeta = ApprovalRequest._meta, Session._meta
    user = meta.get_field("decider").related_model._meta
    col = {f.name: f.column for f in meta.concrete_fields}
    fields = ("session", "turn", "tool_call_id", "tool_name", "normalized", "state", "scope",
              "decision_reason")
    select = ", ".join(f'a."{col[name]}"' for name in fields)
    lineage = (f'a."{col["session"]}" = %s OR a."{col["session"]}" IN (SELECT "{smeta.pk.column}" '
               f'FROM "{smeta.db_table}" WHERE "{smeta.get_field("lineage_root").column}" = %s)')
    return (f'SELECT {select}, u."{user.get_field("username").column}" '
            f'FROM "{meta.db_table}" a LEFT JOIN "{user.db_table}" u '
            f'ON u."{user.pk.column}" = a."{col["decider"]}" '
            f'WHERE ({lineage}) AND a."{col["state"]}" <> %s ORDER BY a."{meta.pk.column}"')


_DECIDED_SQL = _decided_sql()


def _rules_sql(*, team: bool) -> str:
    """The plain SQL of ``_rules_in_force``, built once from the model's columns."""
    meta = ApprovalRule._meta
    col = {f.name: f.column for f in meta.concrete_fields}
    user, team_col = f'"{col["user"]}"', f'"{col["team"]}"'
    scope = (f"(({user} = %s AND {team_col} = %s) OR ({user} IS NULL AND {team_col} = %s))"
             if team else f"({user} = %s AND {team_col} IS NULL)")
    return (f'SELECT "{meta.pk.column}", "{col["tool_name"]}", "{col["pattern"]}" '
            f'FROM "{meta.db_table}" WHERE {scope} AND "{col["revoked"]}" = %s '
            f'ORDER BY "{meta.pk.column}"')


_RULES_SQL = {True: _rules_sql(team=True), False: _rules_sql(team=False)}


def _rules_in_force(session: Session) -> list[tuple[int, str, str]]:
    """[(rule id, tool name, pattern)] of the "always" rules in force in ``session``,
    oldest first: its owner's made in the session's team (or, for a session with no team,
    made with none, team NULL), and the team's team-wide rules (user NULL); never another
    team's, never a revoked one. Plain SQL: asked before every batch of tool calls, and the ORM's
    build of this query cost more than its round trip (issue 15 target 1)."""
    team = session.team_id is not None
    params = ([session.owner_id, session.team_id, session.team_id] if team
              else [session.owner_id])
    with connection.cursor() as cursor:
        cursor.execute(_RULES_SQL[team], [*params, False])
        return [tuple(row) for row in cursor.fetchall()]


def rule_hit(rule_id: int) -> None:
    """Count one call an "always" rule let through (shown to admins)."""
    ApprovalRule.objects.filter(pk=rule_id).update(hit_count=F("hit_count") + 1)


# --- Rules and bypass ------------------------------------------------------------------

def approval_rule_revoke(*, user, rule_id: int) -> ApprovalRule:
    """Revoke an "always" rule: its owner, or an admin of a team it belongs to (through
    approval_rule_list). Http404 otherwise; ValidationError if already revoked. Audited."""
    try:
        rule = approval_rule_list(user=user).get(pk=rule_id)
    except (ApprovalRule.DoesNotExist, ValueError, TypeError):
        raise Http404("No such rule") from None
    with transaction.atomic():
        if not ApprovalRule.objects.filter(pk=rule.pk, revoked=False).update(revoked=True):
            raise ValidationError("This rule was already revoked.", code="already_revoked")
        rule.revoked = True
        _audit(actor=user, action="rule.revoked", detail={
            "rule_id": rule.pk, "tool_name": rule.tool_name, "pattern": rule.pattern,
            "hit_count": rule.hit_count, "rule_user_id": rule.user_id})
    return rule


def session_bypass_set(*, user, session: Session, enabled: bool) -> Session:
    """Turn the per-session approval bypass on or off: the ONLY writer of
    Session.bypass_approvals. Owner only (PermissionDenied otherwise); audited with the
    previous value; emits session.updated. The process-wide HERMES_YOLO is separate and
    frozen at start (seed, "The one-line attack"); the hardline floor and protected
    instruction files still apply under either."""
    if not user.is_authenticated or session.owner_id != user.pk:
        raise PermissionDenied("Only the session's owner can change its approval bypass.")
    enabled = bool(enabled)
    with transaction.atomic():
        previous = (Session.objects.select_for_update().filter(pk=session.pk)
                    .values_list("bypass_approvals", flat=True).get())
        Session.objects.filter(pk=session.pk).update(bypass_approvals=enabled)
        _audit(actor=user, action="session.bypass", session=session,
               detail={"enabled": enabled, "previous": previous})
        event_append(session_id=session.pk, type="session.updated",
                     payload={"bypass_approvals": enabled})
    session.bypass_approvals = enabled
    return session


APPROVAL_WAIT = Wait(
    status=Turn.Status.AWAITING_APPROVAL,
    pending=lambda turn: turn_has_pending_approvals(turn=turn),
    cancel=lambda session: approval_cancel_for_session(session=session),
    expire_due=lambda: approval_expire_due(),
)
"""The approval wait, registered with sessions/ in ApprovalsConfig.ready."""
