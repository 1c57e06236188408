"""Scheduled agents: prompts that run unattended on django-celery-beat's schedules."""

from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "schedules"
    verbose_name = "Schedules"

    def ready(self) -> None:
        # sessions/ builds a scheduled turn's user message through this hook, never by
        # importing schedules/ (arrows point down).
        from schedules.services import schedule_session_label, schedule_turn_input
        from sessions.inputs import input_builder_register, prompt_labeler_register

        input_builder_register("schedule", schedule_turn_input)
        prompt_labeler_register(schedule_session_label)
