"""Django admin (staff only, Django's default) for the approval gate: view-only.

Decisions, revocations and bypass toggles must go through approvals/services.py (first
decision wins, every change audited), so the admin never edits these rows.

What a staff member reads here is what the model or a file wrote (a command, its arguments,
a rule's pattern, an audit entry's detail), so it goes through sessions/visible.py like the
approval card does: a U+202E or an ESC shown raw would make the command read as something
other than what ran ("Trojan Source"). Commands are shown in full on the detail page,
wrapped (static/approvals_admin.css, as the CSP allows no inline style), and cut to
LIST_COMMAND_CHARS in the change list.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from approvals.models import ApprovalRequest, ApprovalRule, AuditEntry
from sessions.visible import HIDDEN_WARNING, has_hidden, visible_html

LIST_COMMAND_CHARS = 120
"""Characters of a command (or pattern) the change list shows before "…" (the detail page
shows all of it)."""


def shown_list(text: str) -> SafeString:
    """``text`` for a change-list column: its first LIST_COMMAND_CHARS characters,
    visible-safe (hidden characters as ``⟨U+202E⟩`` spans, counted before they are escaped,
    so an escape is never cut), "…" when cut, and a warning mark when any of ``text`` (the
    part not shown included) holds hidden characters."""
    text = text or ""
    cut = len(text) > LIST_COMMAND_CHARS
    warning = (format_html(' <strong class="admin-hidden" title="{}">⚠</strong>',
                           HIDDEN_WARNING) if has_hidden(text) else "")
    return format_html('<code class="admin-command">{}{}</code>{}',
                       visible_html(text[:LIST_COMMAND_CHARS]), "…" if cut else "", warning)


def shown_full(text: str) -> SafeString:
    """``text`` whole for a detail page, visible-safe in a wrapping ``<pre>`` (long
    commands are read without scrolling sideways), with the warning sentence above when it
    holds hidden characters."""
    warning = (format_html('<p class="admin-hidden"><strong>Warning: this text {}.</strong> '
                           "They are shown as ⟨…⟩ marks.</p>", HIDDEN_WARNING)
               if has_hidden(text or "") else "")
    return format_html('{}<pre class="admin-command">{}</pre>', warning,
                       visible_html(text or ""))


def shown_json(value) -> SafeString:
    """A JSON field (arguments, an audit detail) pretty-printed, non-ASCII kept as is so
    that a hidden character is escaped visibly rather than hidden as ``\\u202e``."""
    return shown_full(json.dumps(value, indent=2, ensure_ascii=False))


class ReadOnlyAdmin(admin.ModelAdmin):
    """Listing and inspection only: no add, change or delete."""

    class Media:
        css = {"all": ("approvals_admin.css",)}

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ["id", "tool_name", "command_listed", "state", "scope", "risk_class",
                    "requester", "decider", "created_at", "decided_at"]
    list_filter = ["state", "scope", "risk_class"]
    search_fields = ["command", "tool_name", "requester__username"]
    # The free texts are shown through the methods below, never as the raw field.
    fields = ["session", "turn", "tool_call_id", "tool_name", "command_shown",
              "arguments_shown", "normalized_shown", "workspace_shown", "reason_shown",
              "rule", "risk_class", "risk_classes", "allow_always", "requester", "state",
              "scope", "decider", "decision_reason_shown", "created_at", "expires_at",
              "decided_at"]
    readonly_fields = ["command_shown", "arguments_shown", "normalized_shown",
                       "workspace_shown", "reason_shown", "decision_reason_shown"]

    @admin.display(description="command")
    def command_listed(self, obj: ApprovalRequest) -> SafeString:
        return shown_list(obj.command)

    @admin.display(description="command")
    def command_shown(self, obj: ApprovalRequest) -> SafeString:
        return shown_full(obj.command)

    @admin.display(description="arguments")
    def arguments_shown(self, obj: ApprovalRequest) -> SafeString:
        return shown_json(obj.arguments)

    @admin.display(description="normalized")
    def normalized_shown(self, obj: ApprovalRequest) -> SafeString:
        return shown_full(obj.normalized)

    @admin.display(description="workspace")
    def workspace_shown(self, obj: ApprovalRequest) -> SafeString:
        return shown_full(obj.workspace)

    @admin.display(description="reason")
    def reason_shown(self, obj: ApprovalRequest) -> SafeString:
        return shown_full(obj.reason)

    @admin.display(description="decision reason")
    def decision_reason_shown(self, obj: ApprovalRequest) -> SafeString:
        return shown_full(obj.decision_reason)


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(ReadOnlyAdmin):
    list_display = ["id", "tool_name", "pattern_listed", "user", "team", "hit_count",
                    "revoked", "created_at"]
    list_filter = ["revoked", "tool_name"]
    search_fields = ["pattern", "user__username"]
    fields = ["user", "team", "tool_name", "pattern_shown", "created_by", "hit_count",
              "revoked", "created_at"]
    readonly_fields = ["pattern_shown"]

    @admin.display(description="pattern")
    def pattern_listed(self, obj: ApprovalRule) -> SafeString:
        return shown_list(obj.pattern)

    @admin.display(description="pattern")
    def pattern_shown(self, obj: ApprovalRule) -> SafeString:
        return shown_full(obj.pattern)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "action", "actor", "session", "approval", "created_at"]
    list_filter = ["action"]
    search_fields = ["action", "actor__username"]
    fields = ["actor", "action", "session", "approval", "detail_shown", "created_at"]
    readonly_fields = ["detail_shown"]

    @admin.display(description="detail")
    def detail_shown(self, obj: AuditEntry) -> SafeString:
        return shown_json(obj.detail)
