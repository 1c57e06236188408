"""Selectors: the only way views, consumers and tasks obtain sessions for a user.

Every selector takes the acting user and filters by ownership; an object of another user or
team is indistinguishable from a missing one (Http404), never a 403 that reveals it exists.
"""

from __future__ import annotations

from functools import cached_property

from django.db.models import Q, QuerySet
from django.http import Http404

from sessions.hooks import TEAMS
from sessions.models import Message, RunEvent, Session


LINEAGE_WALK_MAX = 16
"""Generations followed up or down the parent links (delegation depth is far below)."""


def session_descendants(session_id: int) -> list[int]:
    """``session_id`` and every session below it (child agents, theirs), parents first, one
    query per generation: what a session's budget covers (accounts/budgets.py) and what
    deleting it removes (``parent`` cascades; sessions/services.py)."""
    ids, frontier = [session_id], [session_id]
    for _ in range(LINEAGE_WALK_MAX):
        frontier = list(Session.objects.filter(parent_id__in=frontier)
                        .values_list("id", flat=True))
        if not frontier:
            break
        ids.extend(frontier)
    return ids


def admin_team_ids(*, user) -> list[int]:
    """Ids of the teams in which ``user`` is an admin (accounts/ answers: sessions/hooks.py)."""
    if not user.is_authenticated:
        return []
    return list(TEAMS.admin_team_ids(user))


def session_visible_q(*, user) -> Q:
    """Sessions ``user`` may read: their own, and their admin teams' sessions."""
    return Q(owner=user) | Q(team_id__in=admin_team_ids(user=user))


def session_list(*, user, query: str = "", archived: bool = False) -> QuerySet[Session]:
    """The user's own top-level sessions, newest activity first; ``query`` filters titles."""
    if not user.is_authenticated:
        return Session.objects.none()
    qs = Session.objects.filter(owner=user, parent__isnull=True, archived=archived)
    if query:
        qs = qs.filter(title__icontains=query)
    return qs.order_by("-last_activity_at")


def session_list_team(*, user) -> QuerySet[Session]:
    """Sessions of other members in the teams the user administers."""
    return (Session.objects.filter(team_id__in=admin_team_ids(user=user))
            .exclude(owner=user).order_by("-last_activity_at"))


def session_get(*, user, session_id: int, write: bool = False) -> Session:
    """One session the user may read (owner or team admin) or, with ``write``, act in
    (owner only). Raises Http404 otherwise (unknown and forbidden look the same)."""
    if not user.is_authenticated:
        raise Http404("No such session")
    qs = Session.objects.filter(owner=user) if write else Session.objects.filter(
        session_visible_q(user=user))
    try:
        return qs.get(pk=session_id)
    except (Session.DoesNotExist, ValueError, TypeError):
        raise Http404("No such session") from None


def message_list_display(*, session: Session) -> QuerySet[Message]:
    """Messages a person sees in the chat: live and summarised-away ones, not rewound."""
    return (Message.objects.filter(session=session)
            .filter(Q(active=True) | Q(compacted=True)).order_by("id"))


def event_list_after(*, session_id: int, after_seq: int, limit: int = 5000) -> list[RunEvent]:
    """Events with seq > after_seq, in order (the caller has already checked access)."""
    return list(RunEvent.objects.filter(session_id=session_id, seq__gt=after_seq)
                .order_by("seq")[:limit])


SIDEBAR_RECENT = 30
"""Recent (unpinned) sessions listed in the sidebar."""


class Sidebar:
    """The session sidebar of ``user``: ``pinned`` and ``recent`` (unpinned, newest activity
    first, at most SIDEBAR_RECENT) top-level, unarchived sessions, titles filtered by
    ``query``. Lazy: nothing is queried until a template reads a list, so partial renders
    that do not show the sidebar cost no query."""

    def __init__(self, *, user, query: str = ""):
        self.user, self.query = user, query

    @cached_property
    def pinned(self) -> list[Session]:
        return list(session_list(user=self.user, query=self.query).filter(pinned=True))

    @cached_property
    def recent(self) -> list[Session]:
        return list(session_list(user=self.user, query=self.query)
                    .filter(pinned=False)[:SIDEBAR_RECENT])
