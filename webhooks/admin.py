"""Webhooks in the Django admin (the secret is not listed)."""

from django.contrib import admin

from webhooks.models import Webhook, WebhookDelivery


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "session", "enabled", "created_at", "rotated_at")
    exclude = ("secret",)
    raw_id_fields = ("session",)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("id", "webhook", "delivery_id", "outcome", "status_code", "reason",
                    "received_at")
    raw_id_fields = ("webhook", "turn")
