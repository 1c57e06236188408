"""Rows for tools that arrive late: a team's MCP servers and a session's schema snapshot.

Imported by sessions/models.py so Django registers them in the agent_sessions app. Thin:
fields and predicates on their own fields; the connection work is agents/mcp_client.py's,
the wiring sessions/mcp.py's, the one rebuild function sessions/toolbox.py's.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

POLICY_CHOICES = [("read_only", "read-only (allowed; may run alongside other reads)"),
                  ("ask", "ask (a person approves each call)"),
                  ("allow", "allowed (runs without asking)")]


class McpServer(models.Model):
    """One MCP server a team's sessions may use, configured by a team admin.

    ``transport`` "stdio": ``command`` (split like a shell line, no shell) is started by each
    worker process with ``env`` added to the SDK's safe defaults; "http": ``url`` is a
    streamable-HTTP endpoint. ``expose``: the tool names offered (empty: every tool the
    server lists). ``default_policy`` and ``tool_policies`` ({tool: policy}) map each tool
    to read_only / ask / allow for the policy gate. ``tools_listed``: the last listing seen
    ([{name, description, input_schema}]), written by the admin form's check and by a
    worker when it connects."""

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a command the worker starts)"
        HTTP = "http", "streamable HTTP (a URL)"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE,
                             related_name="mcp_servers")
    name = models.CharField(max_length=24)
    transport = models.CharField(max_length=10, choices=Transport.choices)
    command = models.CharField(max_length=2000, blank=True, default="")
    url = models.CharField(max_length=2000, blank=True, default="")
    env = models.JSONField(default=dict, blank=True)
    expose = models.JSONField(default=list, blank=True)
    default_policy = models.CharField(max_length=10, choices=POLICY_CHOICES, default="ask")
    tool_policies = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    tools_listed = models.JSONField(default=list, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"],
                                               name="mcp_server_unique_name_per_team")]
        ordering = ["team_id", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.transport})"

    def policy_for(self, tool: str) -> str:
        """The admin's setting for ``tool``: its own entry, else the server's default."""
        return self.tool_policies.get(tool) or self.default_policy

    def exposes(self, tool: str) -> bool:
        return not self.expose or tool in self.expose


class SessionToolSchema(models.Model):
    """The parts of a session's schema snapshot that code does not fix: the MCP tools'
    specs as offered ({name: {server, tool, description, input_schema}}), so the tool
    block's bytes change only through sessions.toolbox.tool_schema_rebuild. ``pending``:
    a rebuild asked for while a turn was in flight (the reason), done before the next."""

    session = models.OneToOneField("agent_sessions.Session", on_delete=models.CASCADE,
                                   related_name="tool_schema")
    mcp_specs = models.JSONField(default=dict, blank=True)
    reason = models.CharField(max_length=100, blank=True, default="")
    pending = models.CharField(max_length=100, blank=True, default="")
    rebuilt_at = models.DateTimeField(null=True, blank=True)
    rebuilds = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"tool schema of session {self.session_id}"
