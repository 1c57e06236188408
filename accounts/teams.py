"""Team facts the lower apps ask for through sessions/hooks.py (TEAMS), answered here where
Team and Membership live, so sessions/ and approvals/ never import accounts/."""

from __future__ import annotations

import json

from django.db import connection

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


def admin_only_classes(user_id: int) -> dict[str, str]:
    """Risk class -> the name of the first team of ``user_id`` that reserves it for its
    admins (``team_rules``). A member's session that belongs to no team (made before
    joining) is governed by these: a second user created a session, then joined a team,
    and approved their own ``rm -rf`` there, which the team reserves for another admin."""
    return team_rules(user_id, None)[1]


def deny_rules(user_id: int, team_id: int | None) -> tuple[str, ...]:
    """The deny patterns of every team ``user_id`` belongs to and of ``team_id`` (the
    session's team; None: none), oldest team first, each pattern once (``team_rules``)."""
    return team_rules(user_id, team_id)[0]


def team_rules(user_id: int, team_id: int | None) -> tuple[tuple[str, ...], dict[str, str]]:
    """(the deny patterns of ``deny_rules``, the ``admin_only_classes`` of ``user_id``'s
    teams) in ONE round trip: asked before every batch of tool calls (issue 15 target 1:
    the memberships and the patterns were two queries; the reservations would have been a
    third). Read fresh each time: an admin may change them at any moment. Plain SQL: the
    ORM's build of the same query cost as much as the round trip it saves."""
    deny: list[str] = []
    reserved: dict[str, str] = {}
    with connection.cursor() as cursor:
        cursor.execute(_DENY_SQL, [user_id, team_id, user_id])
        for member, name, patterns, classes in cursor.fetchall():
            if isinstance(patterns, str):  # SQLite hands JSON back as text
                patterns = json.loads(patterns)
            if isinstance(classes, str):
                classes = json.loads(classes)
            deny += [p for p in (patterns or []) if isinstance(p, str) and p not in deny]
            for risk_class in (classes or []) if member else ():
                if isinstance(risk_class, str):
                    reserved.setdefault(risk_class, name)
    return tuple(deny), reserved


def _deny_sql() -> str:
    team, member = Team._meta, Membership._meta
    column = {f.name: f.column for f in member.concrete_fields}
    pk = team.pk.column
    members = (f'(SELECT "{column["team"]}" FROM "{member.db_table}" '
               f'WHERE "{column["user"]}" = %s)')
    return (f'SELECT "{pk}" IN {members}, "{team.get_field("name").column}", '
            f'"{team.get_field("deny_rules").column}", '
            f'"{team.get_field("admin_only_risk_classes").column}" FROM "{team.db_table}" '
            f'WHERE "{pk}" = %s OR "{pk}" IN {members} ORDER BY "{pk}"')


_DENY_SQL = _deny_sql()
