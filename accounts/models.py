"""Team and Membership. A user's team admins may review that user's sessions and approvals."""

from django.conf import settings
from django.db import models

from agents.command_rules import DEFAULT_ADMIN_ONLY_CLASSES


def default_admin_only_risk_classes() -> list[str]:
    """A new team's admin-only classes: the destructive ones (issue 8 item 5: by default a
    destructive request needs an admin other than the requester)."""
    return list(DEFAULT_ADMIN_ONLY_CLASSES)


class Team(models.Model):
    """A group of users; its admins review approvals raised by its members."""

    name = models.CharField(max_length=100, unique=True)
    # Risk classes (agents/policy.py Decision.risk_class) that only a team admin may approve,
    # so a member cannot approve their own request for them.
    # Team admins edit it on the team settings page (accounts.views.team_settings_view).
    admin_only_risk_classes = models.JSONField(default=default_admin_only_risk_classes,
                                               blank=True)
    deny_rules = models.JSONField(default=list, blank=True,
                                  help_text="Command patterns denied for every member.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """One user's place in one team."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="uniq_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
