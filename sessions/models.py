"""Rows for conversations: Session, Message, Turn, RunEvent, UsageRecord.

Models stay thin (fields, choices, Meta, __str__, predicates on their own fields). Logic lives
in sessions/services.py; the harness in agents/. Messages are ordered by their BigAutoField id
only, never by time (seed, "Where the conversation actually lives": clocks step backwards).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from sessions.visible import VisibleCharField


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
    # Hidden and control characters stored as visible escapes (sessions/visible.py).
    title = VisibleCharField(max_length=200, default="New session")
    archived = models.BooleanField(default=False)
    pinned = models.BooleanField(
        default=False, help_text="Shown first in the sidebar (the owner's choice).")
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
    # Durable breaker / hysteresis / calibration state (agents/context/compaction.py, prune.py, tokens.py).
    # The breaker lives in compaction_state alone (CompactionBreaker.to_dict); the admin
    # shows its counters from there (sessions/admin.py).
    compaction_state = models.JSONField(default=dict, blank=True)
    compaction_count = models.IntegerField(default=0)
    # The per-session compaction lease (300 s), re-validated inside the commit transaction.
    compaction_lease_owner = models.CharField(max_length=100, blank=True, default="")
    compaction_lease_expires_at = models.DateTimeField(null=True, blank=True)
    prune_rearm_tokens = models.IntegerField(default=0)
    cache_message_ttl = models.CharField(
        max_length=2, default="5m",
        help_text="TTL ('5m'/'1h') the last turn's message breakpoints carried: a resume "
                  "after longer is cold (agents/cache_strategy.py).")
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
                            help_text="'summary' for compaction summaries, 'rolling_summary' for "
                                      "the micro-compaction summary, 'incomplete', 'refusal', "
                                      "'' otherwise.")
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
        AWAITING_CHILDREN = "awaiting_children", "Awaiting child agents"
        AWAITING_ANSWER = "awaiting_answer", "Awaiting the user's answer"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        BUDGET_BLOCKED = "budget_blocked", "Stopped by a budget"  # resumable (accounts/)

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    input_text = models.TextField()
    kind = models.CharField(max_length=20, blank=True, default="",
                            help_text="'' chat, 'compact', 'prune', 'skill'.")
    user_message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    origin = models.CharField(
        max_length=20, blank=True, default="",
        help_text="Who started the turn: '' a person (browser, CLI), 'child' a parent agent's "
                  "delegate call, 'schedule' a beat schedule, 'webhook' an inbound webhook.")
    iterations = models.IntegerField(
        default=0, help_text="Model calls of this turn that got a reply, resumes included.")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "status"])]

    UNATTENDED_ORIGINS = ("schedule", "webhook")

    @property
    def unattended(self) -> bool:
        """No human is watching (a schedule, a webhook): an "ask" decision is a deny and a
        clarify question is answered "no human available" at once."""
        return self.origin in self.UNATTENDED_ORIGINS

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
    reasoning (a breakdown of output). ``cost_usd`` (USD) is priced at write time in the same
    transaction (accounts/pricing.py); NULL means unknown, ``cost_unknown_reason`` says why;
    ``rate_source`` and ``rate_fetched_at`` say where the rates came from and when."""

    # SET_NULL, not CASCADE: money spent stays spent when its session is deleted
    # (sessions/services.py session_delete). Every cap and /spend/ total keys on ``user`` and
    # ``team``, stored here at write time, so they keep counting the row; NULL here reads
    # as "a deleted session".
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="usage_records")
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
    cost_usd = models.DecimalField(max_digits=18, decimal_places=9, null=True, blank=True)
    rate_source = models.CharField(max_length=200, blank=True, default="")
    rate_fetched_at = models.DateTimeField(null=True, blank=True)
    cost_unknown_reason = models.CharField(max_length=200, blank=True, default="")
    cost_flagged = models.BooleanField(default=False)  # unknown cost allowed past a budget
    # The cost split by bucket (cache writes of both TTLs together) and what the same tokens
    # would have cost uncached (cache savings on /spend/); NULL when the cost is unknown.
    cost_input_usd = models.DecimalField(max_digits=18, decimal_places=9, null=True, blank=True)
    cost_output_usd = models.DecimalField(max_digits=18, decimal_places=9, null=True, blank=True)
    cost_cache_read_usd = models.DecimalField(max_digits=18, decimal_places=9, null=True,
                                              blank=True)
    cost_cache_write_usd = models.DecimalField(max_digits=18, decimal_places=9, null=True,
                                               blank=True)
    cost_uncached_usd = models.DecimalField(max_digits=18, decimal_places=9, null=True,
                                            blank=True)
    raw = models.JSONField(default=dict, blank=True)
    estimated = models.BooleanField(
        default=False, help_text="The provider sent no usage; the token counts are the "
        "harness's estimate of the request and reply (case B28).")
    credential = models.CharField(max_length=100, blank=True, default="",
                                  help_text="Label of the key that served the call (never the "
                                            "secret).")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["user", "created_at"]),
                   # /spend/ for a team and for staff (benchmarks/bench_spend.py)
                   models.Index(fields=["team", "created_at"], name="usage_team_created"),
                   models.Index(fields=["created_at"], name="usage_created")]

    def __str__(self) -> str:
        return f"usage #{self.pk} {self.model}"

    @property
    def prompt_tokens(self) -> int:
        return (self.input_tokens + self.cache_read_tokens + self.cache_write_5m_tokens
                + self.cache_write_1h_tokens)


