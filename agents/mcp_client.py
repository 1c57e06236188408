"""MCP connections: one supervised client per configured server, per worker process.

The official SDK (``mcp``) is asynchronous; the harness is not. A ``ConnectionManager``
runs one asyncio loop on a daemon thread and, for every server it is told about, a
supervisor task that connects (stdio: spawn the command; http: streamable HTTP), lists
the tools, then keeps the connection alive with pings; when the connection drops (the
process died, the server restarted, a ping timed out) it reconnects with exponential
backoff. Tool calls come from dispatch threads (``call``) and wait on the loop with a
timeout; a call on a dead or absent connection raises ToolError with a sentence the model
can read, and the turn goes on.

What reaches a session's schema is not decided here: the manager only reports status
(connected, tools, generation); sessions/toolbox.py reads it between turns through the
one rebuild function. No Django; configuration arrives as ``ServerConfig`` values.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agents.egress import EgressDenied, allowed_entry, egress_check
from agents.errors import ToolError
from agents.tools.mcp import RemoteTool, name_problem, schema_problem

log = logging.getLogger("hermes.mcp")

BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
PING_INTERVAL = 5.0
CONNECT_TIMEOUT = 20.0
CALL_TIMEOUT = 120.0
STOP_POLL = 0.25
"""Seconds between two looks at the turn's stop flag while a call runs."""


