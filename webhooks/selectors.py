"""Webhook selectors: scoped to the session owner; anyone else's webhook is a 404."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from webhooks.models import Webhook, WebhookDelivery


def webhook_list(*, user) -> QuerySet[Webhook]:
    """Webhooks on the user's own sessions, newest first."""
    if not user.is_authenticated:
        return Webhook.objects.none()
    return Webhook.objects.filter(session__owner=user).select_related("session")


def webhook_get(*, user, webhook_id: int) -> Webhook:
    """One webhook on one of the user's sessions; Http404 otherwise."""
    try:
        return webhook_list(user=user).get(pk=webhook_id)
    except (Webhook.DoesNotExist, ValueError, TypeError):
        raise Http404("No such webhook") from None


def webhook_deliveries(*, webhook: Webhook, limit: int = 100) -> QuerySet[WebhookDelivery]:
    """The webhook's latest ``limit`` deliveries with their turns, newest first."""
    return (WebhookDelivery.objects.filter(webhook=webhook).select_related("turn")
            .order_by("-id")[:limit])
