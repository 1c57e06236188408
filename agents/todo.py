"""The todo list: a per-session task list the model keeps (pure rules; storage is
sessions/tool_state.py). hermes' todo tool: write the whole list, or merge updates into it by
item id. Items are {"id", "content", "status"} with status pending / in_progress /
completed / cancelled.
"""

from __future__ import annotations

from typing import Any

STATUSES = ("pending", "in_progress", "completed", "cancelled")
MAX_ITEMS = 50
"""Items on one list: a plan longer than this is not a todo list."""
MAX_CONTENT_CHARS = 500
"""Characters of one item's text."""


class TodoRefused(ValueError):
    """A todo update that cannot be applied; the message is the tool result."""


def _item(raw: Any, index: int, *, partial: bool) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise TodoRefused(f"todos[{index}] must be an object with id, content and status")
    item_id = raw.get("id")
    if not isinstance(item_id, (str, int)) or isinstance(item_id, bool) or not str(item_id).strip():
        raise TodoRefused(f"todos[{index}] needs a non-empty id")
    out = {"id": str(item_id).strip()[:64]}
    content, status = raw.get("content"), raw.get("status")
    if content is not None or not partial:
        if not isinstance(content, str) or not content.strip():
            raise TodoRefused(f"todos[{index}] needs non-empty content")
        if len(content) > MAX_CONTENT_CHARS:
            raise TodoRefused(f"todos[{index}].content is longer than {MAX_CONTENT_CHARS} "
                              "characters")
        out["content"] = content.strip()
    if status is not None or not partial:
        status = "pending" if status is None else status
        if status not in STATUSES:
            raise TodoRefused(f"todos[{index}].status must be one of {', '.join(STATUSES)}")
        out["status"] = status
    return out


def todo_apply(current: list[dict], todos: Any, *, merge: bool = False) -> list[dict]:
    """The list after one call. ``merge`` False: ``todos`` replaces the list (every item
    needs id and content; status defaults to pending). ``merge`` True: each item updates the
    item with its id (content and/or status), and an unknown id with content is appended.
    Raises TodoRefused for bad items, duplicate ids, an unknown id without content, or more
    than MAX_ITEMS items; nothing changes then."""
    if not isinstance(todos, list):
        raise TodoRefused("todos must be a list of items")
    items = [_item(raw, i, partial=merge) for i, raw in enumerate(todos)]
    ids = [i["id"] for i in items]
    if len(set(ids)) != len(ids):
        raise TodoRefused("todo ids must be unique within one call")
    if not merge:
        result = items
    else:
        result = [dict(i) for i in current]
        by_id = {i["id"]: i for i in result}
        for item in items:
            if item["id"] in by_id:
                by_id[item["id"]].update(item)
            elif "content" in item:
                item.setdefault("status", "pending")
                result.append(item)
                by_id[item["id"]] = item
            else:
                raise TodoRefused(f"no todo item has id {item['id']!r}; give its content to "
                                  "add it")
    if len(result) > MAX_ITEMS:
        raise TodoRefused(f"a todo list holds at most {MAX_ITEMS} items")
    return result


def todo_render(items: list[dict]) -> str:
    """The list as the tool result: one line per item with a status mark, and counts."""
    if not items:
        return "Todo list is empty."
    marks = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "cancelled": "[-]"}
    lines = [f"{marks.get(i['status'], '[ ]')} {i['id']}. {i['content']}" for i in items]
    done = sum(1 for i in items if i["status"] == "completed")
    lines.append(f"({done}/{len(items)} completed)")
    return "\n".join(lines)
