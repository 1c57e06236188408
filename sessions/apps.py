"""The agent-sessions app. Its label is "agent_sessions" because django.contrib.sessions
already owns "sessions" (style.md §2.3): set before the first migration, never renamed."""

from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # HERMES_YOLO was read once by settings at process start; freeze it before any model
        # output can exist (seed, "The one-line attack"). Nothing later can turn it on.
        from django.conf import settings

        from agents.policy import freeze_bypass

        freeze_bypass(settings.HERMES["YOLO"])

        from sessions.events import switch_interval_apply

        switch_interval_apply(settings.HERMES.get("SWITCH_INTERVAL_MS", 0))

        import sessions.signals  # noqa: F401  (connects the socket-closing receivers)
        import sessions.tasks  # noqa: F401  (registers the turn resumer, sessions/waits.py)
        import sessions.delegation  # noqa: F401  (the AWAITING_CHILDREN wait, child ends)
        from sessions.clarify import CLARIFY_WAIT
        from sessions.waits import wait_register

        wait_register(CLARIFY_WAIT)

        # A breakpoint limit saved or deleted in this process (the admin) binds at once.
        from django.db.models.signals import post_delete, post_save

        from sessions.models import BreakpointLimit
        from sessions.provider_state import BREAKPOINT_LIMITS

        for signal in (post_save, post_delete):
            signal.connect(BREAKPOINT_LIMITS.clear, sender=BreakpointLimit, weak=False,
                           dispatch_uid=f"breakpoint-limits-clear-{signal is post_save}")
