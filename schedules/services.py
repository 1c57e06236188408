"""Schedule services: create, pause, resume, delete, fire; and the scheduled turn's input.

A schedule's timing is a django-celery-beat PeriodicTask (task ``schedules.fire``, args
``[schedule_id]``) on a CrontabSchedule or IntervalSchedule; beat's DatabaseScheduler fires
it and ``schedule_fire`` turns each firing into a ScheduleRun and a Turn with
origin="schedule" through sessions.services.turn_start, so it runs through the same runner,
policy and budgets as a person's turn, unattended (an "ask" is a deny).
PeriodicTask rows are changed with ``save()``/``delete()``, never ``QuerySet.update``: beat
notices changes through the signals those fire (django-celery-beat's PeriodicTasks.changed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from celery.schedules import crontab
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from agents.cache import register_stable_prefix
from agents.messages import Message as AgentMessage
from agents.schedule_rules import (CronFields, ScheduleError, cron_describe, cron_next_runs,
                                   cron_parse, interval_check, interval_describe,
                                   interval_next_runs)
from agents.unattended import schedule_message
from schedules.models import Schedule, ScheduleRun
from sessions.models import Session, Turn, UsageRecord
from sessions.services import session_create, turn_start

FIRE_TASK = "schedules.fire"
MAX_PROMPT_CHARS = 20_000
"""A scheduled prompt's cap: a fifth of a chat message's (100,000), leaving room for the
scaffold and tail; a longer brief belongs in a workspace file the prompt names."""


@dataclass(frozen=True)
class Timing:
    """What a schedule's timing means: ``description`` in English and the ``next_runs``
    (aware UTC datetimes) beat will fire at."""

    description: str
    next_runs: list[datetime]


def beat_cron(expression: str) -> CronFields:
    """The fields of ``expression`` when the beat can fire it: croniter's rules
    (agents/schedule_rules.py: five fields, in range, a date that exists) and celery's
    crontab, which the DatabaseScheduler builds from the stored row. croniter accepts forms
    celery refuses (``L``, ``W``, ``#``, ``?``, weekday 7); beat would skip such a row
    silently, so it is refused here with ScheduleError, like a bad field."""
    fields = cron_parse(expression)
    try:
        crontab(minute=fields.minute, hour=fields.hour, day_of_month=fields.day_of_month,
                month_of_year=fields.month_of_year, day_of_week=fields.day_of_week)
    except ValueError:
        raise ScheduleError(
            f"'{fields.expression}' cannot be run by the scheduler: use numbers or names, "
            "ranges (1-5), lists (1,15) and steps (*/15) in each field; L, W, #, ? and "
            "weekday 7 are not supported (Sunday is 0).") from None
    return fields


def timing_preview(*, kind: str, cron_expression: str = "", interval_seconds: int | None = None,
                   start: datetime | None = None, count: int = 5) -> Timing:
    """Description and next ``count`` runs of a timing (raises ScheduleError with the
    readable reason: a stored row that never fires gets one too, never a crash).
    ``start``: when an interval was last run or created (default now)."""
    now = timezone.now()
    if kind == Schedule.Kind.CRON:
        cron_expression = beat_cron(cron_expression).expression
        return Timing(cron_describe(cron_expression),
                      cron_next_runs(cron_expression, after=now, count=count))
    if kind == Schedule.Kind.INTERVAL:
        seconds = interval_check(interval_seconds if interval_seconds is not None else -1)
        base = start or now
        runs = [t for t in interval_next_runs(seconds, start=base, count=count * 2) if t > now]
        if len(runs) < count:
            runs = interval_next_runs(seconds, start=now, count=count)
        return Timing(interval_describe(seconds), runs[:count])
    raise ScheduleError("Choose a cron expression or an interval.")


def schedule_timing(schedule: Schedule, *, count: int = 5) -> Timing:
    """``timing_preview`` for a stored schedule (an interval counts from its last run)."""
    last = schedule.periodic_task.last_run_at if schedule.periodic_task_id else None
    return timing_preview(kind=schedule.kind, cron_expression=schedule.cron_expression,
                          interval_seconds=schedule.interval_seconds,
                          start=last or schedule.created_at, count=count)


def _check(*, user, name: str, prompt: str, kind: str, cron_expression: str,
           interval_seconds: int | None, target: str, session: Session | None) -> dict:
    """Validated fields or ValidationError keyed by field name (what the form shows)."""
    errors: dict[str, str] = {}
    name = (name or "").strip()
    if not name:
        errors["name"] = "Give the schedule a name."
    elif len(name) > 100:
        errors["name"] = "A name can be at most 100 characters."
    prompt = (prompt or "").strip()
    if not prompt:
        errors["prompt"] = "The prompt is empty: say what the agent should do on each run."
    elif len(prompt) > MAX_PROMPT_CHARS:
        errors["prompt"] = (f"The prompt is {len(prompt):,} characters; the limit is "
                            f"{MAX_PROMPT_CHARS:,}. Put long instructions in a workspace "
                            "file and name it in the prompt.")
    try:
        if kind == Schedule.Kind.CRON:
            cron_expression = beat_cron(cron_expression).expression
            interval_seconds = None
        elif kind == Schedule.Kind.INTERVAL:
            interval_seconds = interval_check(interval_seconds if interval_seconds is not None
                                              else -1)
            cron_expression = ""
        else:
            errors["kind"] = "Choose a cron expression or an interval."
    except ScheduleError as exc:
        errors["cron_expression" if kind == Schedule.Kind.CRON else "interval_seconds"] = str(exc)
    if target == Schedule.Target.SESSION:
        if session is None or session.owner_id != user.pk:
            errors["session"] = "Choose one of your sessions for the runs to append to."
    elif target == Schedule.Target.NEW:
        session = None
    else:
        errors["target"] = "Choose where the runs go."
    if errors:
        raise ValidationError(errors)
    return {"name": name, "prompt": prompt, "kind": kind, "cron_expression": cron_expression,
            "interval_seconds": interval_seconds, "target": target, "session": session}


def _beat_timing(fields: dict) -> dict:
    """The django-celery-beat schedule row for ``fields`` (shared rows, get_or_create)."""
    if fields["kind"] == Schedule.Kind.CRON:
        cron = beat_cron(fields["cron_expression"])
        row, _ = CrontabSchedule.objects.get_or_create(
            minute=cron.minute, hour=cron.hour, day_of_month=cron.day_of_month,
            month_of_year=cron.month_of_year, day_of_week=cron.day_of_week,
            timezone=settings.TIME_ZONE)
        return {"crontab": row}
    interval, _ = IntervalSchedule.objects.get_or_create(
        every=fields["interval_seconds"], period=IntervalSchedule.SECONDS)
    return {"interval": interval}


def schedule_create(*, user, name: str, prompt: str, kind: str, cron_expression: str = "",
                    interval_seconds: int | None = None, target: str,
                    session: Session | None = None) -> Schedule:
    """Store a schedule and its beat row in one transaction (enabled at once). Raises
    ValidationError keyed by field (bad cron, interval out of bounds, a session that is not
    the user's, a duplicate name); nothing is stored then."""
    fields = _check(user=user, name=name, prompt=prompt, kind=kind,
                    cron_expression=cron_expression, interval_seconds=interval_seconds,
                    target=target, session=session)
    try:
        with transaction.atomic():
            schedule = Schedule.objects.create(owner=user, **fields)
            task = PeriodicTask.objects.create(
                name=f"hermes-schedule-{schedule.pk}", task=FIRE_TASK,
                args=json.dumps([schedule.pk]), enabled=True,
                description=f"Hermes schedule {schedule.name!r} of {user}",
                **_beat_timing(fields))
            schedule.periodic_task = task
            schedule.save(update_fields=["periodic_task"])
    except IntegrityError:
        raise ValidationError({"name": "You already have a schedule with this name."}) from None
    return schedule


def schedule_set_enabled(*, schedule: Schedule, enabled: bool, reason: str = "") -> Schedule:
    """Pause (``enabled=False``) or resume. A resume of a schedule whose target session is
    gone is refused with ValidationError."""
    if (enabled and schedule.target == Schedule.Target.SESSION
            and schedule.session_id is None):
        raise ValidationError("The session this schedule appended to is gone; delete the "
                              "schedule and create a new one.")
    with transaction.atomic():
        task = PeriodicTask.objects.select_for_update().get(pk=schedule.periodic_task_id)
        task.enabled = enabled
        task.save()  # save(), not update(): beat watches the change signal
        schedule.paused_reason = "" if enabled else reason
        schedule.save(update_fields=["paused_reason"])
    schedule.periodic_task = task
    return schedule


def schedule_delete(*, schedule: Schedule) -> None:
    """Delete the schedule, its beat row and its run history (the sessions and turns the
    runs made are kept: they are the user's conversation)."""
    with transaction.atomic():
        task_id = schedule.periodic_task_id
        schedule.delete()
        for task in PeriodicTask.objects.filter(pk=task_id):
            task.delete()  # delete(), not a queryset delete: beat watches the signal


SESSION_DELETED = "its target session was deleted"
"""The paused reason a schedule shows once the session it appended to was deleted."""


def schedules_targeting(session: Session) -> list[str]:
    """One sentence per schedule that appends to ``session``, for the session's delete
    confirmation (sessions/hooks.py DeletionHook.describe)."""
    return [f"Schedule “{name}” appends to this session: it will be paused (its runs would "
            "have nowhere to go)."
            for name in Schedule.objects.filter(session=session, target=Schedule.Target.SESSION)
            .order_by("name").values_list("name", flat=True)]


def schedules_pause_for_deleted(session: Session) -> None:
    """Pause every schedule that appends to ``session`` with SESSION_DELETED as its reason,
    inside the session's delete transaction (DeletionHook.detach); its ``session`` is then
    set NULL by the delete, so it cannot be resumed into another conversation."""
    for schedule in (Schedule.objects.select_for_update(of=("self",))
                     .select_related("periodic_task")
                     .filter(session=session, target=Schedule.Target.SESSION)):
        if schedule.periodic_task_id is not None:
            schedule_set_enabled(schedule=schedule, enabled=False, reason=SESSION_DELETED)


def schedule_fire(*, schedule_id: int, trigger: str = "beat") -> ScheduleRun | None:
    """One firing: record a ScheduleRun and queue an unattended Turn (origin="schedule")
    built from the registered scaffold plus this run's tail. Returns the run, or None when
    the schedule is gone or (for beat) paused since beat read it.

    Skipped (no turn) when the previous run's turn has not even started, so a slow session
    never accumulates a backlog of identical prompts. A target session that is gone marks the
    run failed and pauses the schedule with the reason. All in one transaction; the turn's
    task is enqueued on commit.
    """
    with transaction.atomic():
        # of=self: PostgreSQL refuses FOR UPDATE on the nullable side of the outer joins.
        schedule = (Schedule.objects.select_for_update(of=("self",))
                    .select_related("owner", "session", "periodic_task")
                    .filter(pk=schedule_id).first())
        if schedule is None or (trigger == "beat" and not schedule.enabled):
            return None
        number = schedule.run_count + 1
        Schedule.objects.filter(pk=schedule.pk).update(run_count=number)
        run = ScheduleRun(schedule=schedule, number=number, trigger=trigger)
        if ScheduleRun.objects.filter(schedule=schedule, turn__status=Turn.Status.QUEUED).exists():
            run.status, run.error = ScheduleRun.Status.SKIPPED, (
                "the previous run has not started yet (its session is busy)")
            run.save()
            return run
        if schedule.target == Schedule.Target.SESSION:
            session = schedule.session
            if session is None or session.owner_id != schedule.owner_id:
                run.status = ScheduleRun.Status.FAILED
                run.error = "the target session no longer exists; the schedule was paused"
                run.save()
                schedule_set_enabled(schedule=schedule, enabled=False,
                                     reason=SESSION_DELETED)
                return run
        else:
            session = session_create(user=schedule.owner,
                                     title=f"{schedule.name} · run {number}"[:200])
        built = schedule_message(name=schedule.name, prompt=schedule.prompt, run_number=number,
                                 fired_at=timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
        run.session, run.message_text, run.stable_chars = session, built.text, built.stable_len
        try:
            run.turn = turn_start(session=session, user=schedule.owner, text=built.display,
                                  origin="schedule")
        except ValidationError as exc:
            run.status, run.error = ScheduleRun.Status.FAILED, "; ".join(exc.messages)
        run.save()
    return run


def schedule_turn_input(turn: Turn) -> AgentMessage | None:
    """The user message of a scheduled turn (sessions/inputs.py hook): the run's stored
    text, its scaffold re-registered in THIS process's registry (the worker that plans the
    request), and its stored length as ``stable_prefix_len`` so the split survives
    restarts and eviction. None when the turn has no run (then its input text is sent)."""
    run = ScheduleRun.objects.filter(turn=turn).first()
    if run is None or not run.message_text:
        return None
    if run.stable_chars:
        register_stable_prefix(run.message_text[:run.stable_chars])
    return AgentMessage(role="user", content=turn.input_text, sent_content=run.message_text,
                        stable_prefix_len=run.stable_chars)


def schedule_session_label(session: Session) -> str | None:
    """The system prompt's session label for a session a schedule created for one run
    (sessions/inputs.py hook): the same for every run of that schedule, so the prompt and
    the registered scaffold after it are cache reads from the second run on. None for any
    other session (which keeps its id)."""
    run = (ScheduleRun.objects.filter(session=session, schedule__target=Schedule.Target.NEW)
           .values_list("schedule_id", flat=True).first())
    return f"a run of schedule {run} (a new session per run)" if run else None


def run_cost(run: ScheduleRun) -> Decimal | None:
    """USD spent by the run's turn (None: no turn or an unknown-cost call among them)."""
    if run.turn_id is None:
        return None
    records = UsageRecord.objects.filter(turn_id=run.turn_id)
    if records.filter(cost_usd__isnull=True).exists():
        return None
    return records.aggregate(total=Sum("cost_usd"))["total"] or Decimal("0")


def run_status(run: ScheduleRun) -> tuple[str, str, str]:
    """(status code, its label, detail) to show: the turn's status and error once a turn
    exists, else the run's own (failed to start, skipped) and its reason."""
    if run.turn_id is not None and run.turn is not None:
        status = run.turn.status
        return status, Turn.Status(status).label, run.turn.error
    return run.status, ScheduleRun.Status(run.status).label, run.error
