"""The floor every request carries: the system prompt plus the tool schemas, in tokens.

No compaction moves it (seed, "The floor is one they chose"): every tool added is sent on
every call, so an admin who enables ten MCP servers should see what it costs in window.
This module groups a schema snapshot into toolsets and estimates each with the project's
one estimator (agents/context/tokens.py) over the Anthropic wire shape of a tool ({name,
description, input_schema}); the Settings page and the context gauge read its answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from agents.messages import ToolSpec
from agents.context.tokens import estimate_payload_tokens, estimate_text_tokens
from agents.tools.mcp import split_name

TOOLSETS: dict[str, str] = {
    "read_file": "files", "write_file": "files", "patch": "files", "search_files": "files",
    "terminal": "terminal", "skills_list": "skills", "skill_view": "skills",
    "session_search": "recall", "memory": "memory", "todo": "todo", "clarify": "clarify",
    "delegate": "delegation", "execute_code": "code execution",
}
"""Built-in tool → toolset label; a tool not listed is its own toolset."""


def toolset_of(name: str) -> str:
    """"mcp: <server>" for an MCP tool, the TOOLSETS label, else the tool's own name."""
    parts = split_name(name)
    if parts is not None:
        return f"mcp: {parts[0]}"
    return TOOLSETS.get(name, name)


def spec_tokens(spec: ToolSpec) -> int:
    """Estimated tokens of one tool as sent ({name, description, input_schema})."""
    return estimate_payload_tokens({"tools": [{"name": spec.name, "description":
                                               spec.description,
                                               "input_schema": spec.input_schema}]})


def floor_tokens(*, system: str, tools: Iterable[ToolSpec]) -> dict:
    """{"system": tokens of ``system``, "toolsets": [{"name", "tools": [names], "tokens"}]
    (largest first, then by name), "tools": all schemas, "total": system + tools}.
    Estimates, not billed counts: calibration (agents/context/tokens.py Calibrator) corrects the
    live context gauge, not this breakdown."""
    groups: dict[str, list[ToolSpec]] = {}
    for spec in tools:
        groups.setdefault(toolset_of(spec.name), []).append(spec)
    toolsets = [{"name": name, "tools": sorted(s.name for s in specs),
                 "tokens": sum(spec_tokens(s) for s in specs)}
                for name, specs in groups.items()]
    toolsets.sort(key=lambda t: (-t["tokens"], t["name"]))
    system_tokens = estimate_text_tokens(system) if system else 0
    tools_tokens = sum(t["tokens"] for t in toolsets)
    return {"system": system_tokens, "toolsets": toolsets, "tools": tools_tokens,
            "total": system_tokens + tools_tokens}


__all__ = ["TOOLSETS", "floor_tokens", "spec_tokens", "toolset_of"]
