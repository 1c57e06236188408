"""MCP servers wired to sessions: the worker's connection manager, configs from rows,
availability, the tools a team's sessions may be offered, the policy each tool gets.

Thin: connections are agents/mcp_client.py's, the Tool wrapper and name and schema rules
agents/tools/mcp.py's; what a session is offered changes only through
sessions.toolbox.tool_schema_rebuild. Each worker process has its own manager (created on
first use after a fork), so every worker supervises its own connections.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Iterable

from django.conf import settings
from django.utils import timezone

from agents.availability import AvailabilityCache
from agents.errors import ToolError
from agents.mcp_client import ConnectionManager, ServerConfig, probe_server
from agents.tools.mcp import McpTool, RemoteTool, full_name
from sessions.mcp_models import McpServer

_manager: ConnectionManager | None = None
_manager_pid: int | None = None
_manager_lock = threading.Lock()


def mcp_manager() -> ConnectionManager:
    """This process's connection manager (a new one in a forked child: connections and
    the loop thread do not survive a fork)."""
    global _manager, _manager_pid
    with _manager_lock:
        if _manager is None or _manager_pid != os.getpid():
            hermes = settings.HERMES
            _manager = ConnectionManager(ping_interval=hermes["MCP_PING_INTERVAL"],
                                         call_timeout=hermes["MCP_CALL_TIMEOUT"])
            _manager_pid = os.getpid()
        return _manager


def mcp_manager_reset() -> None:
    """Stop every connection of this process (tests; a worker shutting down)."""
    global _manager
    with _manager_lock:
        manager, _manager = _manager, None
    if manager is not None:
        manager.shutdown()


def server_key(row: McpServer) -> str:
    """Unique in the process: team id and server name."""
    return f"team-{row.team_id}/{row.name}"


def server_config(row: McpServer) -> ServerConfig:
    """The manager's view of a row. Raises ValueError for a command shlex cannot split."""
    argv = tuple(shlex.split(row.command)) if row.transport == McpServer.Transport.STDIO else ()
    return ServerConfig(key=server_key(row), name=row.name, transport=row.transport,
                        argv=argv, url=row.url if row.transport == "http" else "",
                        env=tuple(sorted((str(k), str(v)) for k, v in (row.env or {}).items())),
                        allow_private=tuple(settings.HERMES["MCP_HTTP_ALLOW_PRIVATE"]))


def team_servers(team_id: int | None) -> list[McpServer]:
    """The enabled servers of a team (none without a team)."""
    if not team_id:
        return []
    return list(McpServer.objects.filter(team_id=team_id, enabled=True).order_by("name"))


def mcp_sync(team_id: int | None) -> list[McpServer]:
    """Make this worker's connections match the team's enabled servers, wait up to
    HERMES MCP_CONNECT_WAIT seconds for the servers this call started, and store the listing
    a connection found (``tools_listed``) when it changed. Returns the rows."""
    rows = team_servers(team_id)
    if not team_id:
        return rows
    manager = mcp_manager()
    configs = []
    for row in rows:
        try:
            configs.append(server_config(row))
        except ValueError:
            continue  # the form refuses such a command; a hand-edited row is skipped
    started = manager.ensure(f"team-{team_id}", configs)
    # Only a server started just now is waited for: one that keeps failing must not add
    # the wait to every turn (it reaches sessions through the rebuild once it connects).
    deadline = time.monotonic() + settings.HERMES["MCP_CONNECT_WAIT"]
    for key in sorted(started):
        manager.wait_connected(key, max(0.0, deadline - time.monotonic()))
    for row in rows:
        status = manager.status(server_key(row))
        if status is None or status.state != "connected":
            continue
        listed = [{"name": t.name, "description": t.description,
                   "input_schema": dict(t.input_schema)} for t in status.tools]
        if listed != row.tools_listed:
            McpServer.objects.filter(pk=row.pk).update(tools_listed=listed,
                                                       checked_at=timezone.now())
            row.tools_listed = listed
    return rows


def server_connected(row: McpServer, cache: AvailabilityCache) -> bool:
    """The availability predicate of a server's tools: connected in this process, through
    the asymmetric cache (a drop within 60 s of the last success keeps the tools)."""
    key = server_key(row)
    return cache.check(f"mcp:{key}", lambda: (
        (status := mcp_manager().status(key)) is not None and status.state == "connected"))


def offered_specs(rows: Iterable[McpServer], cache: AvailabilityCache) -> dict[str, dict]:
    """{full name: {server, tool, description, input_schema}} of every exposed tool of
    every available server: what a rebuild would offer now."""
    specs: dict[str, dict] = {}
    for row in rows:
        if not server_connected(row, cache):
            continue
        for tool in row.tools_listed or []:
            if not row.exposes(tool["name"]):
                continue
            specs[full_name(row.name, tool["name"])] = {
                "server": row.name, "tool": tool["name"],
                "description": tool.get("description", ""),
                "input_schema": tool.get("input_schema") or {"type": "object"}}
    return specs


def tools_from_snapshot(specs: dict[str, dict], rows: Iterable[McpServer]) -> list[McpTool]:
    """McpTools for a session's stored MCP specs (the bytes the model was offered), with
    today's policy of each tool. A tool whose server was removed stays callable in name
    and answers that the server is gone, until the next rebuild drops it."""
    by_name = {row.name: row for row in rows}
    tools = []
    for spec in specs.values():
        row = by_name.get(spec["server"])
        remote = RemoteTool(name=spec["tool"], description=spec.get("description", ""),
                            input_schema=spec.get("input_schema") or {"type": "object"})
        policy = row.policy_for(spec["tool"]) if row is not None else "ask"
        tools.append(McpTool(server=spec["server"], remote=remote, policy=policy,
                             caller=_caller(row, spec["server"])))
    return tools


def _caller(row: McpServer | None, server: str):
    if row is None:
        def gone(tool: str, args: dict, should_stop=None):
            raise ToolError(f"MCP server {server!r} was removed by a team admin; the call "
                            "was not executed.")
        return gone
    key = server_key(row)

    def call(tool: str, args: dict, should_stop=None):
        manager = mcp_manager()
        if manager.status(key) is None:  # a worker that has not started it yet (a resume)
            mcp_sync(row.team_id)
        return manager.call(key, tool, args, should_stop=should_stop)
    return call


def tool_policies(rows: Iterable[McpServer], names: Iterable[str]) -> dict[str, str]:
    """{full name: read_only | ask | allow} for the MCP tools among ``names``."""
    wanted = set(names)
    out = {}
    for row in rows:
        for tool in row.tools_listed or []:
            name = full_name(row.name, tool["name"])
            if name in wanted:
                out[name] = row.policy_for(tool["name"])
    return out


def check_server(row: McpServer) -> tuple[tuple[RemoteTool, ...], tuple[tuple[str, str], ...]]:
    """Connect once and list the tools (the admin form's check; its own connection, not
    the worker's). Raises what connecting raised (the form turns it into an error)."""
    return probe_server(server_config(row), timeout=settings.HERMES["MCP_CHECK_TIMEOUT"])
