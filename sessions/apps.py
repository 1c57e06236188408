"""The agent-sessions app. Its label is "agent_sessions" because django.contrib.sessions
already owns "sessions" (style.md §2.3): set before the first migration, never renamed."""

from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"
