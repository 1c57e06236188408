"""Django admin (staff only, Django's default) for the approval gate: view-only.

Decisions, revocations and bypass toggles must go through approvals/services.py (first
decision wins, every change audited), so the admin never edits these rows.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from approvals.models import ApprovalRequest, ApprovalRule, AuditEntry


class ReadOnlyAdmin(admin.ModelAdmin):
    """Listing and inspection only: no add, change or delete."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ["id", "tool_name", "state", "scope", "risk_class", "requester", "decider",
                    "created_at", "decided_at"]
    list_filter = ["state", "scope", "risk_class"]
    search_fields = ["command", "tool_name", "requester__username"]


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(ReadOnlyAdmin):
    list_display = ["id", "tool_name", "pattern", "user", "team", "hit_count", "revoked",
                    "created_at"]
    list_filter = ["revoked", "tool_name"]
    search_fields = ["pattern", "user__username"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "action", "actor", "session", "approval", "created_at"]
    list_filter = ["action"]
    search_fields = ["action", "actor__username"]
