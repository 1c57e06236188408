"""Schedule selectors: always scoped to the acting user; another user's schedule is a 404."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from schedules.models import Schedule, ScheduleRun


def schedule_list(*, user) -> QuerySet[Schedule]:
    """The user's schedules, newest first."""
    if not user.is_authenticated:
        return Schedule.objects.none()
    return (Schedule.objects.filter(owner=user)
            .select_related("session", "periodic_task").order_by("-id"))


def schedule_get(*, user, schedule_id: int) -> Schedule:
    """One of the user's schedules; Http404 for anyone else's or a missing one."""
    try:
        return schedule_list(user=user).get(pk=schedule_id)
    except (Schedule.DoesNotExist, ValueError, TypeError):
        raise Http404("No such schedule") from None


def schedule_runs(*, schedule: Schedule, limit: int = 100) -> QuerySet[ScheduleRun]:
    """The schedule's latest ``limit`` runs, newest first, with their turns."""
    return (ScheduleRun.objects.filter(schedule=schedule)
            .select_related("turn", "session").order_by("-id")[:limit])
