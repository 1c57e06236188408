"""Account services: budgets (set or removed, audited), resuming a turn a budget stopped,
and a team's approval policy edited by its admins.

``team_policy_set`` is the only writer of Team.admin_only_risk_classes outside the Django
admin: team admins choose which risk classes (agents/policy/command_rules.py RISK_SEVERITY) only
an admin other than the requester may approve. Every change is audited (issue 8 item 5).
"""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404

from accounts.models import Budget, Membership, Team
from accounts.money import amount_parse
from agents.policy.command_rules import RISK_SEVERITY
from approvals.models import AuditEntry
from sessions.events import event_append
from sessions.models import Turn
from sessions.tasks import turn_run_task


def team_admin_may(*, user, team: Team) -> bool:
    """Staff, or an admin of ``team``."""
    return bool(user.is_staff or Membership.objects.filter(
        user=user, team=team, role=Membership.Role.ADMIN).exists())


def team_admin_of(*, user, team: Team) -> bool:
    """``user`` is one of ``team``'s admins (staff or not)."""
    return Membership.objects.filter(user=user, team=team,
                                     role=Membership.Role.ADMIN).exists()


def budget_set(*, actor, scope: str, period: str, limit: object, team: Team | None = None,
               user=None, session=None, unknown_policy: str = "block") -> Budget | None:
    """Create, change or (``limit`` "" / None) remove one budget, with an AuditEntry
    ("budget.set" / "budget.removed", detail: before and after) in the same transaction.

    Who may write (set, change or remove), failing closed:
      - a team cap: staff or an admin of that team;
      - a session cap: staff or an admin of the session's team;
      - a member cap (scope "user"): staff, or an admin of EVERY team the member belongs to.
        A member cap is stored once per (user, period), team=NULL, and bounds the member's
        spend in all their teams, so an admin of only one of them must not lift, lower or
        remove a cap another team's admin set (security finding F4). A member in no team
        can be capped by staff only.
    Raises PermissionDenied (nothing stored, nothing audited), or ValidationError (nothing
    stored) for a negative, non-numeric or absurd limit, an unknown period, scope or
    policy."""
    if scope not in Budget.Scope.values:
        raise ValidationError(f"unknown budget scope {scope!r}")
    if period not in Budget.Period.values:
        raise ValidationError(f"unknown period {period!r}")
    if unknown_policy not in Budget.UnknownPolicy.values:
        raise ValidationError(f"unknown policy {unknown_policy!r}")
    owner_team = team if scope == "team" else (session.team if session else None)
    if scope == "user":
        if not (actor.is_staff or _admin_of_all_teams(actor=actor, member=user)):
            raise PermissionDenied(
                "a member's budget applies in every team they belong to: only staff or an "
                "admin of all of those teams may set, change or remove it")
    elif not (actor.is_staff or (owner_team is not None
                                 and team_admin_may(user=actor, team=owner_team))):
        raise PermissionDenied("only a team admin or staff may set this budget")
    remove = limit is None or str(limit).strip() == ""
    value: Decimal | None = None
    if not remove:
        try:
            value = amount_parse(limit)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
    keys = {"scope": scope, "period": period, "team": team if scope == "team" else None,
            "user": user if scope == "user" else None,
            "session": session if scope == "session" else None}
    with transaction.atomic():
        existing = Budget.objects.select_for_update().filter(**keys).first()
        before = _amount(existing.limit_usd) if existing else None
        if remove:
            if existing is None:
                return None
            existing.delete()
            _audit(actor, "budget.removed", keys, before, None, session)
            return None
        budget = existing or Budget(**keys)
        budget.limit_usd, budget.unknown_policy, budget.updated_by = value, unknown_policy, actor
        budget.full_clean()
        budget.save()
        _audit(actor, "budget.set", keys, before, _amount(value), session)
    return budget


def _admin_of_all_teams(*, actor, member) -> bool:
    """``actor`` is an admin of every team ``member`` belongs to, and there is at least one
    (an empty "every" must not grant anything)."""
    if member is None:
        return False
    teams = set(Membership.objects.filter(user=member).values_list("team_id", flat=True))
    administered = set(Membership.objects.filter(
        user=actor, team_id__in=teams, role=Membership.Role.ADMIN)
        .values_list("team_id", flat=True))
    return bool(teams) and teams == administered


