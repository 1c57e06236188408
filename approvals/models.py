"""ApprovalRequest (one pending human decision on one tool call), ApprovalRule (an "always"
grant admins can list, revoke and count hits for) and AuditEntry (every decision and bypass
toggle). No worker waits on a person: the turn is saved as awaiting approval and the decision
enqueues the resume (DESIGN.md §4)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from sessions.visible import visible_line


class ApprovalRequest(models.Model):
    """A tool call waiting for a human. State: pending → approved / denied / expired /
    cancelled; the first decision wins (a conditional UPDATE on state=pending)."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        DENIED = "denied", "Denied"
        EXPIRED = "expired", "Expired"
        CANCELLED = "cancelled", "Cancelled"

    class Scope(models.TextChoices):
        ONCE = "once", "Once"
        SESSION = "session", "For this session"
        ALWAYS = "always", "Always"

    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE,
                                related_name="approval_requests")
    turn = models.ForeignKey("agent_sessions.Turn", null=True, on_delete=models.SET_NULL,
                             related_name="approval_requests")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    command = models.TextField(blank=True, default="", help_text="Command or paths, as shown.")
    workspace = models.CharField(max_length=500, blank=True, default="")
    reason = models.TextField(blank=True, default="", help_text="Why the policy flagged it.")
    rule = models.CharField(max_length=50, blank=True, default="")
    risk_class = models.CharField(max_length=50, blank=True, default="",
                                  help_text="The most severe of risk_classes.")
    risk_classes = models.JSONField(default=list, blank=True,
                                    help_text="Every risk class of every finding.")
    normalized = models.TextField(blank=True, default="")
    allow_always = models.BooleanField(default=True,
                                       help_text="False for protected instruction files.")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                  related_name="approval_requests")
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    scope = models.CharField(max_length=20, choices=Scope.choices, blank=True, default="")
    decider = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="approval_decisions")
    decision_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["state", "expires_at"])]

    def __str__(self) -> str:
        return f"approval #{self.pk} {self.tool_name} ({self.state})"


class ApprovalRule(models.Model):
    """An "always" grant: a normalised command pattern allowed for a user (or a whole team).
    Admins list, revoke and see hit counts."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="approval_rules")
    team = models.ForeignKey("accounts.Team", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="approval_rules")
    tool_name = models.CharField(max_length=200)
    pattern = models.TextField(help_text="Normalised command (or path) this rule allows.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="+")
    hit_count = models.IntegerField(default=0)
    revoked = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        # Shown wherever a rule is named (the admin's titles and breadcrumbs): the pattern
        # is a command, so its hidden characters are shown as escapes (sessions/visible.py).
        return f"rule #{self.pk} {self.tool_name}: {visible_line(self.pattern, 40)}"


class AuditEntry(models.Model):
    """An immutable record of a security-relevant action (decision, bypass toggle, rule
    revocation)."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                              related_name="+")
    action = models.CharField(max_length=50)
    session = models.ForeignKey("agent_sessions.Session", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    approval = models.ForeignKey(ApprovalRequest, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="audit_entries")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        # Django's default plural adds an "s": "audit entrys" in the admin.
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_id} at {self.created_at:%Y-%m-%d %H:%M}"
