"""The transcript: converting Message rows to and from agents.messages.Message, and
inserting them. Callers insert inside a transaction that has re-validated the turn lease
(sessions/sink.py, sessions/context.py).

Display and export paths read ``content`` (what a human reads); replay to a provider reads
``wire_text`` (the sidecar ``sent_content`` when present), never re-derived or sanitised
(seed, "The database stores a different string than the model saw").
"""

from __future__ import annotations

from django.db.models import F
from django.utils import timezone

from agents.messages import Message as AgentMessage
from agents.messages import ToolCall
from sessions.models import Message, Session


def message_to_agent(row: Message) -> AgentMessage:
    """A stored row as the harness's value object (reasoning carried for display only)."""
    return AgentMessage(
        role=row.role, content=row.content, sent_content=row.sent_content,
        tool_calls=tuple(ToolCall.from_dict(c) for c in row.tool_calls or ()),
        tool_call_id=row.tool_call_id or None, tool_name=row.tool_name or None,
        is_error=row.is_error, reasoning=row.reasoning or None,
        stable_prefix_len=row.stable_prefix_chars, kind=row.kind, id=row.id,
    )


def history_load(*, session: Session) -> list[AgentMessage]:
    """Live messages ordered by id: exactly what the model sees next."""
    rows = Message.objects.filter(session=session, active=True).order_by("id")
    return [message_to_agent(r) for r in rows]


def message_row(*, session: Session, message: AgentMessage, kind: str = "",
                tool_meta: dict | None = None) -> Message:
    """An unsaved row for ``message`` (the one place the agent → row mapping lives).
    ``kind``: overrides ``message.kind`` when given. ``tool_meta``: a tool result's display
    metadata (agents.tools.ToolOutput.metadata)."""
    return Message(
        session=session, role=message.role, content=message.content,
        sent_content=message.sent_content,
        tool_calls=[c.to_dict() for c in message.tool_calls],
        tool_call_id=message.tool_call_id or "", tool_name=message.tool_name or "",
        is_error=message.is_error, reasoning=message.reasoning or "",
        kind=kind or message.kind,
        stable_prefix_chars=message.stable_prefix_len, tool_meta=tool_meta or {},
    )


def _insert(*, session: Session, message: AgentMessage, kind: str = "",
            tool_meta: dict | None = None) -> Message:
    row = message_row(session=session, message=message, kind=kind, tool_meta=tool_meta)
    row.save(force_insert=True)
    Session.objects.filter(pk=session.pk).update(message_count=F("message_count") + 1,
                                                 last_activity_at=timezone.now())
    return row


def message_to_display(row: Message) -> dict:
    """A row for the chat UI and events: display text (``content``), flags, tool calls."""
    return {
        "id": row.id, "role": row.role, "content": row.content, "kind": row.kind,
        "tool_calls": row.tool_calls, "tool_call_id": row.tool_call_id,
        "tool_name": row.tool_name, "is_error": row.is_error, "tool_meta": row.tool_meta or {},
        "active": row.active, "compacted": row.compacted, "has_sidecar": row.has_sidecar,
    }
