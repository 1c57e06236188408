"""Storing a team's MCP servers: save and delete, each in one transaction with an
AuditEntry. Who may do it is checked here again (team admins only: Http404 otherwise);
the form has already validated and checked the server."""

from __future__ import annotations

from django.db import transaction
from django.http import Http404
from django.utils import timezone

from accounts.services import team_get_for_admin
from approvals.models import AuditEntry
from sessions.mcp_models import McpServer

FIELDS = ("name", "transport", "command", "url", "env", "expose", "default_policy",
          "tool_policies", "enabled")


def mcp_server_save(*, user, team_id: int, data: dict, instance: McpServer | None = None
                    ) -> McpServer:
    """Create or update a server from a valid McpServerForm's cleaned_data. The listing
    the form's check found replaces ``tools_listed``; a skipped check keeps the old one.
    Sessions see the change at their next turn (sessions.toolbox.tool_schema_refresh)."""
    with transaction.atomic():
        team = team_get_for_admin(user=user, team_id=team_id)
        row = (McpServer.objects.select_for_update().get(pk=instance.pk, team=team)
               if instance is not None else McpServer(team=team, created_by=user))
        for field in FIELDS:
            setattr(row, field, data[field])
        if data.get("tools_listed") is not None:
            row.tools_listed, row.checked_at = data["tools_listed"], timezone.now()
        row.save()
        AuditEntry.objects.create(actor=user, action="team.mcp_server", detail={
            "team_id": team.pk, "server": row.name, "created": instance is None,
            "transport": row.transport, "command": row.command, "url": row.url,
            "env_keys": sorted(row.env), "expose": row.expose,
            "default_policy": row.default_policy, "tool_policies": row.tool_policies,
            "enabled": row.enabled})
    return row


def mcp_server_delete(*, user, team_id: int, server_id: int) -> None:
    """Remove a server (Http404 unless a team admin and the server is the team's)."""
    with transaction.atomic():
        team = team_get_for_admin(user=user, team_id=team_id)
        row = McpServer.objects.select_for_update().filter(pk=server_id, team=team).first()
        if row is None:
            raise Http404("No such server")
        AuditEntry.objects.create(actor=user, action="team.mcp_server_deleted",
                                  detail={"team_id": team.pk, "server": row.name})
        row.delete()
