"""The tool registry: which tools exist, their schemas in a stable order, argument checks.

A session's schema snapshot is taken once, from ``specs(names)``, and never rebuilt per
request: the tool block sits inside the cached prefix, so its order and bytes must not move
(seed, "The tool schema is built once"; hermes-facts §7). Scheduling and execution are
dispatch.py's; availability probing is not done here (every built-in tool is always there).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from agents.messages import ToolSpec
from agents.tools import Tool
from agents.tools.clarify import ClarifyTool
from agents.tools.delegate import DelegateTool
from agents.tools.execute_code import ExecuteCode
from agents.tools.files import Patch, ReadFile, WriteFile
from agents.tools.notes import MemoryTool, TodoTool
from agents.tools.recall import SessionSearchTool
from agents.tools.search import SearchFiles
from agents.tools.skills import SkillsListTool, SkillViewTool
from agents.tools.terminal import Terminal

NAME_MATCH_CUTOFF = 0.7
"""difflib ratio for suggesting a registered name for a typo (hermes-facts §15)."""

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),),
}


class ToolRegistry:
    """Tools by name. ``register`` refuses duplicates (ValueError); ``get`` returns None for
    an unknown name; ``names`` and ``specs`` are sorted by name, so two registries holding the
    same tools produce byte-identical schema snapshots."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        name = tool.spec.name
        if not name:
            raise ValueError("a tool needs a name")
        if name in self._tools:
            raise ValueError(f"tool {name!r} is already registered")
        self._tools[name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._tools))

    def specs(self, names: Iterable[str] | None = None) -> tuple[ToolSpec, ...]:
        """The schema snapshot: specs of ``names`` (all tools when None), sorted by name.

        Names no longer registered are left out (a session pinned before a tool was removed
        still gets a valid request)."""
        wanted = self.names() if names is None else sorted(set(names))
        return tuple(self._tools[n].spec for n in wanted if n in self._tools)

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry holding only ``names`` (unknown names ignored): a session's pinned set,
        or a delegated child's tools."""
        return ToolRegistry(self._tools[n] for n in sorted(set(names)) if n in self._tools)

    def resolve_name(self, name: str) -> str | None:
        """Repair a near-miss name: exact, then lowercase, then "-" and " " mapped to "_"
        (hermes-facts §15). Fuzzy matches are suggestions only (``close_names``), never run."""
        if name in self._tools:
            return name
        repaired = name.strip().lower().replace("-", "_").replace(" ", "_")
        return repaired if repaired in self._tools else None

    def close_names(self, name: str) -> list[str]:
        """Registered names similar to ``name`` (difflib, cutoff 0.7), best first."""
        return difflib.get_close_matches(name.lower(), self.names(), n=3,
                                         cutoff=NAME_MATCH_CUTOFF)


def check_arguments(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """Check ``args`` against the JSON-schema subset our tools use: required keys,
    additionalProperties false, property types, minimum/maximum, array items.

    Returns a sentence describing the first problem, or None when the arguments fit.
    """
    return _check_object(schema, args, "")


def _check_object(schema: dict[str, Any], value: dict[str, Any], where: str) -> str | None:
    props: dict[str, Any] = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            return f"missing required argument '{where}{key}'"
    if schema.get("additionalProperties") is False:
        extra = sorted(k for k in value if k not in props)
        if extra:
            return (f"unexpected argument '{where}{extra[0]}' (allowed: "
                    f"{', '.join(sorted(props))})")
    for key, sub in props.items():
        if key in value:
            problem = _check_value(sub, value[key], f"{where}{key}")
            if problem:
                return problem
    return None


def _check_value(schema: dict[str, Any], value: Any, where: str) -> str | None:
    kind = schema.get("type")
    if kind in _JSON_TYPES:
        ok = isinstance(value, _JSON_TYPES[kind])
        if kind in ("integer", "number") and isinstance(value, bool):
            ok = False
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            ok = True  # 10.0 from a sloppy model is still ten
        if not ok:
            return f"argument '{where}' must be of type {kind}, got {type(value).__name__}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"argument '{where}' must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"argument '{where}' must be at most {schema['maximum']}"
    if kind == "array" and "items" in schema:
        for index, item in enumerate(value):
            problem = _check_value(schema["items"], item, f"{where}[{index}]")
            if problem:
                return problem
    if kind == "object" and isinstance(value, dict):
        return _check_object(schema, value, f"{where}.")
    return None


def default_registry() -> ToolRegistry:
    """A fresh registry with the file and terminal tools: read_file, write_file, patch,
    search_files, terminal (hermes-facts §18, the file and terminal toolsets)."""
    return ToolRegistry([ReadFile(), WriteFile(), Patch(), SearchFiles(), Terminal()])


def builtin_tools() -> tuple[Tool, ...]:
    """Fresh instances of every built-in tool: the file and terminal tools, the skills
    tools, session_search, delegate (issue 12), memory, todo, clarify and execute_code
    (issue 13)."""
    return (ReadFile(), WriteFile(), Patch(), SearchFiles(), Terminal(), SkillsListTool(),
            SkillViewTool(), SessionSearchTool(), DelegateTool(), MemoryTool(), TodoTool(),
            ClarifyTool(), ExecuteCode())


@lru_cache(maxsize=1)
def builtin_registry() -> ToolRegistry:
    """The built-in tools, shared: do not register into it (build a ToolRegistry of
    ``builtin_tools()`` for that). The policy judges a call by these tools' declarations
    when the caller passes no registry (the ``hermes policy`` CLI, pure tests)."""
    return ToolRegistry(builtin_tools())
