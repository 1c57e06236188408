"""memory and todo: tools that keep state outside the workspace (a user's durable notes, a
session's task list). The rules are agents/memory.py and agents/todo.py; where the state is
stored is the caller's: ``ctx.extras["memory"]`` and ``ctx.extras["todo"]`` are callables the
composition root (sessions/toolbox.py) provides. Neither tool touches a file, so neither has
a path scope; neither is read-only, so the scheduler runs each as a barrier.
"""

from __future__ import annotations

from typing import Any

from agents.errors import ToolError
from agents.memory import ACTIONS, MemoryRefused
from agents.messages import ToolSpec
from agents.todo import STATUSES, TodoRefused, todo_render
from agents.tools import NoPathArguments, PathScope, ToolContext, ToolOutput

CHILD_MEMORY_ERROR = ("memory is read-only for delegated child agents (they never write "
                      "long-term memory); report the fact to the parent instead")


class MemoryTool(NoPathArguments):
    """memory {action: add|replace|remove, content?, old_text?} → what changed and the usage
    ("N/limit characters used"). ``ctx.extras["memory"](action, content, old_text) -> str``
    stores it (raises MemoryRefused: the cap, no match). ``ctx.extras["is_child"]`` True →
    an error result, nothing written."""

    spec = ToolSpec(
        name="memory",
        description=(
            "Save durable notes about the user or the project that future sessions should "
            "know (preferences, facts, conventions). add a new entry with content; replace or "
            "remove the entry containing old_text. Memory is capped in characters; the notes "
            "appear in the system prompt of sessions started after the change."),
        input_schema={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ACTIONS),
                           "description": "add, replace or remove."},
                "content": {"type": "string",
                            "description": "The entry text (add, replace)."},
                "old_text": {"type": "string", "description": "A unique part of the entry "
                             "to replace or remove."},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    )
    read_only = False

    effect = "state"  # a user's notes: no file, no command
    interactive = False

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if ctx.extras.get("is_child"):
            raise ToolError(CHILD_MEMORY_ERROR)
        store = ctx.extras.get("memory")
        if store is None:
            raise ToolError("memory is not available in this session")
        try:
            text = store(args.get("action"), args.get("content"), args.get("old_text"))
        except MemoryRefused as exc:
            raise ToolError(f"memory: {exc}") from None
        return ToolOutput(text=text)


class TodoTool(NoPathArguments):
    """todo {todos: [{id, content, status}], merge=false} → the whole list after the change.
    ``merge`` false replaces the list; true updates items by id. ``ctx.extras["todo"](todos,
    merge) -> list[dict]`` stores it (raises TodoRefused) and announces it to the chat."""

    spec = ToolSpec(
        name="todo",
        description=(
            "Keep a task list for multi-step work; the user sees it live. Pass the whole list "
            "(merge false) or only the items to change, by id (merge true). status: "
            + ", ".join(STATUSES) + ". Call with todos=[] and merge=true to read the list."),
        input_schema={
            "type": "object",
            "properties": {
                "todos": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": list(STATUSES)},
                    },
                    "required": ["id"],
                    "additionalProperties": False,
                }},
                "merge": {"type": "boolean",
                          "description": "Update items by id instead of replacing the list."},
            },
            "required": ["todos"],
            "additionalProperties": False,
        },
    )
    read_only = False

    effect = "state"  # the session's task list
    interactive = False

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        store = ctx.extras.get("todo")
        if store is None:
            raise ToolError("the todo list is not available in this session")
        try:
            items = store(args.get("todos"), bool(args.get("merge", False)))
        except TodoRefused as exc:
            raise ToolError(f"todo: {exc}; the list is unchanged") from None
        return ToolOutput(text=todo_render(items), metadata={"todos": len(items)})
