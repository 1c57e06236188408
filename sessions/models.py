"""Rows for conversations: Session, Message, Turn, RunEvent, UsageRecord.

Models stay thin (fields, choices, Meta, __str__, predicates on their own fields). Logic lives
in sessions/services.py; the harness in agents/. Messages are ordered by their BigAutoField id
only, never by time (seed, "Where the conversation actually lives": clocks step backwards).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Session(models.Model):
    """One persistent conversation owned by one user.

    ``system_prompt`` holds the exact bytes sent (built once, rebuilt only by compaction).
    The compaction breaker, prune re-arm level and usage anchor live here, not in a process,
    so a restart never resets them (seed, "Circuit-breaker state belongs on the row").
    The turn lease is held on the lineage root's row (``lease_owner``/``lease_expires_at``).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="agent_sessions")
    team = models.ForeignKey("accounts.Team", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="sessions")
    title = models.CharField(max_length=200, default="New session")
    archived = models.BooleanField(default=False)
    provider = models.CharField(max_length=50)
    model = models.CharField(max_length=200)
    system_prompt = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now)
    lineage_root = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                                     related_name="lineage_segments")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="children")
    tool_names = models.JSONField(default=list, blank=True)
    last_activity_at = models.DateTimeField(default=timezone.now)
    message_count = models.IntegerField(default=0)
    transcript_version = models.IntegerField(
        default=0, help_text="Bumped by every change to the live transcript that is not an "
        "append (compaction, prune, rewind), so a worker's cached copy knows it is stale.")
    event_seq = models.BigIntegerField(default=0)
    # Turn lease (lineage root row only).
    lease_owner = models.CharField(max_length=100, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Interrupt flag, checked by the worker between chunks and tools.
    stop_requested = models.BooleanField(default=False)
    # Durable breaker / hysteresis / calibration state (agents/compaction.py, prune.py, tokens.py).
    compaction_ineffective_count = models.IntegerField(default=0)
    compaction_fallback_streak = models.IntegerField(default=0)
    compaction_recovery_deadline = models.JSONField(null=True, blank=True)
    compaction_failure_cooldown_until = models.DateTimeField(null=True, blank=True)
    compaction_state = models.JSONField(default=dict, blank=True)
    compaction_count = models.IntegerField(default=0)
    # The per-session compaction lease (300 s), re-validated inside the commit transaction.
    compaction_lease_owner = models.CharField(max_length=100, blank=True, default="")
    compaction_lease_expires_at = models.DateTimeField(null=True, blank=True)
    prune_rearm_tokens = models.IntegerField(default=0)
    usage_anchor = models.JSONField(null=True, blank=True)
    # Prompt-cache health (agents/cache.py CacheHealth) and its admin-visible flag.
    cache_health = models.JSONField(default=dict, blank=True)
    cache_warning = models.BooleanField(default=False)
    # Audited per-session approval bypass (approvals/services.py is the only writer).
    bypass_approvals = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "-last_activity_at"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    @property
    def lineage_root_id_or_self(self) -> int:
        return self.lineage_root_id or self.pk


class Message(models.Model):
    """One transcript message. ``active``/``compacted``: 1,0 live · 0,1 summarised away
    (model no, search yes) · 0,0 rewound (model no, search no). ``sent_content`` is the exact
    text sent when it differed from ``content`` (NULL = content was sent); replayed verbatim.
    ``reasoning`` is display only and never replayed."""

    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        TOOL = "tool", "Tool"

    id = models.BigAutoField(primary_key=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True, default="")
    sent_content = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    tool_name = models.CharField(max_length=200, blank=True, default="")
    is_error = models.BooleanField(default=False)
    tool_meta = models.JSONField(
        default=dict, blank=True,
        help_text="A tool result's metadata for display (exit code, replacements, hits, "
                  "stopped); never sent to the model.")
    reasoning = models.TextField(blank=True, default="")
    stable_prefix_chars = models.IntegerField(
        null=True, blank=True, help_text="Chars of the sent text that are static scaffold "
        "(declared by the builder; the cache planner splits there).")
    kind = models.CharField(max_length=20, blank=True, default="",
                            help_text="'summary' for compaction summaries, 'skill' for skill "
                                      "invocations, '' otherwise.")
    active = models.BooleanField(default=True)
    compacted = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "active", "id"])]

    def __str__(self) -> str:
        return f"{self.role} #{self.pk}"

    @property
    def has_sidecar(self) -> bool:
        return self.sent_content is not None


class Turn(models.Model):
    """One user message and everything the agent does until it hands back control.

    Doubles as the input queue: a message sent while a turn runs is stored as a queued Turn
    and runs next, never concurrently and never lost.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    input_text = models.TextField()
    kind = models.CharField(max_length=20, blank=True, default="",
                            help_text="'' chat, 'compact', 'prune', 'skill'.")
    user_message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    iterations = models.IntegerField(default=0)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "status"])]

    def __str__(self) -> str:
        return f"turn #{self.pk} ({self.status})"


class RunEvent(models.Model):
    """One streamed event, written before it is published, so a reconnecting socket can ask
    for everything after the last seq it saw (DESIGN.md §3). Protocol: docs/protocol.md."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    seq = models.BigIntegerField()
    type = models.CharField(max_length=40)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="uniq_event_seq")]

    def __str__(self) -> str:
        return f"{self.session_id}:{self.seq} {self.type}"


class UsageRecord(models.Model):
    """One provider call's usage in four disjoint buckets (cache writes split by TTL) plus
    reasoning (a breakdown of output). ``cost_usd`` NULL means unknown (a bucket's rate is
    unknown); pricing comes later, the data is recorded now."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="usage_records")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="usage_records")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                             related_name="+")
    team = models.ForeignKey("accounts.Team", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    provider = models.CharField(max_length=50)
    model = models.CharField(max_length=200)
    purpose = models.CharField(max_length=20, default="turn")  # turn | summary | finalizer
    input_tokens = models.IntegerField(default=0)
    output_tokens = models.IntegerField(default=0)
    cache_read_tokens = models.IntegerField(default=0)
    cache_write_5m_tokens = models.IntegerField(default=0)
    cache_write_1h_tokens = models.IntegerField(default=0)
    reasoning_tokens = models.IntegerField(default=0)
    estimated_prompt_tokens = models.IntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    rate_source = models.CharField(max_length=200, blank=True, default="")
    raw = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["user", "created_at"])]

    def __str__(self) -> str:
        return f"usage #{self.pk} {self.model}"

    @property
    def prompt_tokens(self) -> int:
        return (self.input_tokens + self.cache_read_tokens + self.cache_write_5m_tokens
                + self.cache_write_1h_tokens)
