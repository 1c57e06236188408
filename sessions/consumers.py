"""The chat websocket: replay the gap from the database, then the live tail, deduplicated.

Protocol (docs/protocol.md): the client sends {"type": "hello", "last_seq": N}; the server
answers with every stored event with seq > N, then live events, each exactly once and in seq
order. The consumer joins the groups BEFORE reading the backlog and buffers live events until
the backlog is sent, so an event committed in between is neither lost nor sent twice; a live
event that skips a seq triggers a database read of the gap. No business logic here: a
"message" frame calls turn_start, a "steer" frame turn_steer, a "stop" frame turn_stop (style.md §2.9).

The socket's user is fixed at connect, so the login is re-validated (session row present and
unexpired, same user, session auth hash still matching the password) before every frame that
acts, and the socket closes with 4401 when it fails; sessions/signals.py closes sockets
promptly on logout, session deletion and password change (issue 8, finding 11). A bad frame
(not JSON, too deep, too big, invalid Unicode, a NUL in a message) gets an error frame and
the socket stays open (finding 12).
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime
from importlib import import_module

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.core.exceptions import ValidationError
from django.http import Http404
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from sessions.events import event_to_dict, session_group, socket_loop_register, user_group
from sessions.forms import MessageForm
from sessions.models import Session
from sessions.rendering import APPROVAL_EVENTS, PLAIN_EVENTS, event_frame, viewer_label
from sessions.selectors import event_list_after, session_get
from sessions.services import turn_start, turn_steer, turn_stop
from sessions.signals import login_group

log = logging.getLogger("hermes.consumers")

CLOSE_UNAUTHENTICATED = 4401
"""Close code: no logged-in user, or the user logged out (force.close)."""
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
"""Close code: unknown session or one the user may not read (the two look the same)."""
REPLAY_PAGE = 1000
"""Events read from the database per query while replaying."""
MAX_FRAME_CHARS = 8 * 100_000 + 4096
"""Largest inbound text frame parsed (chars): a 100,000-char message (HERMES
MAX_MESSAGE_CHARS) with every char JSON-escaped as \\uXXXX (6 chars) still fits; beyond it
the frame is refused unread."""
MAX_EXPIRY_WAIT = 24 * 3600
"""Longest wait (seconds) before a socket re-checks its login on its own."""


def login_session_valid(*, session_key: str | None, user_id: int) -> bool:
    """True while the Django session ``session_key`` still logs in ``user_id``: the row
    exists and is unexpired (SessionStore.load), names the same user and an allowed backend,
    the user still authenticates (the backend's get_user: present and active), and the stored
    session auth hash matches the current password's (or a SECRET_KEY_FALLBACKS one), as
    django.contrib.auth.get_user decides, but read-only: it never flushes or cycles the
    session it checks. Any missing piece is False (fail closed). Two queries."""
    if not session_key:
        return False
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    if str(data.get(SESSION_KEY, "")) != str(user_id):
        return False
    backend_path = data.get(BACKEND_SESSION_KEY)
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    user = load_backend(backend_path).get_user(user_id)
    stored = data.get(HASH_SESSION_KEY)
    if user is None or not stored or not hasattr(user, "get_session_auth_hash"):
        return False
    return (constant_time_compare(stored, user.get_session_auth_hash())
            or any(constant_time_compare(stored, fallback)
                   for fallback in user.get_session_auth_fallback_hash()))


def login_session_expiry(session_key: str) -> datetime | None:
    """When the stored session row expires (database-backed engines), else None."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    model = getattr(store, "model", None)
    if model is None:
        return None
    return model.objects.filter(session_key=session_key).values_list(
        "expire_date", flat=True).first()


def frame_parse(text_data: str | None) -> tuple[dict | None, str]:
    """Parse one inbound text frame: (the JSON object, "") or (None, a reason to send back).
    Refuses, without a traceback: a missing or binary frame, more than MAX_FRAME_CHARS,
    invalid JSON, nesting too deep for the parser (a RecursionError, e.g. 100,000 "["),
    anything but an object, and strings holding a lone surrogate (escaped as \\ud800: valid
    JSON, but not Unicode text, and PostgreSQL cannot store it)."""
    if not text_data:
        return None, "Send JSON text frames."
    if len(text_data) > MAX_FRAME_CHARS:
        return None, (f"The frame is {len(text_data):,} characters; frames are limited to "
                      f"{MAX_FRAME_CHARS:,}.")
    try:
        content = json.loads(text_data)
    except RecursionError:
        return None, "The frame is nested too deeply."
    except ValueError:
        return None, "The frame is not valid JSON."
    if not isinstance(content, dict):
        return None, "A frame must be a JSON object with a \"type\"."
    try:
        json.dumps(content, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return None, "The frame holds invalid Unicode (a lone surrogate)."
    except RecursionError:  # an object nested within the parser's limit but not dumps'
        return None, "The frame is nested too deeply."
    return content, ""


async def asession_get(*, user, session_id: int, write: bool = False):
    """sessions.selectors.session_get for the event loop (Http404 when not visible); a read,
    run on the worker-thread pool (see SessionConsumer.start_turn)."""
    return await database_sync_to_async(session_get, thread_sensitive=False)(
        user=user, session_id=session_id, write=write)


def event_page(*, session_id: int, after_seq: int) -> list[dict]:
    """One page of stored events after ``after_seq``, as wire dicts, for replay."""
    return [event_to_dict(e) for e in event_list_after(session_id=session_id,
                                                       after_seq=after_seq, limit=REPLAY_PAGE)]


async def aevent_list_after(*, session_id: int, after_seq: int) -> list[dict]:
    """event_page for the event loop: a read, on the worker-thread pool (a gap filled while
    100 sessions stream must not queue behind other sockets' calls on the one
    thread-sensitive thread)."""
    return await database_sync_to_async(event_page, thread_sensitive=False)(
        session_id=session_id, after_seq=after_seq)


def connect_checks(*, user, session_id, login_key: str | None
                   ) -> int | tuple[Session, str, datetime | None]:
    """Everything a socket's connect reads, in one call: the session (``user`` may read
    it), the viewer label and when the login row expires. Returns (session, label, expiry)
    or CLOSE_NOT_FOUND. The login itself was just checked by the auth middleware (channels'
    get_user: the same row, backend, user and auth hash as login_session_valid).

    Read-only and self-contained, so the consumer runs it on the worker-thread pool, not
    on daphne's one thread-sensitive database thread (a hundred sockets reconnecting at
    once queued there; docs/reliability.md)."""
    try:
        session = session_get(user=user, session_id=session_id)
    except Http404:
        return CLOSE_NOT_FOUND
    return (session, viewer_label(session=session, user=user),
            login_session_expiry(login_key) if login_key else None)


def hello_page(*, login_key: str | None, user, session_id: int,
               after_seq: int) -> list[dict] | None:
    """The hello's reads in one call (read-only; run on the worker-thread pool like
    connect_checks): None when the login behind the socket ended, else the first page of
    stored events after ``after_seq`` (wire dicts)."""
    if not login_session_valid(session_key=login_key, user_id=user.pk):
        return None
    return [event_to_dict(e) for e in event_list_after(session_id=session_id,
                                                       after_seq=after_seq, limit=REPLAY_PAGE)]


def frames_render(events: list[dict], *, user, user_label: str) -> list[dict]:
    """event_frame for each event; approval events need ``user`` (and the database)."""
    return [dict(e) if e["type"] in PLAIN_EVENTS
            else event_frame(e, user=user if e["type"] in APPROVAL_EVENTS else None,
                             user_label=user_label)
            for e in events]


class SessionConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab watching one session (owner or team admin)."""

    async def connect(self) -> None:
        socket_loop_register(asyncio.get_running_loop())  # see events.group_publish
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.login_key: str | None = getattr(self.scope.get("session"), "session_key", None)
        opened = await database_sync_to_async(connect_checks, thread_sensitive=False)(
            user=user, session_id=self.scope["url_route"]["kwargs"]["session_id"],
            login_key=self.login_key)
        if isinstance(opened, int):
            await self.close(code=opened)
            return
        session, self.user_label, expires = opened
        self.session_id: int = session.pk
        self.user = user
        self.expiry_timer: asyncio.TimerHandle | None = None
        self.sent_seq: int | None = None  # None until the hello's backlog is sent
        self.pending: list[dict] = []
        self.joined = [session_group(session.pk), user_group(user.pk),
                       login_group(self.login_key)]
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        self.schedule_expiry(expires)

    # --- the login behind the socket ----------------------------------------------------
    async def login_still_valid(self) -> bool:
        """Re-check the login (login_session_valid); close with 4401 when it ended. Read-only,
        so it runs on the worker-thread pool (see start_turn)."""
        if await database_sync_to_async(login_session_valid, thread_sensitive=False)(
                session_key=self.login_key, user_id=self.user.pk):
            return True
        await self.close(code=CLOSE_UNAUTHENTICATED)
        return False

    async def schedule_expiry_check(self) -> None:
        """Close the socket when its session row expires (no signal fires at expiry)."""
        self.schedule_expiry(await database_sync_to_async(login_session_expiry)(self.login_key))

    def schedule_expiry(self, expires: datetime | None) -> None:
        """Call expiry_check when the login's row expires (``expires``; None: never)."""
        if expires is None:
            return
        wait = min(max((expires - timezone.now()).total_seconds(), 0) + 1, MAX_EXPIRY_WAIT)
        loop = asyncio.get_running_loop()
        self.expiry_timer = loop.call_later(wait, lambda: loop.create_task(self.expiry_check()))

    async def expiry_check(self) -> None:
        if await self.login_still_valid():
            await self.schedule_expiry_check()

    async def disconnect(self, code: int) -> None:
        timer = getattr(self, "expiry_timer", None)
        if timer is not None:
            timer.cancel()
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    # --- frames from the browser --------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        """Malformed frames get an error frame and the socket stays open (frame_parse); an
        unexpected failure while handling a frame is logged and answered the same way, never
        closing the socket with 1011 and a traceback."""
        content, problem = frame_parse(text_data)
        if content is None:
            await self.send_error(problem)
            return
        try:
            await self.receive_json(content)
        except Exception:
            log.exception("chat socket: handling a %r frame failed", content.get("type"))
            await self.send_error("The server could not handle this frame.")

    async def receive_json(self, content: dict, **kwargs) -> None:
        kind = content.get("type")
        if kind == "hello":
            last_seq = content.get("last_seq", 0)
            if isinstance(last_seq, bool) or not isinstance(last_seq, int) or last_seq < 0:
                await self.send_error("last_seq must be a non-negative integer.")
                return
            await self.replay(last_seq)  # re-checks the login in the same query batch
            return
        if kind in ("message", "steer", "stop") and not await self.login_still_valid():
            return
        if kind in ("message", "steer"):  # "steer": a correction for the running turn
            await self.start_turn(content.get("text"), steer=kind == "steer")
        elif kind == "stop":
            await self.stop_turn()
        else:
            await self.send_error(f"Unknown frame type {str(kind)[:40]!r}; expected hello, "
                                  "message, steer or stop.")

    async def send_error(self, reason: str) -> None:
        await self.send_json({"type": "error", "payload": {"reason": reason}})

    async def start_turn(self, text, *, steer: bool = False) -> None:
        if not isinstance(text, str):
            await self.send_error("A message frame needs a \"text\" string.")
            return
        form = MessageForm(data={"text": text})  # the HTTP form's rules (NUL included)
        if not form.is_valid():
            await self.send_error(" ".join(form.errors["text"]))
            return
        try:
            # On the worker-thread pool, not daphne's ONE thread-sensitive thread: a turn
            # start is a transaction of its own (services.turn_start) and needs no thread
            # affinity, and on that one thread 100 sockets' messages started their turns
            # one after another, the last ~20 s after it was sent (benchmarks/
            # bench_stream.py, "first token sent after the message"). One socket's frames
            # are still handled one at a time, in order.
            await database_sync_to_async(self._start_turn, thread_sensitive=False)(
                form.cleaned_data["text"], steer)
        except (ValidationError, Http404) as exc:
            reason = (" ".join(exc.messages) if isinstance(exc, ValidationError)
                      else "Only the session's owner can send messages.")
            await self.send_error(reason)

    def _start_turn(self, text: str, steer: bool = False) -> None:
        session = session_get(user=self.user, session_id=self.session_id, write=True)
        (turn_steer if steer else turn_start)(session=session, user=self.user, text=text)

    async def stop_turn(self) -> None:
        try:
            session = await asession_get(user=self.user, session_id=self.session_id,
                                         write=True)
        except Http404:
            await self.send_error("Only the session's owner can stop a turn.")
            return
        await database_sync_to_async(turn_stop, thread_sensitive=False)(session=session)

    # --- replay and the live tail -------------------------------------------------------
    async def replay(self, last_seq: int) -> None:
        """Re-check the login and send stored events after ``last_seq``, then the buffered
        live ones not yet sent. The login check and the first page are one call
        (hello_page)."""
        self.sent_seq = None
        events = await database_sync_to_async(hello_page, thread_sensitive=False)(
            login_key=self.login_key, user=self.user, session_id=self.session_id,
            after_seq=last_seq)
        if events is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        await self.send_page(events, after=last_seq)
        pending, self.pending = self.pending, []
        for event in sorted(pending, key=lambda e: e["seq"]):
            await self.deliver(event)

    async def send_from_db(self, after: int) -> None:
        while True:
            events = await aevent_list_after(session_id=self.session_id, after_seq=after)
            if not await self.send_page(events, after=after):
                return
            after = self.sent_seq

    async def send_page(self, events: list[dict], *, after: int) -> bool:
        """Send one page of stored events (rendered in one worker-thread trip, not one per
        event); True when the page was full (more may follow)."""
        for frame in await self.frames(events):
            await self.send_json(frame)
        self.sent_seq = max(self.sent_seq or 0, events[-1]["seq"] if events else after)
        return len(events) >= REPLAY_PAGE

    async def frames(self, events: list[dict]) -> list[dict]:
        """The frames for ``events``: approval cards read the database (who may decide), the
        rest render from their payload alone, off the event loop."""
        if any(e["type"] in APPROVAL_EVENTS for e in events):
            return await database_sync_to_async(frames_render)(events, user=self.user,
                                                               user_label=self.user_label)
        if all(e["type"] in PLAIN_EVENTS for e in events):
            return [dict(e) for e in events]  # no partial: nothing to render
        # Markdown and templates cost milliseconds; rendered on the event loop they held
        # up every other socket's text deltas (benchmarks/bench_stream.py tail).
        return await sync_to_async(frames_render, thread_sensitive=False)(
            events, user=None, user_label=self.user_label)

    async def deliver(self, event: dict) -> None:
        """Send a live event once, filling any seq gap from the database first."""
        if event["seq"] <= self.sent_seq:
            return
        if event["seq"] > self.sent_seq + 1:
            await self.send_from_db(self.sent_seq)
            return
        if event["type"] in PLAIN_EVENTS:  # most live frames (text.delta): no rendering
            await self.send(text_data=json.dumps(event))
        else:
            await self.send_frame(event)
        self.sent_seq = event["seq"]

    async def send_frame(self, event: dict) -> None:
        for frame in await self.frames([event]):
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
        """This socket's login ended (logout, session row deleted): close it."""
        await self.close(code=CLOSE_UNAUTHENTICATED)

    async def session_check(self, message: dict) -> None:
        """The user row or one of their team memberships changed (password, is_active, a
        team admin removed from the team): close unless the login still holds and the user
        may still read this session (a removed admin's open socket must stop streaming)."""
        if not await self.login_still_valid():
            return
        try:
            await asession_get(user=self.user, session_id=self.session_id)
        except Http404:
            await self.close(code=CLOSE_NOT_FOUND)

    async def dispatch(self, message: dict) -> None:
        """Ignore group messages of types this consumer does not handle (other apps may
        publish to the user group) instead of crashing the socket.

        The live tail (run.event, run.events) is handled here directly: channels' dispatch
        first awaits aclose_old_connections(), a hop through the ONE thread-sensitive
        worker thread for every channel message, shared with every socket's database calls
        (a fifth of daphne's time and a queue in front of every frame with 20-100 sessions
        streaming: benchmarks/bench_stream.py --profile). These handlers touch the database
        only through database_sync_to_async, which closes stale connections in its own
        thread."""
        kind = message.get("type", "")
        if kind == "run.event":
            await self.run_event(message)
            return
        if kind == "run.events":
            await self.run_events(message)
            return
        handler_name = kind.replace(".", "_")
        if not handler_name.startswith("websocket_") and not hasattr(self, handler_name):
            log.debug("ignoring channel message of type %r", message.get("type"))
            return
        await super().dispatch(message)
