"""The task beat fires for every schedule (django-celery-beat PeriodicTask ``schedules.fire``)."""

from __future__ import annotations

from celery import shared_task

from schedules.services import schedule_fire


@shared_task(name="schedules.fire", ignore_result=True)
def schedule_fire_task(schedule_id: int) -> None:
    """Fire schedule ``schedule_id`` (a run and a queued unattended turn, or nothing if it
    was paused or deleted since beat read it)."""
    schedule_fire(schedule_id=schedule_id, trigger="beat")
