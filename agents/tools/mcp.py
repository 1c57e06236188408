"""MCP tools in the registry: names, schema checks, result text, the Tool wrapper.

A team's MCP server ``srv`` offering tool ``t`` appears to the model as ``mcp__srv__t``
with the server's own JSON schema. Connections are agents/mcp_client.py's; configuration
and policy are the Django side's (sessions/mcp.py). What the model reads of a call is text:
text blocks joined, other blocks named, errors marked, a malformed result turned into a
tool error (never a crashed turn). Oversized output is left to the spill (spill.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from agents.errors import ToolError
from agents.messages import ToolSpec
from agents.tools import PathScope, ToolContext, ToolOutput

PREFIX = "mcp__"
SEPARATOR = "__"
TOOL_NAME_MAX = 64
"""Anthropic's and OpenAI's tool-name limit: ^[a-zA-Z0-9_-]{1,64}$."""
SERVER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
"""Server names: lowercase, digits, hyphens (no "_", so ``mcp__a__b`` splits one way)."""
_TOOL_CHARS = re.compile(r"^[A-Za-z0-9_-]+$")
POLICIES = ("read_only", "ask", "allow")
"""A team admin's per-tool setting: read-only (allowed, may run concurrently), ask (a human
approves each call), allow (allowed without asking)."""
DESCRIPTION_MAX = 2_000
"""Chars of a server's tool description kept (it is sent on every request: the floor)."""
OUTPUT_MAX_CHARS = 400_000
"""The tool's own cap before the spill (seed: each tool caps its own output first)."""


def full_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``."""
    return f"{PREFIX}{server}{SEPARATOR}{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of a namespaced name, or None when ``name`` is not an MCP tool."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX):].partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


def name_problem(server: str, tool: str) -> str | None:
    """Why ``tool`` of ``server`` cannot be offered under its namespaced name, or None."""
    if not _TOOL_CHARS.match(tool):
        return f"tool name {tool!r} has characters a model API refuses (allowed: A-Z a-z 0-9 _ -)"
    if len(full_name(server, tool)) > TOOL_NAME_MAX:
        return f"{full_name(server, tool)!r} is longer than {TOOL_NAME_MAX} characters"
    return None


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not usable as a tool's input schema, or None: it must be a JSON
    object, valid JSON Schema under its own (or the latest) metaschema, with type "object"."""
    if not isinstance(schema, Mapping):
        return "the input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"the input schema's type is {schema.get('type')!r}, not 'object'"
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"the input schema is not valid JSON Schema at {where}: {exc.message}"
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        return f"the input schema cannot be sent as JSON ({exc})"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteTool:
    """A tool as a server listed it: its own name, description and input schema."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


def result_text(result: Any) -> ToolOutput:
    """A CallToolResult (mcp_types) → ToolOutput. Text blocks joined by newlines; images,
    audio and binary resources named with their type and size; embedded text resources
    inlined; structured content alone shown as JSON. ``is_error`` results are errors."""
    parts: list[str] = []
    content = getattr(result, "content", None)
    if not isinstance(content, list):
        raise ToolError("the MCP server returned a malformed result (no content list)")
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data or '') * 3 // 4} bytes]")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {res.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{kind} content]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    text = "\n".join(parts)
    if len(text) > OUTPUT_MAX_CHARS:
        text = text[:OUTPUT_MAX_CHARS] + f"\n[Truncated by the tool: {len(text):,} chars]"
    return ToolOutput(text=text or "(no output)", is_error=bool(getattr(result, "is_error", False)))


Caller = Callable[..., Any]
"""caller(remote_tool_name, arguments, should_stop=None) -> CallToolResult; raises
ToolError on failure (``should_stop``: the turn's stop flag, polled while waiting)."""


class McpTool:
    """One MCP tool as a registry Tool. ``policy``: the team admin's setting (POLICIES);
    read-only tools may join a concurrent run, the others run alone (no path scope).
    ``caller`` reaches the server through the worker's connection manager."""

    interactive = False

    def __init__(self, *, server: str, remote: RemoteTool, policy: str, caller: Caller):
        if policy not in POLICIES:
            raise ValueError(f"unknown MCP tool policy {policy!r}")
        self.server, self.remote, self.policy, self._caller = server, remote, policy, caller
        description = (remote.description or "").strip()[:DESCRIPTION_MAX]
        self.spec = ToolSpec(name=full_name(server, remote.name),
                             description=(description or f"{remote.name} (MCP server {server})"),
                             input_schema=dict(remote.input_schema))
        self.read_only = policy == "read_only"

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []  # what a remote server touches is not ours to see; read-only or alone

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return result_text(self._caller(self.remote.name, args,
                                        should_stop=ctx.extras.get("should_stop")))


__all__ = ["McpTool", "POLICIES", "PREFIX", "RemoteTool", "SERVER_NAME", "full_name",
           "name_problem", "result_text", "schema_problem", "split_name"]
