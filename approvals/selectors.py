"""Selectors for approvals, scoped to the acting user: the requester sees their own, team
admins see their teams' requests, nobody else sees anything."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from approvals.models import ApprovalRequest, ApprovalRule
from sessions.selectors import admin_team_ids


def approval_visible_q(*, user) -> Q:
    """Requests the user may see: of their own sessions and of their admin teams'."""
    return Q(session__owner=user) | Q(session__team_id__in=admin_team_ids(user=user))


def approval_list_pending(*, user) -> QuerySet[ApprovalRequest]:
    """Pending requests the user may see (own sessions and administered teams)."""
    if not user.is_authenticated:
        return ApprovalRequest.objects.none()
    return (ApprovalRequest.objects.filter(approval_visible_q(user=user),
                                           state=ApprovalRequest.State.PENDING)
            .select_related("session", "requester").order_by("id"))


def approval_list_recent(*, user, limit: int = 50) -> QuerySet[ApprovalRequest]:
    """Decided (or expired/cancelled) requests the user may see, newest first."""
    if not user.is_authenticated:
        return ApprovalRequest.objects.none()
    return (ApprovalRequest.objects.filter(approval_visible_q(user=user))
            .exclude(state=ApprovalRequest.State.PENDING)
            .select_related("session", "requester", "decider").order_by("-id")[:limit])


def approval_get(*, user, approval_id: int) -> ApprovalRequest:
    """One request visible to the user; Http404 otherwise."""
    if not user.is_authenticated:
        raise Http404("No such approval")
    try:
        return ApprovalRequest.objects.select_related("session").get(
            approval_visible_q(user=user), pk=approval_id)
    except (ApprovalRequest.DoesNotExist, ValueError, TypeError):
        raise Http404("No such approval") from None


def approval_rule_list(*, user) -> QuerySet[ApprovalRule]:
    """"Always" rules the user may manage: their own, and those made in (or for) a team
    they administer. A member's rules from another team stay out of reach: being an admin
    of one team the user is in says nothing about their work elsewhere."""
    if not user.is_authenticated:
        return ApprovalRule.objects.none()
    teams = admin_team_ids(user=user)
    return (ApprovalRule.objects.filter(Q(user=user) | Q(team_id__in=teams))
            .distinct().order_by("-id"))
