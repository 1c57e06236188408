"""Services mode for real: `celery -A hermes_web beat` (the Procfile's process, with
django-celery-beat's DatabaseScheduler) and a `celery -A hermes_web worker` process on Redis
and PostgreSQL. A schedule created through the service fires on beat into an existing
session: the run is appended to the same conversation as an unattended turn and completes;
a paused schedule does not fire."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from schedules.models import ScheduleRun
from schedules.services import schedule_create, schedule_set_enabled
from sessions.models import Message, Turn
from sessions.services import session_create, turn_start
from tests.reliability.conftest import PYTHON, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]


def _due_soon(schedule) -> None:
    """Make an interval schedule due in ~2 s instead of a minute (beat reads last_run_at)."""
    task = schedule.periodic_task
    task.last_run_at = timezone.now() - timedelta(seconds=58)
    task.save()


def test_a_schedule_fires_on_beat_into_an_existing_session(make_user, service_env, procs,
                                                           celery_worker_proc):
    user = make_user("sam")
    session = session_create(user=user)
    first = turn_start(session=session, user=user, text="hello before the schedule")
    worker = celery_worker_proc("worker-a")
    wait_for(lambda: Turn.objects.get(pk=first.pk).status == Turn.Status.COMPLETED,
             timeout=60, what="the person's turn")
    schedule = schedule_create(user=user, name="minutely", prompt="Report the time.",
                               kind="interval", interval_seconds=60, target="session",
                               session=session)
    paused = schedule_create(user=user, name="paused", prompt="Never runs.", kind="interval",
                             interval_seconds=60, target="session", session=session)
    _due_soon(schedule)
    _due_soon(paused)
    schedule_set_enabled(schedule=paused, enabled=False)
    beat = procs("beat", [str(PYTHON), "-m", "celery", "-A", "hermes_web", "beat", "-l", "info",
                          "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler",
                          "--max-interval", "1"], service_env)

    def completed_run():
        run = ScheduleRun.objects.filter(schedule=schedule).select_related("turn").first()
        return run if run and run.turn and run.turn.status == Turn.Status.COMPLETED else None

    try:
        run = wait_for(completed_run, timeout=90, what="the beat run to complete")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nbeat log:\n{beat.output()[-2000:]}\n"
                             f"worker log:\n{worker.output()[-5000:]}") from None
    assert "schedules.fire" in beat.output()
    assert run.trigger == "beat" and run.session_id == session.pk
    assert run.turn.origin == "schedule"
    users = list(Message.objects.filter(session=session, role="user").order_by("id"))
    assert users[0].content == "hello before the schedule"
    assert users[1].content.startswith("[schedule: minutely · run 1]")
    assert users[1].stable_prefix_chars and users[1].sent_content.startswith("<scheduled-run")
    time.sleep(3)  # several beat ticks past the paused schedule's due time
    assert not ScheduleRun.objects.filter(schedule=paused).exists()
