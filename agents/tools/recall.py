"""session_search: the agent's long-term recall, a full-text query over every message of
the user's sessions (seed, "Where the conversation actually lives"; hermes-facts §5).

The query itself runs on the Django side (sessions/search.py) and is injected as
``ctx.extras["session_search"]`` (query -> list of hit dicts); this module defines the tool
and formats hits for the model. No model calls anywhere in the path.
"""

from __future__ import annotations

from typing import Any

from agents.errors import ToolError
from agents.messages import ToolSpec
from agents.tools import Access, ToolContext, ToolOutput

MAX_QUERY_CHARS = 500


class SessionSearchTool:
    """Search past conversations; read-only."""

    spec = ToolSpec(
        name="session_search",
        description=("Search every past message of this user's conversations (full text). "
                     "Returns matching snippets with a few messages around each hit, one hit "
                     "per conversation. Use it to recall earlier decisions, files or facts."),
        input_schema={"type": "object", "properties": {
            "query": {"type": "string", "description": "Words to look for."}},
            "required": ["query"], "additionalProperties": False},
    )
    read_only = True
    interactive = False

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return []

    def command(self, args: dict[str, Any]) -> str | None:
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext):
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        query = str(args.get("query", "")).strip()[:MAX_QUERY_CHARS]
        if not query:
            raise ToolError("query is empty: give one or more words to search for")
        search = ctx.extras.get("session_search")
        if search is None:
            raise ToolError("session search is not available in this context")
        hits = search(query)
        if not hits:
            return ToolOutput(text=f"No past messages match {query!r}.")
        blocks = []
        for hit in hits:
            where = "this conversation" if hit.get("current_session") else (
                f"conversation #{hit['session_id']} ({hit['title']})")
            lines = [f"== {where}, message #{hit['message_id']} ({hit['role']}"
                     + (", summarised away" if hit.get("archived") else "") + ")",
                     f"match: {hit['snippet']}"]
            for item in hit.get("window", ()):
                lines.append(f"  [{item['id']} {item['role']}] {item['text']}")
            blocks.append("\n".join(lines))
        return ToolOutput(text="\n\n".join(blocks))
