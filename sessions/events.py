"""RunEvents: append (with the next per-session seq) and publish after commit.

Every streamed event is written first, then published to the session's channel group, so a
socket that reconnects gets the gap from the database (DESIGN.md §3). Event types and their
payloads are documented in docs/protocol.md; ``EVENT_TYPES`` is the closed list.
"""

from __future__ import annotations

import logging
import time

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F

from sessions.models import RunEvent, Session

log = logging.getLogger("hermes.events")

EVENT_TYPES = frozenset({
    "turn.queued", "turn.started", "text.delta", "message.added", "tool.called",
    "tool.result", "turn.finished", "turn.failed", "turn.cancelled", "turn.awaiting_approval",
    "approval.requested", "approval.decided", "compaction", "prune", "cache.warning",
    "usage", "error", "session.updated",
})


def session_group(session_id: int) -> str:
    """The channel-layer group every socket of one session joins."""
    return f"session_{session_id}"


def user_group(user_id: int) -> str:
    """The group of every socket of one user (approval badges, logout closes)."""
    return f"user_{user_id}"


def event_to_dict(event: RunEvent) -> dict:
    """The wire shape of an event (docs/protocol.md): seq, type, session_id, payload, ts."""
    return {"seq": event.seq, "type": event.type, "session_id": event.session_id,
            "payload": event.payload, "ts": event.created_at.timestamp()}


def event_append(*, session_id: int, type: str, payload: dict) -> RunEvent:
    """Store one event with the session's next seq and publish it after commit.

    Runs in its own (or the caller's) transaction: the UPDATE on the session row serialises
    seq allocation, so (session, seq) stays unique under concurrent writers.
    Raises ValueError for an unknown type.
    """
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    with transaction.atomic():
        Session.objects.filter(pk=session_id).update(event_seq=F("event_seq") + 1)
        seq = Session.objects.filter(pk=session_id).values_list("event_seq", flat=True).get()
        event = RunEvent.objects.create(session_id=session_id, seq=seq, type=type,
                                        payload=payload)
        data = event_to_dict(event)
        transaction.on_commit(lambda: group_publish(session_group(session_id), data))
    return event


def group_publish(group: str, data: dict, kind: str = "run.event") -> None:
    """Send ``data`` to a channel group; never raises into the caller (a dead layer must not
    fail a turn whose events are already stored and replayable)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, {"type": kind, "event": data,
                                                "sent_at": time.time()})
    except Exception:  # the event is in the database; the socket will replay it
        log.exception("publishing to %s failed", group)
