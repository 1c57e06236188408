"""Approvals: the durable human gate for tool calls the policy marked "ask"."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"
