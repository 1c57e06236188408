"""Schedules in the Django admin (read-mostly; the beat rows have django-celery-beat's own)."""

from django.contrib import admin

from schedules.models import Schedule, ScheduleRun


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "kind", "cron_expression", "interval_seconds",
                    "target", "session", "run_count")
    raw_id_fields = ("owner", "session", "periodic_task")


@admin.register(ScheduleRun)
class ScheduleRunAdmin(admin.ModelAdmin):
    list_display = ("id", "schedule", "number", "trigger", "status", "session", "turn",
                    "created_at")
    raw_id_fields = ("schedule", "session", "turn")
