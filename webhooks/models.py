"""Rows for inbound webhooks: Webhook (a session's signed URL) and WebhookDelivery (the log).

The secret is stored as given to the owner: an HMAC can only be checked with the secret
itself (agents/webhook_signature.py). It is shown once, when created or rotated.
"""

from __future__ import annotations

from django.db import models

from sessions.visible import VisibleCharField


class Webhook(models.Model):
    """A per-session inbound URL ``/hooks/<token>/``; each accepted delivery becomes a turn
    built from ``instructions`` (the registered scaffold) and the payload (the tail)."""

    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE,
                                related_name="webhooks")
    name = VisibleCharField(max_length=100)  # stored visible-safe (sessions/visible.py)
    instructions = models.TextField(blank=True, default="",
                                    help_text="What the agent should do with each delivery.")
    token = models.CharField(max_length=64, unique=True, help_text="The URL's path segment.")
    secret = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"webhook #{self.pk} {self.name}"


class WebhookDelivery(models.Model):
    """One inbound request's outcome. An accepted delivery links its turn; a rejected one
    keeps only the reason, status code, size and delivery id header (never the body): what
    was refused stores nothing else. Accepted rows are unique per webhook both on the
    delivery id (the sender's retries) and on the replay key (a replay with a changed,
    unsigned delivery id); rows are never pruned, so both memories outlast the replay
    window (keep them at least WEBHOOKS["REPLAY_WINDOW_SECONDS"] if pruning is added)."""

    class Outcome(models.TextChoices):
        ACCEPTED = "accepted", "Accepted"
        DUPLICATE = "duplicate", "Duplicate (already accepted)"
        REJECTED = "rejected", "Rejected"
        RATE_LIMITED = "rate_limited", "Rate limited"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.CharField(max_length=100, blank=True, default="")
    replay_key = models.CharField(
        max_length=64, blank=True, default="",
        help_text="SHA-256 of the signed bytes (timestamp.body): one accepted row per key, so "
                  "a captured request re-sent with another delivery id runs nothing "
                  "(agents/webhook_signature.py::replay_key). Empty on rows refused before "
                  "the signature was checked, and on rows from before the key existed.")
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    status_code = models.IntegerField()
    reason = models.CharField(max_length=200, blank=True, default="")
    body_bytes = models.IntegerField(default=0)
    turn = models.OneToOneField("agent_sessions.Turn", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="webhook_delivery")
    message_text = models.TextField(blank=True, default="",
                                    help_text="The exact text sent (scaffold + payload).")
    stable_chars = models.IntegerField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(
            fields=["webhook", "delivery_id"], condition=models.Q(outcome="accepted"),
            name="uniq_accepted_delivery"),
            models.UniqueConstraint(
                fields=["webhook", "replay_key"],
                condition=models.Q(outcome="accepted") & ~models.Q(replay_key=""),
                name="uniq_accepted_replay_key")]
        indexes = [models.Index(fields=["webhook", "-id"])]
        # Django's default plural adds an "s": "webhook deliverys" in the admin.
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"delivery {self.delivery_id} ({self.outcome})"
