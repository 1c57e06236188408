"""Team and Membership (a user's team admins may review that user's sessions and approvals),
and money: Budget (spend caps), SpendReservation (calls in flight), RateOverride."""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from accounts.money import usd
from agents.pricing import BUCKETS, override_validate

from agents.policy.command_rules import DEFAULT_ADMIN_ONLY_CLASSES
from sessions.visible import VisibleCharField


def default_admin_only_risk_classes() -> list[str]:
    """A new team's admin-only classes: the destructive ones (issue 8 item 5: by default a
    destructive request needs an admin other than the requester)."""
    return list(DEFAULT_ADMIN_ONLY_CLASSES)


class Team(models.Model):
    """A group of users; its admins review approvals raised by its members."""

    # Hidden and control characters stored as visible escapes (sessions/visible.py).
    # Unique regardless of case too (the Meta constraint): "demo" and "DEMO" side by side on
    # /people/, in menus and in audit lines cannot be told apart by the people reading them.
    name = VisibleCharField(max_length=100, unique=True)
    # Risk classes (agents/policy/__init__.py Decision.risk_class) that only a team admin may approve,
    # so a member cannot approve their own request for them.
    # Team admins edit it on the team settings page (accounts.views.team_settings_view).
    admin_only_risk_classes = models.JSONField(default=default_admin_only_risk_classes,
                                               blank=True)
    deny_rules = models.JSONField(default=list, blank=True,
                                  help_text="Command patterns denied for every member.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(
            Lower("name"), name="uniq_team_name_ci",
            violation_error_message="A team with this name exists already (names are "
                                    "compared without regard to case).")]

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


class TeamInvitation(models.Model):
    """A team admin's offer of a place in a team, waiting for the invited user's yes
    (accounts/membership.py). Until accepted it grants nothing: a team admin reads the
    team's sessions and decides its approvals, so nobody joins a team, and puts their new
    sessions under its admins, without agreeing to it (a second user's report)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="team_invitations")
    role = models.CharField(max_length=10, choices=Membership.Role.choices,
                            default=Membership.Role.MEMBER)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"],
                                               name="uniq_team_invitation")]

    def __str__(self) -> str:
        return f"{self.user} invited to {self.team} ({self.role})"


class Budget(models.Model):
    """A USD spend cap for one user, one team or one session, per UTC day or month
    (agents/spend_caps.py holds the arithmetic and the overshoot bound). Set by team admins
    on /spend/ and by staff in the Django admin; every change is an AuditEntry."""

    class Scope(models.TextChoices):
        USER = "user", "User"
        TEAM = "team", "Team"
        SESSION = "session", "Session"

    class Period(models.TextChoices):
        DAY = "day", "Per day"
        MONTH = "month", "Per month"

    class UnknownPolicy(models.TextChoices):
        BLOCK = "block", "Block calls of unknown cost"
        ALLOW = "allow", "Allow and flag calls of unknown cost"

    scope = models.CharField(max_length=10, choices=Scope.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="budgets")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="budgets")
    session = models.ForeignKey("agent_sessions.Session", null=True, blank=True,
                                on_delete=models.CASCADE, related_name="budgets")
    period = models.CharField(max_length=10, choices=Period.choices, default=Period.DAY)
    limit_usd = models.DecimalField(max_digits=12, decimal_places=4,
                                    validators=[MinValueValidator(Decimal("0.01"))])
    unknown_policy = models.CharField(max_length=10, choices=UnknownPolicy.choices,
                                      default=UnknownPolicy.BLOCK)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # One cap per owner and period. Written as one partial unique index per scope,
            # not one index with nulls_distinct=False: SQLite has no NULLS NOT DISTINCT, so
            # Django skipped that constraint there (models.W047) and embedded mode had no
            # uniqueness at all. With budget_scope_matches_owner below, exactly one owner
            # column is set for each scope, so these three say the same on both databases.
            *[models.UniqueConstraint(fields=[owner, "period"], condition=models.Q(scope=owner),
                                      name=f"uniq_budget_{owner}_period")
              for owner in ("user", "team", "session")],
            models.CheckConstraint(
                condition=(models.Q(scope="user", user__isnull=False, team__isnull=True,
                                    session__isnull=True)
                           | models.Q(scope="team", team__isnull=False, user__isnull=True,
                                      session__isnull=True)
                           | models.Q(scope="session", session__isnull=False,
                                      user__isnull=True, team__isnull=True)),
                name="budget_scope_matches_owner"),
            models.CheckConstraint(condition=models.Q(limit_usd__gt=0),
                                   name="budget_limit_positive"),
        ]

    def __str__(self) -> str:
        owner = self.team or self.user or (f"session {self.session_id}" if self.session_id else "")
        return f"{owner}: {usd(self.limit_usd)}/{self.period}"  # the admin's list, as the UI

    def clean(self) -> None:
        owners = {"user": self.user_id, "team": self.team_id, "session": self.session_id}
        if not owners.get(self.scope) or any(v for k, v in owners.items() if k != self.scope):
            raise ValidationError(f"a {self.scope} budget names exactly one {self.scope}")


class SpendReservation(models.Model):
    """The worst-case USD of one provider call in flight under one budget (reserved before
    the call, deleted in the transaction that writes the call's UsageRecord). One older than
    agents/spend_caps.py RESERVATION_TTL_SECONDS is ignored: its worker died mid-call."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="reservations")
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE,
                                related_name="+")
    worst_usd = models.DecimalField(max_digits=18, decimal_places=9)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["budget", "created_at"])]


class RateOverride(models.Model):
    """An operator's rates for a route (USD per million tokens; blank = the library's rate;
    model "*" = every model of the provider). Recorded as source "operator"
    (agents/pricing.py)."""

    provider = models.CharField(max_length=50)
    model = models.CharField(max_length=200, default="*")
    input = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    output = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_read = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_write_5m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_write_1h = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    note = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "model"],
                                               name="uniq_rate_override")]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} (operator)"

    def clean(self) -> None:
        try:
            override_validate(self.provider, {b: getattr(self, b) for b in BUCKETS})
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
