"""DbSink: the EventSink the loop reports to, backed by rows and RunEvents.

Every message is stored in a transaction that re-validates the turn lease, then announced as
an event (written, then published after commit). Text deltas are batched about every 50 ms so
a fast stream does not become one row per token; the batch is flushed before any other event
so the order on the wire is the order things happened.
"""

from __future__ import annotations

import threading
import time

from django.db import transaction

from agents.messages import Message as AgentMessage
from agents.messages import ModelRequest, ModelResponse, ToolCall, Usage
from sessions.events import event_append
from sessions.leases import lease_validate
from sessions.models import Session, Turn, UsageRecord
from sessions.transcript import _insert, message_to_agent, message_to_display

DELTA_BATCH_SECONDS = 0.05
"""How long text deltas are gathered into one text.delta event (issue 2: about 50 ms)."""
STOP_CHECK_SECONDS = 0.25
"""How often the stop flag is read from the database while streaming."""


class DbSink:
    """EventSink for one turn of one session, writing under ``owner``'s lease.

    Not thread-safe for concurrent message_added calls from several threads; the loop stores
    messages from its own thread only (tool threads return results to it).
    """

    def __init__(self, *, session: Session, turn: Turn, owner: str):
        self.session = session
        self.turn = turn
        self.owner = owner
        self._buffer: list[str] = []
        self._last_flush = time.monotonic()
        self._last_stop_check = 0.0
        self._stop = False
        self._lock = threading.Lock()
        self.usage_total = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
                            "cache_write_tokens": 0, "calls": 0}
        self.estimate: int | None = None
        self.tool_meta: dict[str, dict] = {}
        """Display metadata of tool results not stored yet, by tool call id (the runner
        fills it from the dispatch outcome; message_added stores it on the row)."""
        self._calls: dict[str, dict] = {}

    # --- EventSink -----------------------------------------------------------------------
    def message_added(self, message: AgentMessage, *, kind: str = "") -> AgentMessage:
        """Store ``message`` and announce it; returns it with its row id. Raises LeaseLost."""
        self.flush()
        with transaction.atomic():
            lease_validate(session=self.session, owner=self.owner)
            meta = self.tool_meta.pop(message.tool_call_id, None) if message.tool_call_id else None
            row = _insert(session=self.session, message=message, kind=kind, tool_meta=meta)
            event_type = "tool.result" if row.role == "tool" else "message.added"
            payload = {"turn_id": self.turn.pk, "message": message_to_display(row)}
            call = self._calls.pop(row.tool_call_id, None) if row.role == "tool" else None
            if call is not None:  # so the card's summary can say what the call did
                payload["tool_call"] = call
            event_append(session_id=self.session.pk, type=event_type, payload=payload)
        return message_to_agent(row)

    def text_delta(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._buffer.append(text)
            due = time.monotonic() - self._last_flush >= DELTA_BATCH_SECONDS
        if due:
            self.flush()

    def flush(self) -> None:
        """Write the gathered text deltas as one text.delta event (no-op when empty)."""
        with self._lock:
            if not self._buffer:
                return
            text, self._buffer = "".join(self._buffer), []
            self._last_flush = time.monotonic()
        event_append(session_id=self.session.pk, type="text.delta",
                     payload={"turn_id": self.turn.pk, "text": text})

    def tool_called(self, call: ToolCall) -> None:
        self.flush()
        self._calls[call.id] = call.to_dict()
        event_append(session_id=self.session.pk, type="tool.called",
                     payload={"turn_id": self.turn.pk, "tool_call": call.to_dict()})

    def usage_recorded(self, usage: Usage | None, request: ModelRequest,
                       response: ModelResponse, *, purpose: str = "turn") -> None:
        """One UsageRecord per provider call (four disjoint buckets + raw) and a usage event."""
        self.flush()
        self.usage_total["calls"] += 1
        if usage is None:
            return
        UsageRecord.objects.create(
            session=self.session, turn=self.turn, user_id=self.session.owner_id,
            team_id=self.session.team_id, provider=self.session.provider,
            model=response.model or request.model, purpose=purpose,
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_5m_tokens=usage.cache_write_5m_tokens,
            cache_write_1h_tokens=usage.cache_write_1h_tokens,
            reasoning_tokens=usage.reasoning_tokens, estimated_prompt_tokens=self.estimate,
            raw=usage.raw,
        )
        for key, value in (("input_tokens", usage.input_tokens),
                           ("output_tokens", usage.output_tokens),
                           ("cache_read_tokens", usage.cache_read_tokens),
                           ("cache_write_tokens", usage.cache_write_tokens)):
            self.usage_total[key] += value
        event_append(session_id=self.session.pk, type="usage", payload={
            "turn_id": self.turn.pk, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens, "prompt_tokens": usage.prompt_tokens,
        })

    def should_stop(self) -> bool:
        """True once the user pressed stop (the flag is read at most every 250 ms)."""
        if self._stop:
            return True
        now = time.monotonic()
        if now - self._last_stop_check >= STOP_CHECK_SECONDS:
            self._last_stop_check = now
            self._stop = Session.objects.filter(pk=self.session.pk, stop_requested=True).exists()
        return self._stop
