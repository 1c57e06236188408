"""Team facts the lower apps ask for through sessions/hooks.py (TEAMS), answered here where
Team and Membership live, so sessions/ and approvals/ never import accounts/."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q

from accounts.models import Membership, Team


def admin_team_ids(user) -> list[int]:
    """Ids of the teams in which ``user`` (an authenticated user) is an admin."""
    return list(Membership.objects.filter(user=user, role=Membership.Role.ADMIN)
                .values_list("team_id", flat=True))


def team_ids(user_id: int) -> list[int]:
    """Ids of every team ``user_id`` belongs to, in membership order."""
    return list(Membership.objects.filter(user_id=user_id).order_by("id")
                .values_list("team_id", flat=True))


def team_admin_ids(team_id: int) -> set[int]:
    """User ids of the admins of team ``team_id``."""
    return set(Membership.objects.filter(team_id=team_id, role=Membership.Role.ADMIN)
               .values_list("user_id", flat=True))


def team_default(user) -> Team | None:
    """The team a new session of ``user`` belongs to: their first membership's, or None."""
    membership = Membership.objects.filter(user=user).select_related("team").first()
    return membership.team if membership else None


def deny_rules(user_id: int, team_id: int | None) -> tuple[str, ...]:
    """The deny patterns of every team ``user_id`` belongs to and of ``team_id`` (the
    session's team; None: none), oldest team first, each pattern once. One query: asked
    before every batch of tool calls, where the memberships and the patterns were two
    (issue 15 target 1); both are read fresh each time, since an admin may change them at
    any moment."""
    member = Membership.objects.filter(team_id=OuterRef("pk"), user_id=user_id)
    teams = Team.objects.filter(Q(Exists(member)) | Q(pk=team_id) if team_id else Exists(member))
    deny: list[str] = []
    for patterns in teams.order_by("id").values_list("deny_rules", flat=True):
        deny += [p for p in (patterns or []) if isinstance(p, str) and p not in deny]
    return tuple(deny)