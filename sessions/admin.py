"""Django admin for conversations (staff only, Django's default): sessions with a read-only
transcript inline, messages, turns, run events and usage records.

Read-mostly: the transcript, events and usage are history, so they are shown, not edited;
the breaker and lease fields are read-only because only the harness may write them.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from sessions.models import (ChildTask, McpServer, Message, RunEvent, Session,
                             SessionToolSchema, Turn, UsageRecord)
from sessions.toolbox import tool_schema_rebuild

EXCERPT_CHARS = 120


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


class MessageColumns:
    """Columns shared by the transcript inline and the message list: the content a person
    reads (excerpted) and whether different bytes were sent to the model (the sidecar)."""

    @admin.display(description="content")
    def content_excerpt(self, obj: Message) -> str:
        return excerpt(obj.content)

    @admin.display(description="has sidecar", boolean=True)
    def sidecar(self, obj: Message) -> bool:
        return obj.has_sidecar


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class TranscriptInline(MessageColumns, ReadOnlyInline):
    """The session's messages by id (the only ordering): role, an excerpt, the flags."""

    model = Message
    fields = ["id", "role", "content_excerpt", "tool_name", "active", "compacted",
              "sidecar", "kind"]
    readonly_fields = fields
    ordering = ["id"]
    verbose_name_plural = "Transcript"



class TurnInline(ReadOnlyInline):
    model = Turn
    fields = ["id", "status", "kind", "iterations", "error", "created_at", "finished_at"]
    readonly_fields = fields


def _session_link(session_id: int | None, label: str = "") -> str:
    if session_id is None:
        return "—"
    url = reverse("admin:agent_sessions_session_change", args=[session_id])
    return format_html('<a href="{}">{}</a>', url, label or f"session #{session_id}")


class ChildTaskInline(ReadOnlyInline):
    """The child agents this session delegated to, each linking to the child's session."""

    model = ChildTask
    fk_name = "parent_session"
    fields = ["index", "goal", "child_link", "call_id", "summary_budget", "created_at"]
    readonly_fields = fields
    verbose_name = "child agent"

    @admin.display(description="child session")
    def child_link(self, obj: ChildTask) -> str:
        return _session_link(obj.child_id)


BREAKER_FIELDS = ["lease_owner", "lease_expires_at", "stop_requested",
                  "compaction_ineffective_count", "compaction_fallback_streak",
                  "compaction_recovery_deadline", "compaction_state",
                  "prune_rearm_tokens", "usage_anchor", "cache_health",
                  "cache_warning", "event_seq", "message_count", "bypass_approvals"]


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "owner", "team", "provider", "model", "message_count",
                    "parent_link", "archived", "cache_warning", "last_activity_at",
                    "created_at"]
    list_filter = ["owner", "team", "model", "provider", ("created_at", admin.DateFieldListFilter),
                   "cache_warning", "archived"]
    search_fields = ["title", "messages__content"]
    readonly_fields = ["system_prompt", "started_at", "lineage_root", "parent_link",
                       "tool_names", "created_at", "last_activity_at", *BREAKER_FIELDS]
    exclude = ["parent"]
    raw_id_fields = ["owner"]
    inlines = [TranscriptInline, TurnInline, ChildTaskInline]
    date_hierarchy = "created_at"
    actions = ["rebuild_tool_schema"]

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        """No: a session is deleted by its owner (sessions/services.py session_delete),
        which refuses while a turn is busy, removes the workspace, pauses schedules and
        audits; a delete from here would skip all of that. Staff still inspect every
        session that exists, and a deleted one's usage rows (session empty) and its
        "session.deleted" audit entry."""
        return False

    @admin.action(description="Rebuild the tool schema (now if idle, else before the next turn)")
    def rebuild_tool_schema(self, request: HttpRequest, queryset: QuerySet) -> None:
        """The admin caller of the one rebuild function (sessions/toolbox.py)."""
        done = deferred = 0
        for session in queryset:
            if tool_schema_rebuild(session, reason=f"admin:{request.user.username}"[:100]):
                done += 1
            else:
                deferred += 1
        self.message_user(request, f"Tool schema rebuilt for {done} session(s); {deferred} "
                                   "with a turn in flight will be rebuilt before their next "
                                   "turn.")

    @admin.display(description="parent (delegated from)")
    def parent_link(self, obj: Session) -> str:
        return _session_link(obj.parent_id)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str):
        queryset, _ = super().get_search_results(request, queryset, search_term)
        return queryset.distinct(), False

    # The breaker's counters, read from its one stored state (compaction_state).
    @admin.display(description="Compaction ineffective count")
    def compaction_ineffective_count(self, obj: Session):
        return (obj.compaction_state or {}).get("ineffective_count", 0)

    @admin.display(description="Compaction fallback streak")
    def compaction_fallback_streak(self, obj: Session):
        return (obj.compaction_state or {}).get("fallback_streak", 0)

    @admin.display(description="Compaction recovery deadline")
    def compaction_recovery_deadline(self, obj: Session):
        return (obj.compaction_state or {}).get("recovery_deadline")


@admin.register(Message)
class MessageAdmin(MessageColumns, admin.ModelAdmin):
    list_display = ["id", "session", "role", "content_excerpt", "tool_name", "active",
                    "compacted", "sidecar", "created_at"]
    list_filter = ["role", "active", "compacted", "kind", "is_error",
                   ("created_at", admin.DateFieldListFilter)]
    search_fields = ["content", "tool_name", "session__title"]
    list_select_related = ["session"]
    raw_id_fields = ["session"]
    readonly_fields = ["created_at"]



@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "status", "kind", "iterations", "created_at", "finished_at"]
    list_filter = ["status", "kind", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["input_text", "error", "session__title"]
    list_select_related = ["session"]
    raw_id_fields = ["session", "user_message"]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "seq", "type", "created_at"]
    list_filter = ["type", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["session__title", "type"]
    list_select_related = ["session"]
    raw_id_fields = ["session"]


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "user", "provider", "model", "purpose", "input_tokens",
                    "output_tokens", "cache_read_tokens", "cache_write_5m_tokens",
                    "cache_write_1h_tokens", "cost_usd", "created_at"]
    list_filter = ["provider", "model", "purpose", "user",
                   ("created_at", admin.DateFieldListFilter)]
    search_fields = ["session__title", "model"]
    list_select_related = ["session", "user"]
    raw_id_fields = ["session", "turn", "user", "team"]


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    """Staff view of every team's MCP servers (team admins edit theirs on the team page)."""

    list_display = ["id", "team", "name", "transport", "enabled", "default_policy",
                    "checked_at", "updated_at"]
    list_filter = ["team", "transport", "enabled"]
    readonly_fields = ["tools_listed", "checked_at", "created_by", "updated_at"]


@admin.register(SessionToolSchema)
class SessionToolSchemaAdmin(admin.ModelAdmin):
    list_display = ["session", "reason", "pending", "rebuilds", "rebuilt_at"]
    readonly_fields = ["session", "mcp_specs", "reason", "pending", "rebuilds", "rebuilt_at"]
