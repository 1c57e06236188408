"""Storage of the state tools' data: a user's durable memory and a session's todo list.

The rules are agents/memory.py and agents/todo.py; this module reads and writes the rows,
each write in a transaction under a row lock (two turns of one user writing memory at once
never lose an entry), and announces a todo change to the chat (``todo.updated``). The
toolbox hands these to the tools as callables (sessions/toolbox.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from agents.memory import memory_apply, memory_edit, memory_snapshot, memory_usage_line
from agents.todo import todo_apply
from sessions.events import event_append
from sessions.models import MemoryStore, Session, TodoList


def memory_limit() -> int:
    """Characters one user's memory may hold (HERMES["MEMORY_CHAR_LIMIT"])."""
    return int(settings.HERMES.get("MEMORY_CHAR_LIMIT", 2200))


def memory_entries(*, user_id: int) -> tuple[str, ...]:
    """The user's entries, oldest first (empty when none)."""
    entries = (MemoryStore.objects.filter(user_id=user_id)
               .values_list("entries", flat=True).first())
    return tuple(e for e in (entries or []) if isinstance(e, str))


def memory_snapshot_for(*, user_id: int) -> str:
    """The snapshot a new session's volatile tier carries."""
    return memory_snapshot(memory_entries(user_id=user_id))


def memory_change(*, user_id: int, action: str, content=None, old_text=None) -> str:
    """Apply one memory operation for ``user_id`` (agents/memory.py memory_apply) and store
    it; returns what changed plus the usage line. Raises MemoryRefused (nothing written)."""
    limit = memory_limit()
    with transaction.atomic():
        store, _ = MemoryStore.objects.get_or_create(user_id=user_id)
        store = MemoryStore.objects.select_for_update().get(pk=store.pk)
        current = tuple(e for e in store.entries or [] if isinstance(e, str))
        change = memory_apply(current, action, content=content, old_text=old_text,
                              limit=limit)
        if change.entries != current:
            store.entries = list(change.entries)
            store.save(update_fields=["entries", "updated_at"])
    return (f"{change.summary}. {memory_usage_line(change.entries, limit)}. Sessions started "
            "from now on see the change; this session's prompt keeps its snapshot.")


def todo_items(*, session_id: int) -> list[dict]:
    """The session's todo items (empty when none)."""
    items = TodoList.objects.filter(session_id=session_id).values_list("items", flat=True).first()
    return list(items or [])


def todo_change(*, session: Session, todos, merge: bool) -> list[dict]:
    """Apply one todo call (agents/todo.py todo_apply), store it and emit ``todo.updated``
    {"items"} in the same transaction. Raises TodoRefused (nothing written)."""
    with transaction.atomic():
        row, _ = TodoList.objects.get_or_create(session_id=session.pk)
        row = TodoList.objects.select_for_update().get(pk=row.pk)
        items = todo_apply(list(row.items or []), todos, merge=merge)
        if items != row.items:
            row.items = items
            row.save(update_fields=["items", "updated_at"])
            event_append(session_id=session.pk, type="todo.updated", payload={"items": items})
    return items


def memory_page_change(*, user, op: str, index: int | None = None, content=None) -> str:
    """The memory page's add / edit / delete for ``user`` (their own notes only: the row is
    looked up by the acting user). Returns a confirmation sentence; raises MemoryRefused
    (nothing written) for empty text, the cap, or a stale index."""
    limit = memory_limit()
    with transaction.atomic():
        store, _ = MemoryStore.objects.get_or_create(user_id=user.pk)
        store = MemoryStore.objects.select_for_update().get(pk=store.pk)
        current = tuple(e for e in store.entries or [] if isinstance(e, str))
        if op == "add":
            new = memory_apply(current, "add", content=content, limit=limit).entries
        elif op in ("edit", "delete") and index is not None:
            new = memory_edit(current, index, content if op == "edit" else None, limit=limit)
        else:
            raise MemoryRefused("unknown change")
        store.entries = list(new)
        store.save(update_fields=["entries", "updated_at"])
    return {"add": "Added.", "edit": "Saved.", "delete": "Deleted."}[op]
