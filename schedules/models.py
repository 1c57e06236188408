"""Rows for scheduled agents: Schedule (what runs, where, when) and ScheduleRun (each firing).

The timing itself lives in django-celery-beat's rows (PeriodicTask + CrontabSchedule or
IntervalSchedule), which its DatabaseScheduler reads and fires in embedded and services mode
alike (hermes_web/embedded.py, Procfile). A Schedule owns exactly one PeriodicTask; the
PeriodicTask's ``enabled`` is the pause switch. Logic is in schedules/services.py.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions.visible import VisibleCharField


class Schedule(models.Model):
    """A prompt run unattended on a cron expression or an interval, into one existing
    session of the owner's (appended to that conversation) or into a new session per run."""

    class Kind(models.TextChoices):
        CRON = "cron", "Cron expression"
        INTERVAL = "interval", "Interval"

    class Target(models.TextChoices):
        SESSION = "session", "An existing session (same conversation)"
        NEW = "new", "A new session per run"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="schedules")
    name = VisibleCharField(max_length=100)  # stored visible-safe (sessions/visible.py)
    prompt = models.TextField()
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.CRON)
    cron_expression = models.CharField(max_length=100, blank=True, default="")
    interval_seconds = models.IntegerField(null=True, blank=True)
    target = models.CharField(max_length=10, choices=Target.choices, default=Target.SESSION)
    session = models.ForeignKey("agent_sessions.Session", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="schedules",
                                help_text="The conversation runs append to (target=session).")
    periodic_task = models.OneToOneField("django_celery_beat.PeriodicTask", null=True,
                                         blank=True, on_delete=models.SET_NULL,
                                         related_name="hermes_schedule")
    run_count = models.IntegerField(default=0)
    paused_reason = models.CharField(max_length=200, blank=True, default="",
                                     help_text="Why the schedule paused itself (its target "
                                               "session is gone), shown on its page.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"],
                                               name="uniq_schedule_name_per_owner")]

    def __str__(self) -> str:
        return f"schedule #{self.pk} {self.name}"

    @property
    def enabled(self) -> bool:
        return bool(self.periodic_task_id and self.periodic_task.enabled)


class ScheduleRun(models.Model):
    """One firing of a schedule (by beat or "run now"). While a turn exists, the turn's
    status is the run's status; ``status`` here records what happened before a turn could
    exist (failed to start, skipped because the previous run had not started yet)."""

    class Status(models.TextChoices):
        STARTED = "started", "Started"
        FAILED = "failed", "Failed to start"
        SKIPPED = "skipped", "Skipped"

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    number = models.IntegerField(help_text="1-based run number of the schedule.")
    trigger = models.CharField(max_length=10, default="beat", help_text="'beat' or 'manual'.")
    session = models.ForeignKey("agent_sessions.Session", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    turn = models.OneToOneField("agent_sessions.Turn", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="schedule_run")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.STARTED)
    error = models.TextField(blank=True, default="")
    message_text = models.TextField(blank=True, default="",
                                    help_text="The exact text sent (scaffold + tail).")
    stable_chars = models.IntegerField(null=True, blank=True,
                                       help_text="Chars of message_text that are the "
                                                 "registered scaffold.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"run {self.number} of schedule {self.schedule_id}"
