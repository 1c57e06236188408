"""Scheduled agents: prompts that run unattended on django-celery-beat's schedules."""

from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "schedules"
    verbose_name = "Schedules"

    def ready(self) -> None:
        # sessions/ builds a scheduled turn's user message through this hook, never by
        # importing schedules/ (arrows point down).
        from schedules.services import (schedule_session_label, schedule_turn_input,
                                        schedules_pause_for_deleted, schedules_targeting)
        from sessions.hooks import deletion_register
        from sessions.inputs import input_builder_register, prompt_labeler_register

        input_builder_register("schedule", schedule_turn_input)
        prompt_labeler_register(schedule_session_label)
        # A deleted session's schedules are paused with the reason, not left to fail.
        deletion_register(describe=schedules_targeting, detach=schedules_pause_for_deleted)