def reconnect_delay(attempt: int, *, base: float = BACKOFF_BASE, cap: float = BACKOFF_CAP
                    ) -> float:
    """Seconds to wait before reconnect ``attempt`` (0 = the first retry): base·2^n, capped."""
    return min(cap, base * (2 ** min(max(attempt, 0), 30)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """One server as the manager needs it. ``key``: unique in the process (team and name);
    ``transport``: "stdio" (``argv``, ``env`` merged over the SDK's safe defaults) or
    "http" (``url``). Two configs with equal fields are the same server (no restart).
    ``allow_private``: host or host:port entries the operator lets an http server resolve
    to a non-public address (agents/egress.py; every other one is refused per request)."""

    key: str
    name: str
    transport: str
    argv: tuple[str, ...] = ()
    url: str = ""
    env: tuple[tuple[str, str], ...] = ()
    allow_private: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStatus:
    """What is known of one server. ``state``: connecting / connected / failed / stopped.
    ``tools``: the usable tools of the last successful listing (kept while reconnecting);
    ``rejected``: (tool, reason) for listed tools that cannot be offered (bad name, bad
    schema). ``generation`` increases on every successful connect."""

    state: str = "connecting"
    error: str = ""
    tools: tuple[RemoteTool, ...] = ()
    rejected: tuple[tuple[str, str], ...] = ()
    generation: int = 0
    attempts: int = 0


def tools_from_listing(listed: Iterable[Any], server: str
                       ) -> tuple[tuple[RemoteTool, ...], tuple[tuple[str, str], ...]]:
    """Split a tools/list answer into usable RemoteTools and (name, reason) rejections."""
    good: list[RemoteTool] = []
    bad: list[tuple[str, str]] = []
    seen: set[str] = set()
    for tool in listed:
        name = str(getattr(tool, "name", "") or "")
        schema = getattr(tool, "input_schema", None)
        problem = name_problem(server, name) or schema_problem(schema)
        if not problem and name in seen:
            problem = "listed twice"
        if problem:
            bad.append((name, problem))
            continue
        seen.add(name)
        good.append(RemoteTool(name=name, description=str(getattr(tool, "description", "") or ""),
                               input_schema=dict(schema)))
    return tuple(sorted(good, key=lambda t: t.name)), tuple(bad)


def _client_for(config: ServerConfig, read_timeout: float):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    if config.transport == "stdio":
        target: Any = StdioServerParameters(command=config.argv[0], args=list(config.argv[1:]),
                                            env=dict(config.env) or None)
    else:
        target = _guarded_http(config)
    return Client(target, read_timeout_seconds=read_timeout)


@contextlib.asynccontextmanager
async def _guarded_http(config: ServerConfig):
    """The SDK's streamable-HTTP transport on an HTTP client that checks the egress rule
    before every request it sends (the first POST, each later one, the GET stream and any
    same-origin redirect), so a host name re-pointed at 127.0.0.1 after the admin saved it
    is refused at the next request rather than trusted from the form's check."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def check(request) -> None:
        host, port = request.url.host, request.url.port or (
            443 if request.url.scheme == "https" else 80)
        if allowed_entry(host, port, config.allow_private):
            return
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port,
                                                                 type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise EgressDenied(f"{host!r} does not resolve ({exc}).") from exc
        egress_check(str(request.url), allowed=config.allow_private,
                     resolve=lambda _h, _p: sorted({info[4][0] for info in infos}))

    async with create_mcp_http_client() as http:
        http.event_hooks = {"request": [check], "response": []}
        async with streamable_http_client(config.url, http_client=http) as streams:
            yield streams


async def list_tools_once(config: ServerConfig, *, timeout: float = CONNECT_TIMEOUT
                          ) -> tuple[tuple[RemoteTool, ...], tuple[tuple[str, str], ...]]:
    """Connect, list every tool (all pages), disconnect: the admin form's check. Raises
    what the connection raised (OSError for a command that cannot start, httpx errors,
    TimeoutError, MCPError)."""
    async with asyncio.timeout(timeout):
        async with _client_for(config, timeout) as client:
            return tools_from_listing(await _all_tools(client), config.name)


def probe_server(config: ServerConfig, *, timeout: float = CONNECT_TIMEOUT):
    """``list_tools_once`` from synchronous code (its own event loop)."""
    return asyncio.run(list_tools_once(config, timeout=timeout))


async def _all_tools(client) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a paginator that never ends cannot hang the connect
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


@dataclass(slots=True)
class _Live:
    config: ServerConfig
    status: ServerStatus = field(default_factory=ServerStatus)
    client: Any = None
    task: asyncio.Task | None = None
    dead: asyncio.Event | None = None
    connected: threading.Event = field(default_factory=threading.Event)


class ConnectionManager:
    """The process's MCP connections (see the module docstring). ``ensure(group, configs)``
    makes the servers of ``group`` (a team) exactly ``configs``: new ones start, changed
    ones restart, missing ones stop. ``status``, ``wait_connected`` and ``call`` are safe
    from any thread. ``backoff`` maps an attempt number to seconds (tests shorten it)."""

    def __init__(self, *, ping_interval: float = PING_INTERVAL,
                 call_timeout: float = CALL_TIMEOUT, backoff=reconnect_delay):
        self._ping_interval, self._call_timeout, self._backoff = (ping_interval, call_timeout,
                                                                  backoff)
        self._live: dict[str, _Live] = {}
        self._groups: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hermes-mcp",
                                        daemon=True)
        self._thread.start()

    # --- configuration ---------------------------------------------------------------
    def ensure(self, group: str, configs: Iterable[ServerConfig]) -> set[str]:
        """Returns the keys started by this call (new or changed servers)."""
        wanted = {c.key: c for c in configs}
        started: set[str] = set()
        with self._lock:
            for key in self._groups.get(group, set()) - set(wanted):
                self._stop_locked(key)
            for key, config in wanted.items():
                live = self._live.get(key)
                if live is not None and live.config == config:
                    continue
                if live is not None:
                    self._stop_locked(key)
                live = self._live[key] = _Live(config=config)
                live.task = asyncio.run_coroutine_threadsafe(self._start(live), self._loop)
                started.add(key)
            self._groups[group] = set(wanted)
        return started

    async def _start(self, live: _Live) -> None:
        live.dead = asyncio.Event()
        live.task = asyncio.current_task()
        await self._supervise(live)

    def _stop_locked(self, key: str) -> None:
        live = self._live.pop(key, None)
        if live is None:
            return
        live.status = replace(live.status, state="stopped")
        task = live.task
        if isinstance(task, asyncio.Task):
            self._loop.call_soon_threadsafe(task.cancel)
        elif task is not None:
            task.cancel()

    def shutdown(self) -> None:
        """Stop every server and the loop (tests; process exit kills the children anyway)."""
        with self._lock:
            for key in list(self._live):
                self._stop_locked(key)
            self._groups.clear()
        time.sleep(0.1)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    # --- status ----------------------------------------------------------------------
    def status(self, key: str) -> ServerStatus | None:
        live = self._live.get(key)
        return None if live is None else live.status

    def wait_connected(self, key: str, timeout: float) -> bool:
        live = self._live.get(key)
        return bool(live is not None and live.connected.wait(timeout))

    # --- supervision -----------------------------------------------------------------
    async def _supervise(self, live: _Live) -> None:
        attempt = 0
        while True:
            live.status = replace(live.status, state="connecting", attempts=attempt)
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    client = _client_for(live.config, self._call_timeout)
                    await client.__aenter__()
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT):
                        tools, rejected = tools_from_listing(await _all_tools(client),
                                                             live.config.name)
                    live.dead.clear()
                    live.client = client
                    live.status = ServerStatus(state="connected", tools=tools,
                                               rejected=rejected,
                                               generation=live.status.generation + 1)
                    live.connected.set()
                    attempt = 0
                    await self._keep_alive(live, client)
                finally:
                    live.client = None
                    live.connected.clear()
                    await _close_quietly(client)
            except asyncio.CancelledError:
                live.status = replace(live.status, state="stopped")
                raise
            except BaseException as exc:  # noqa: BLE001 — every failure means reconnect
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                live.status = replace(live.status, state="failed", error=_describe(exc),
                                      attempts=attempt + 1)
                log.info("MCP server %s: %s", live.config.key, live.status.error)
            await asyncio.sleep(self._backoff(attempt))
            attempt += 1

    async def _keep_alive(self, live: _Live, client) -> None:
        """Raise when the connection is gone: a call saw it die, or the periodic re-listing
        failed (the SDK's ping is gone from the 2026 protocol; tools/list works in every
        version and also notices a server whose tools changed)."""
        while True:
            try:
                await asyncio.wait_for(live.dead.wait(), self._ping_interval)
                raise ConnectionError(live.status.error or "the connection was lost")
            except TimeoutError:
                pass
            listed = await asyncio.wait_for(_all_tools(client), max(self._ping_interval, 10.0))
            tools, rejected = tools_from_listing(listed, live.config.name)
            if tools != live.status.tools or rejected != live.status.rejected:
                live.status = replace(live.status, tools=tools, rejected=rejected)

    # --- calls -----------------------------------------------------------------------
    def call(self, key: str, tool: str, arguments: Mapping[str, Any], *,
             timeout: float | None = None, should_stop=None) -> Any:
        """Call ``tool`` on server ``key`` and return its CallToolResult. Raises ToolError:
        server unknown or not connected, the connection died mid-call (the supervisor then
        reconnects), a timeout, a malformed result, ``should_stop()`` turning true (polled
        every 0.25 s: the user pressed Stop; the request is cancelled)."""
        live = self._live.get(key)
        client = live.client if live is not None else None
        if live is None or client is None:
            state = live.status if live is not None else None
            why = f" ({state.error})" if state is not None and state.error else ""
            raise ToolError(f"MCP server {key.rsplit('/', 1)[-1]!r} is not connected{why}; "
                            "the call was not executed. Try again later or use another tool.")
        limit = timeout or self._call_timeout
        future = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(client.call_tool(tool, dict(arguments)), limit), self._loop)
        try:
            deadline = time.monotonic() + limit + 5
            while not future.done():
                try:
                    future.result(STOP_POLL)
                except concurrent.futures.TimeoutError:
                    if future.done():  # the call itself timed out: reported below
                        break
                    if should_stop is not None and should_stop():
                        future.cancel()
                        raise ToolError(f"stopped by the user; the call to {tool} was "
                                        "cancelled and its outcome is unknown.") from None
                    if time.monotonic() > deadline:
                        raise TimeoutError() from None
                except BaseException:  # noqa: BLE001 — the call's own failure: read below
                    break
            return future.result()
        except ToolError:
            raise
        except BaseException as exc:  # noqa: BLE001 — every failure becomes a tool error
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            future.cancel()
            name = live.config.name
            if _is_validation(exc):
                raise ToolError(f"MCP server {name!r} returned a malformed result for {tool}: "
                                f"{_describe(exc)}") from None
            if isinstance(exc, TimeoutError):
                raise ToolError(f"MCP tool {tool} on server {name!r} did not answer within "
                                f"{limit:.0f} s; its outcome is unknown.") from None
            self._loop.call_soon_threadsafe(live.dead.set)
            live.status = replace(live.status, error=_describe(exc))
            raise ToolError(f"MCP server {name!r} failed during the call to {tool} "
                            f"({_describe(exc)}); its outcome is unknown. The server is "
                            "being reconnected.") from None


def _is_validation(exc: BaseException) -> bool:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("invalid structured content" in text
                                              or "output schema" in text)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions[:3])
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _close_quietly(client) -> None:
    try:
        async with asyncio.timeout(10):
            await client.__aexit__(None, None, None)
    except BaseException as exc:  # noqa: BLE001 — closing a dead connection may raise anything
        if isinstance(exc, asyncio.CancelledError):
            raise
        log.debug("closing an MCP client raised %r", exc)


__all__ = ["ConnectionManager", "ServerConfig", "ServerStatus", "probe_server",
           "reconnect_delay", "tools_from_listing"]
