"""Inbound webhooks: signed deliveries that each become an unattended turn of one session."""

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        # sessions/ builds a webhook turn's user message through this hook (arrows point down).
        from sessions.hooks import deletion_register
        from sessions.inputs import input_builder_register
        from webhooks.services import webhook_turn_input, webhooks_targeting

        input_builder_register("webhook", webhook_turn_input)
        # A deleted session's webhooks go with it (the row cascades); the confirmation
        # page names them.
        deletion_register(describe=webhooks_targeting)