class ProviderCooldown(models.Model):
    """A provider or one of its keys resting after throttling or failure, shared by every
    worker (issue 10, build 1). ``scope`` is "provider:<name>" or "key:<name>:<label>";
    ``strikes`` counts consecutive throttles (the cooldown escalates with it; a success
    deletes the row); ``until`` is when it may be tried again."""

    scope = models.CharField(max_length=200, unique=True)
    until = models.DateTimeField()
    strikes = models.IntegerField(default=0)
    reason = models.CharField(max_length=50, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.scope} until {self.until:%H:%M:%S}"


class BreakpointLimit(models.Model):
    """A cache-breakpoint limit learned from a provider's 400 for one endpoint, persisted so
    no process pays the 400 again (issue 10 defect 8). Only ever lowered."""

    base_url = models.CharField(max_length=500, unique=True)
    limit = models.IntegerField()
    learned_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.base_url}: {self.limit}"
class ToolResultLedger(models.Model):
    """What a tool call returned, written on the worker the moment the call finished, before
    the result reaches the transcript (issue 10 item 9; cases B02, B05, B06, B39).

    A redelivered turn finds its unanswered calls here and takes the stored result instead
    of running the tool again; a call announced (``tool.called``) with no row here and no
    result is reported as interrupted with unknown outcome, never run again. Looked up by
    (session, call id, tool name, arguments): a provider that reuses "call_0" for a
    different call does not get another call's output.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    arguments = models.TextField(blank=True, default="")
    content = models.TextField(blank=True, default="")
    is_error = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["session", "call_id"])]

    def __str__(self) -> str:
        return f"ledger {self.session_id}:{self.call_id}"


class ChildTask(models.Model):
    """One child agent started by a parent's delegate tool call (sessions/delegation.py).

    ``child`` is the child's own Session (``parent`` set, fresh history) and ``turn`` its
    one delegated turn. Children of one call share (``parent_turn``, ``call_id``); when the
    last of them ends, the call's tool result is ledgered on the parent and the parent's
    turn is resumed. ``summary_budget``: tokens the child's summary may take in the parent's
    context (agents/tools/delegate.py); ``index``: 1-based position in the batch."""

    parent_session = models.ForeignKey(Session, on_delete=models.CASCADE,
                                       related_name="child_tasks")
    parent_turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="child_tasks")
    call_id = models.CharField(max_length=200)
    call_arguments = models.TextField(blank=True, default="{}")
    index = models.IntegerField(default=1)
    goal = models.TextField()
    context = models.TextField(blank=True, default="")
    child = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="delegation")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    summary_budget = models.IntegerField(default=1000)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["parent_turn", "call_id", "index"]
        constraints = [models.UniqueConstraint(fields=["parent_turn", "call_id", "index"],
                                               name="uniq_child_task")]

    def __str__(self) -> str:
        return f"child {self.index} of call {self.call_id}: {self.goal[:40]}"


class MemoryStore(models.Model):
    """One user's durable memory: short notes the agent keeps across sessions (the memory
    tool) and the user edits on /memory/. ``entries`` is a list of strings, oldest first,
    bounded in characters by HERMES["MEMORY_CHAR_LIMIT"] (agents/memory.py). A session's
    prompt carries a snapshot taken when it is built (the volatile tier)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="memory_store")
    entries = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"memory of user #{self.user_id}"


class TodoList(models.Model):
    """A session's task list, kept by the model through the todo tool and shown in the
    chat's side panel. ``items``: [{"id", "content", "status"}] (agents/todo.py)."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="todo_list")
    items = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"todo list of session #{self.session_id}"


class ClarifyQuestion(models.Model):
    """A question the model asked through the clarify tool: the turn waits (AWAITING_ANSWER)
    until the user answers (the answer becomes the tool result) or Stop cancels it."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        ANSWERED = "answered", "Answered"
        CANCELLED = "cancelled", "Cancelled"

    session = models.ForeignKey(Session, on_delete=models.CASCADE,
                                related_name="clarify_questions")
    turn = models.ForeignKey(Turn, null=True, on_delete=models.CASCADE,
                             related_name="clarify_questions")
    tool_call_id = models.CharField(max_length=200)
    question = models.TextField()
    choices = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    answer = models.TextField(blank=True, default="")
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["turn", "state"])]
        constraints = [models.UniqueConstraint(fields=["turn", "tool_call_id"],
                                               name="clarify_one_per_call")]

    def __str__(self) -> str:
        return f"clarify #{self.pk} ({self.state})"


from sessions.mcp_models import McpServer, SessionToolSchema  # noqa: E402,F401  (registered here)