def _amount(value: Decimal) -> str:
    """"0.05", "20" (no trailing zeros, no exponent) for the audit detail."""
    return format(value.normalize(), "f")


def budget_audit(*, actor, budget: Budget, action: str, before, after) -> None:
    """An AuditEntry for a budget changed outside budget_set (the Django admin)."""
    _audit(actor, action, {"scope": budget.scope, "period": budget.period, "team": budget.team,
                           "user": budget.user}, None if before is None else _amount(before),
           None if after is None else _amount(after), budget.session)


def _audit(actor, action: str, keys: dict, before, after, session) -> None:
    AuditEntry.objects.create(actor=actor, action=action, session=session, detail={
        "scope": keys["scope"], "period": keys["period"],
        "team": keys["team"].name if keys["team"] else None,
        "user": keys["user"].username if keys["user"] else None,
        "limit_before": before, "limit_after": after})


def turn_budget_resume(*, session, user) -> int | None:
    """Re-queue the session's turn that a budget stopped (owner only); its stored user
    message and done work are kept and it continues from where it stopped. Returns the
    turn id, or None when no turn is stopped by a budget. The cap is checked again before
    the next provider call, so resuming under a cap still reached stops again."""
    if session.owner_id != user.pk:
        raise PermissionDenied("only the session's owner can resume its turn")
    with transaction.atomic():
        turn = (Turn.objects.select_for_update()
                .filter(session=session, status=Turn.Status.BUDGET_BLOCKED).order_by("id")
                .first())
        if turn is None:
            return None
        Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.QUEUED, finished_at=None)
        event_append(session_id=session.pk, type="turn.queued",
                     payload={"turn_id": turn.pk, "resumed": "budget"})
        turn_run_task.delay_on_commit(session.pk)
    return turn.pk


def team_get_for_admin(*, user, team_id: int) -> Team:
    """The team ``team_id`` when ``user`` is one of its admins; Http404 otherwise (a
    member who is not an admin, and a stranger, see the same 404)."""
    if not user.is_authenticated:
        raise Http404("No such team")
    team = Team.objects.filter(pk=team_id, memberships__user=user,
                               memberships__role=Membership.Role.ADMIN).first()
    if team is None:
        raise Http404("No such team")
    return team


def team_get_for_manager(*, user, team_id: int) -> Team:
    """The team ``team_id`` when ``user`` may manage its members: one of its admins, or
    staff (who create teams and users on /people/ and add members directly, so they manage
    the members of any team, also one they are not in). Http404 for anyone else, as
    team_get_for_admin."""
    if user.is_authenticated and user.is_staff:
        team = Team.objects.filter(pk=team_id).first()
        if team is None:
            raise Http404("No such team")
        return team
    return team_get_for_admin(user=user, team_id=team_id)


def team_policy_set(*, user, team_id: int, admin_only_risk_classes: list[str]) -> Team:
    """Set the team's admin-only risk classes. Http404 unless ``user`` is a team admin;
    ValidationError for a class the policy does not know. In one transaction with an
    AuditEntry "team.policy" holding the previous and new lists."""
    unknown = sorted(set(admin_only_risk_classes) - set(RISK_SEVERITY))
    if unknown:
        raise ValidationError(f"Unknown risk classes: {', '.join(unknown)}.",
                              code="unknown_class")
    new = [c for c in RISK_SEVERITY if c in set(admin_only_risk_classes)]
    with transaction.atomic():
        team = team_get_for_admin(user=user, team_id=team_id)
        team = Team.objects.select_for_update().get(pk=team.pk)
        previous = list(team.admin_only_risk_classes or [])
        team.admin_only_risk_classes = new
        team.save(update_fields=["admin_only_risk_classes"])
        AuditEntry.objects.create(actor=user, action="team.policy",
                                  detail={"team_id": team.pk, "team": team.name,
                                          "admin_only_risk_classes": new,
                                          "previous": previous})
    return team
