"""Account services: a team's approval policy, edited by its admins.

``team_policy_set`` is the only writer of Team.admin_only_risk_classes outside the Django
admin: team admins choose which risk classes (agents/command_risk.py RISK_SEVERITY) only
an admin other than the requester may approve. Every change is audited (issue 8 item 5).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404

from accounts.models import Membership, Team
from agents.command_rules import RISK_SEVERITY
from approvals.models import AuditEntry


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
