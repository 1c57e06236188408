"""Approvals: the durable human gate for tool calls the policy marked "ask"."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # sessions/ resumes and cancels approval waits through this hook, never by
        # importing approvals/ (issue 11: arrows point down).
        from approvals.services import APPROVAL_WAIT
        from sessions.waits import wait_register

        wait_register(APPROVAL_WAIT)
