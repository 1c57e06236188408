"""The chat websocket: replay the gap from the database, then the live tail, deduplicated.

Protocol (docs/protocol.md): the client sends {"type": "hello", "last_seq": N}; the server
answers with every stored event with seq > N, then live events, each exactly once and in seq
order. The consumer joins the groups BEFORE reading the backlog and buffers live events until
the backlog is sent, so an event committed in between is neither lost nor sent twice; a live
event that skips a seq triggers a database read of the gap. No business logic here: a
"message" frame calls turn_start, a "stop" frame turn_stop (style.md §2.9).
"""

from __future__ import annotations

import asyncio
import json
import logging

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.exceptions import ValidationError
from django.http import Http404

from sessions.events import event_to_dict, session_group, socket_loop_register, user_group
from sessions.rendering import APPROVAL_EVENTS, PLAIN_EVENTS, event_frame
from sessions.selectors import event_list_after, session_get
from sessions.services import turn_start, turn_stop

log = logging.getLogger("hermes.consumers")

CLOSE_UNAUTHENTICATED = 4401
"""Close code: no logged-in user, or the user logged out (force.close)."""
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
"""Close code: unknown session or one the user may not read (the two look the same)."""
REPLAY_PAGE = 1000
"""Events read from the database per query while replaying."""


@database_sync_to_async
def asession_get(*, user, session_id: int, write: bool = False):
    """sessions.selectors.session_get for the event loop (Http404 when not visible)."""
    return session_get(user=user, session_id=session_id, write=write)


@database_sync_to_async
def aevent_list_after(*, session_id: int, after_seq: int) -> list[dict]:
    """One page of stored events after ``after_seq``, as wire dicts, for replay."""
    return [event_to_dict(e) for e in event_list_after(session_id=session_id,
                                                       after_seq=after_seq, limit=REPLAY_PAGE)]


class SessionConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab watching one session (owner or team admin)."""

    async def connect(self) -> None:
        socket_loop_register(asyncio.get_running_loop())  # see events.group_publish
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            session = await asession_get(user=user, session_id=self.scope["url_route"]
                                         ["kwargs"]["session_id"])
        except Http404:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session_id: int = session.pk
        self.user = user
        self.sent_seq: int | None = None  # None until the hello's backlog is sent
        self.pending: list[dict] = []
        self.joined = [session_group(session.pk), user_group(user.pk)]
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    # --- frames from the browser --------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        """Malformed frames get an error frame; the socket stays open."""
        try:
            content = json.loads(text_data or "")
        except ValueError:
            await self.send_error("The frame is not valid JSON.")
            return
        if not isinstance(content, dict):
            await self.send_error("A frame must be a JSON object with a \"type\".")
            return
        await self.receive_json(content)

    async def receive_json(self, content: dict, **kwargs) -> None:
        kind = content.get("type")
        if kind == "hello":
            last_seq = content.get("last_seq", 0)
            if isinstance(last_seq, bool) or not isinstance(last_seq, int) or last_seq < 0:
                await self.send_error("last_seq must be a non-negative integer.")
                return
            await self.replay(last_seq)
        elif kind == "message":
            await self.start_turn(content.get("text"))
        elif kind == "stop":
            await self.stop_turn()
        else:
            await self.send_error(f"Unknown frame type {str(kind)[:40]!r}; expected hello, "
                                  "message or stop.")

    async def send_error(self, reason: str) -> None:
        await self.send_json({"type": "error", "payload": {"reason": reason}})

    async def start_turn(self, text) -> None:
        if not isinstance(text, str):
            await self.send_error("A message frame needs a \"text\" string.")
            return
        try:
            await database_sync_to_async(self._start_turn)(text)
        except (ValidationError, Http404) as exc:
            reason = (" ".join(exc.messages) if isinstance(exc, ValidationError)
                      else "Only the session's owner can send messages.")
            await self.send_error(reason)

    def _start_turn(self, text: str) -> None:
        session = session_get(user=self.user, session_id=self.session_id, write=True)
        turn_start(session=session, user=self.user, text=text)

    async def stop_turn(self) -> None:
        try:
            session = await asession_get(user=self.user, session_id=self.session_id,
                                         write=True)
        except Http404:
            await self.send_error("Only the session's owner can stop a turn.")
            return
        await database_sync_to_async(turn_stop)(session=session)

    # --- replay and the live tail -------------------------------------------------------
    async def replay(self, last_seq: int) -> None:
        """Send stored events after ``last_seq``, then the buffered live ones not yet sent."""
        self.sent_seq = None
        await self.send_from_db(last_seq)
        pending, self.pending = self.pending, []
        for event in sorted(pending, key=lambda e: e["seq"]):
            await self.deliver(event)

    async def send_from_db(self, after: int) -> None:
        while True:
            events = await aevent_list_after(session_id=self.session_id, after_seq=after)
            for event in events:
                await self.send_frame(event)
            after = events[-1]["seq"] if events else after
            self.sent_seq = max(self.sent_seq or 0, after)
            if len(events) < REPLAY_PAGE:
                return

    async def deliver(self, event: dict) -> None:
        """Send a live event once, filling any seq gap from the database first."""
        if event["seq"] <= self.sent_seq:
            return
        if event["seq"] > self.sent_seq + 1:
            await self.send_from_db(self.sent_seq)
            return
        await self.send_frame(event)
        self.sent_seq = event["seq"]

    async def send_frame(self, event: dict) -> None:
        if event["type"] in APPROVAL_EVENTS:
            frame = await database_sync_to_async(event_frame)(event, user=self.user)
        elif event["type"] in PLAIN_EVENTS:
            frame = dict(event)  # no partial: nothing to render
        else:
            # Markdown and templates cost milliseconds; rendered on the event loop they held
            # up every other socket's text deltas (benchmarks/bench_stream.py tail).
            frame = await sync_to_async(event_frame, thread_sensitive=False)(event)
        await self.send_json(frame)

    # --- channel-layer handlers ---------------------------------------------------------
    async def run_event(self, message: dict) -> None:
        """A published event: this session's go through replay/dedupe; another session's
        (arriving on the user group, e.g. an approval elsewhere) are forwarded as is."""
        event = message["event"]
        if event.get("session_id") != self.session_id:
            await self.send_frame(event)
        elif self.sent_seq is None:
            self.pending.append(event)
        else:
            await self.deliver(event)

    async def run_events(self, message: dict) -> None:
        """Several events of one group sent as one channel message, in order (the
        publisher merges events that queued behind a slow send; sessions/events.py)."""
        for event in message["events"]:
            await self.run_event({"type": "run.event", "event": event})

    async def force_close(self, message: dict) -> None:
        """The user logged out: close every socket of theirs."""
        await self.close(code=CLOSE_UNAUTHENTICATED)

    async def dispatch(self, message: dict) -> None:
        """Ignore group messages of types this consumer does not handle (other apps may
        publish to the user group) instead of crashing the socket."""
        handler_name = message.get("type", "").replace(".", "_")
        if not handler_name.startswith("websocket_") and not hasattr(self, handler_name):
            log.debug("ignoring channel message of type %r", message.get("type"))
            return
        await super().dispatch(message)
