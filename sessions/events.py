"""RunEvents: append (with the next per-session seq) and publish after commit.

Every streamed event is written first, then published to the session's channel group, so a
socket that reconnects gets the gap from the database (DESIGN.md §3). Event types and their
payloads are documented in docs/protocol.md; ``EVENT_TYPES`` is the closed list.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections import deque

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import connections, router, transaction
from django.db.models import F
from django.utils import timezone

from sessions.models import RunEvent, Session

log = logging.getLogger("hermes.events")

EVENT_TYPES = frozenset({
    "turn.queued", "turn.started", "text.delta", "message.added", "tool.called",
    "tool.ended", "tool.result", "turn.finished", "turn.failed", "turn.cancelled", "turn.awaiting_approval",
    "approval.requested", "approval.decided", "compaction", "prune", "cache.warning",
    "usage", "error", "session.updated", "turn.recovered", "budget.exceeded",
    "budget.warning",
    # provider failures (issue 10): a history repaired after a shape 400, the compaction
    # breaker pausing automatic compaction, a failover to another key or provider
    "history.repaired", "compaction.breaker_tripped", "provider.failover",
    # the session's tool schema snapshot was rebuilt (sessions/toolbox.py, issue 12/13)
    "tools.rebuilt",
    # steering a running turn (issue 12 item 4): a correction stored, a correction landed
    "steer.queued", "turn.steered",
    # delegation (issue 12): a turn saved awaiting its child agents, a child's turn ended,
    # the last child of a delegate call ended (its result is ledgered, the parent resumes)
    "turn.awaiting_children", "child.updated", "children.finished",
    # tools (issue 13): the todo list changed, a clarify question asked / answered / cancelled
    "todo.updated", "clarify.requested", "clarify.answered", "turn.awaiting_answer",
    # the interface (issue 14): a deliberate model switch, a file uploaded to the workspace
    "session.model_changed", "workspace.changed",
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

    The seq comes from incrementing the session row's ``event_seq``; its row lock
    serialises allocation until commit, so (session, seq) stays unique and follows commit
    order under concurrent writers (the turn's worker, approvals, services). Joins the
    caller's transaction when there is one (then publishes on its commit).
    Raises ValueError for an unknown type, Session.DoesNotExist for an unknown session.
    """
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    connection = connections[router.db_for_write(RunEvent)]
    if connection.vendor == "postgresql":
        event = _append_postgresql(connection, session_id, type, payload)
    elif connection.vendor == "sqlite" and connection.features.can_return_columns_from_insert:
        event = _append_sqlite(connection, session_id, type, payload)
    else:
        with transaction.atomic():
            Session.objects.filter(pk=session_id).update(event_seq=F("event_seq") + 1)
            seq = Session.objects.filter(pk=session_id).values_list("event_seq",
                                                                     flat=True).get()
            event = RunEvent.objects.create(session_id=session_id, seq=seq, type=type,
                                            payload=payload)
    event_publish_on_commit(event)
    return event


def delta_append(*, session_id: int, turn_id: int, text: str) -> tuple[RunEvent, bool]:
    """Store one text.delta event (``text``: the batch of streamed pieces of ``turn_id``'s
    reply), publish it after commit, and return it with the session's ``stop_requested``
    as that same statement read it (under the row lock the seq allocation takes: as fresh
    as a poll at the write's time, so DbSink.should_stop needs no poll of its own while
    text streams).

    Outside a caller's transaction on PostgreSQL this is ONE round trip (seq, insert, stop
    flag in one statement) committed relaxed (synchronous_commit off for this transaction
    only): the commit is visible at once and survives the worker being killed, and only a
    crash of the database server can lose it, together with every commit after it
    (sessions/writes.py docstring). A delta is display-only: the stored reply supersedes
    it, and the reply's own commit waits for the disk, which makes every delta before it
    durable too. Inside a caller's transaction the caller's durability is kept.
    Raises Session.DoesNotExist for an unknown session."""
    payload = {"turn_id": turn_id, "text": text}
    connection = connections[router.db_for_write(RunEvent)]
    if connection.vendor == "postgresql":
        event, stop = _append_postgresql(connection, session_id, "text.delta", payload,
                                         relaxed=not connection.in_atomic_block,
                                         with_stop=True)
    elif connection.vendor == "sqlite" and connection.features.can_return_columns_from_insert:
        event, stop = _append_sqlite(connection, session_id, "text.delta", payload,
                                     with_stop=True)
    else:
        event = event_append(session_id=session_id, type="text.delta", payload=payload)
        return event, Session.objects.filter(pk=session_id, stop_requested=True).exists()
    event_publish_on_commit(event)
    return event, stop


def event_publish_on_commit(event: RunEvent) -> None:
    """Publish a stored ``event`` to its session's group once the transaction that stored
    it commits (at once outside a transaction). The one place stored events are handed to
    ``group_publish``: event_append and sessions/writes.py (several events per write)."""
    data = event_to_dict(event)
    transaction.on_commit(lambda: group_publish(session_group(event.session_id), data))


def _append_postgresql(connection, session_id: int, type: str, payload: dict, *,
                       relaxed: bool = False, with_stop: bool = False):
    """Allocate the seq and insert the row in ONE statement (one round trip, its own
    transaction in autocommit). A streaming turn appends an event every ~50 ms per
    session; the ORM path (BEGIN, UPDATE, SELECT, INSERT, COMMIT) cost five round trips
    and most of the worker's time per text.delta (benchmarks/bench_stream.py).
    ``with_stop``: returns (event, the session's stop_requested) instead of the event;
    with it, ``relaxed`` (only outside a caller's transaction) also sets synchronous_commit
    off for the statement's own transaction (see delta_append)."""
    created_at = timezone.now()
    payload_field = RunEvent._meta.get_field("payload")
    sql = (_DELTA_RELAXED_SQL if relaxed else _DELTA_SQL) if with_stop else _APPEND_SQL
    with connection.cursor() as cursor:
        cursor.execute(sql, [session_id, session_id, type,
                             payload_field.get_db_prep_value(payload, connection),
                             created_at])
        row = cursor.fetchone()
    if row is None:
        raise Session.DoesNotExist(f"no session {session_id}")
    event = RunEvent(id=row[0], session_id=session_id, seq=row[1], type=type,
                     payload=payload, created_at=created_at)
    event._state.adding = False
    event._state.db = connection.alias
    return (event, bool(row[2])) if with_stop else event


_sqlite_append_lock = threading.Lock()
"""Serialises this process's own event transactions on SQLite (embedded mode: every writer
is a thread of one process). SQLite's busy handler sleeps 1, 2, 5 ... up to 100 ms between
retries, so 20 streaming sessions colliding on the write lock waited hundreds of ms; a
queue on a Python lock hands the write lock over at once."""


def _append_sqlite(connection, session_id: int, type: str, payload: dict, *,
                   with_stop: bool = False):
    """Two raw statements in one transaction (UPDATE ... RETURNING, INSERT ... RETURNING):
    the ORM's update with an F() expression cost most of the event's CPU. The Python lock
    is taken only outside a caller's transaction: a caller inside ``atomic`` may already
    hold SQLite's write lock, and waiting on the Python lock then would deadlock.
    ``with_stop``: returns (event, the session's stop_requested read by the seq UPDATE)."""
    created_at = timezone.now()
    payload_field = RunEvent._meta.get_field("payload")
    values = [session_id, type, payload_field.get_db_prep_value(payload, connection),
              RunEvent._meta.get_field("created_at").get_db_prep_value(created_at,
                                                                      connection)]
    queued = not connection.in_atomic_block
    if queued:
        _sqlite_append_lock.acquire()
    try:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(_SEQ_SQL, [session_id])
            row = cursor.fetchone()
            if row is None:
                raise Session.DoesNotExist(f"no session {session_id}")
            seq, stop = row
            cursor.execute(_INSERT_SQL, [values[0], seq, *values[1:]])
            pk = cursor.fetchone()[0]
    finally:
        if queued:
            _sqlite_append_lock.release()
    event = RunEvent(id=pk, session_id=session_id, seq=seq, type=type, payload=payload,
                     created_at=created_at)
    event._state.adding = False
    event._state.db = connection.alias
    return (event, bool(stop)) if with_stop else event


def _append_sql() -> str:
    session, event = Session._meta, RunEvent._meta
    column = {f.name: f.column for f in event.concrete_fields}
    return (f'WITH s AS (UPDATE "{session.db_table}" SET "event_seq" = "event_seq" + 1 '
            f'WHERE "{session.pk.column}" = %s RETURNING "event_seq") '
            f'INSERT INTO "{event.db_table}" ("{column["session"]}", "{column["seq"]}", '
            f'"{column["type"]}", "{column["payload"]}", "{column["created_at"]}") '
            f'SELECT %s, s."event_seq", %s, %s, %s FROM s '
            f'RETURNING "{event.pk.column}", "{column["seq"]}"')


def _delta_sql(*, relaxed: bool) -> str:
    """_append_sql's statement that also returns the session's stop flag (read by the
    seq UPDATE, under its row lock). ``relaxed``: a first CTE sets synchronous_commit off
    for the statement's own transaction (set_config(..., true) is SET LOCAL; the setting
    is read at commit, and the CTE is joined so it is evaluated): one round trip where
    SET LOCAL would need a transaction of three."""
    session, event = Session._meta, RunEvent._meta
    column = {f.name: f.column for f in event.concrete_fields}
    relax = ("c AS (SELECT set_config('synchronous_commit', 'off', true) AS relaxed), "
             if relaxed else "")
    return (f'WITH {relax}s AS (UPDATE "{session.db_table}" '
            f'SET "event_seq" = "event_seq" + 1 WHERE "{session.pk.column}" = %s '
            f'RETURNING "event_seq", "stop_requested"), '
            f'i AS (INSERT INTO "{event.db_table}" ("{column["session"]}", "{column["seq"]}", '
            f'"{column["type"]}", "{column["payload"]}", "{column["created_at"]}") '
            f'SELECT %s, s."event_seq", %s, %s, %s FROM s{", c" if relaxed else ""} '
            f'RETURNING "{event.pk.column}", "{column["seq"]}") '
            f'SELECT i."{event.pk.column}", i."{column["seq"]}", s."stop_requested" '
            f'FROM i, s')


def _seq_sql() -> str:
    session = Session._meta
    return (f'UPDATE "{session.db_table}" SET "event_seq" = "event_seq" + 1 '
            f'WHERE "{session.pk.column}" = %s RETURNING "event_seq", "stop_requested"')


def _insert_sql() -> str:
    event = RunEvent._meta
    column = {f.name: f.column for f in event.concrete_fields}
    return (f'INSERT INTO "{event.db_table}" ("{column["session"]}", "{column["seq"]}", '
            f'"{column["type"]}", "{column["payload"]}", "{column["created_at"]}") '
            f'VALUES (%s, %s, %s, %s, %s) RETURNING "{event.pk.column}"')


_APPEND_SQL = _append_sql()
_DELTA_SQL = _delta_sql(relaxed=False)
_DELTA_RELAXED_SQL = _delta_sql(relaxed=True)
_SEQ_SQL = _seq_sql()
_INSERT_SQL = _insert_sql()


def switch_interval_apply(milliseconds: float) -> None:
    """Set this process's GIL switch interval (``sys.setswitchinterval``; ms, > 0; 0 or less
    keeps Python's 5 ms). Called at app start (sessions/apps.py) from HERMES
    ["SWITCH_INTERVAL_MS"].

    Why: a worker runs 20-100 turn threads that hold the GIL for their SSE parsing and row
    building, and every event passes through threads that only wait on sockets (the
    INSERT's reply, this module's publisher, daphne's loop and its database threads). Each
    time such a thread wakes it waits for the GIL up to one switch interval, several times
    per event; at 5 ms that was most of the stream's tail. 1 ms halved the 20-session p95
    (benchmarks/bench_stream.py, runs in docs/performance-stream.md)."""
    if milliseconds > 0:
        sys.setswitchinterval(milliseconds / 1000)


_socket_loop: asyncio.AbstractEventLoop | None = None
"""The event loop serving websockets in this process (set by the consumer on connect)."""


def socket_loop_register(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the loop the websocket consumers run on (sessions/consumers.py calls this on
    every connect). Only the in-memory channel layer needs it; see ``group_publish``."""
    global _socket_loop
    _socket_loop = loop


def group_publish(group: str, data: dict, kind: str = "run.event") -> None:
    """Send ``data`` to a channel group; never raises into the caller (a dead layer must not
    fail a turn whose events are already stored and replayable).

    Embedded mode (in-memory layer, worker threads in the web process): the layer's queues
    belong to the websocket loop, and a put from a worker thread's own loop does not wake it,
    so the consumer saw the event only when daphne's loop next woke (up to a second later;
    measured by benchmarks/bench_stream.py). There the send is handed to that loop
    (thread-safe, FIFO, not awaited: the event is already stored)."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": kind, "event": data, "sent_at": time.time()}
    loop = _socket_loop
    try:
        if isinstance(layer, InMemoryChannelLayer) and loop is not None and loop.is_running():
            future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
            future.add_done_callback(lambda f: f.exception() and log.error(
                "publishing to %s failed: %r", group, f.exception()))
            return
        _publisher().submit(layer, group, message)
    except Exception:  # the event is in the database; the socket will replay it
        log.exception("publishing to %s failed", group)


MAX_BATCH_EVENTS = 200
"""Most events one channel-layer message carries when a group's sends fell behind."""


class _Publisher:
    """One long-lived event loop in a daemon thread that sends every event of this process
    through the channel layer (Redis in services mode), in order within each group.

    Why not async_to_sync per event: each call runs a fresh event loop, and channels-redis
    keeps its connection pool per loop, so every event opened a new Redis connection.

    Why one batch per wake-up: channels-redis's pub/sub layer sends each group_send as its
    own PUBLISH under one lock per shard, so a process's events left one round trip at a
    time, and each round trip also waited for the GIL held by the worker's 20-100 threads
    (benchmarks/bench_stream.py: the delivery tail). Now whatever queued since the last send
    leaves as ONE pipelined round trip (``_redis_sender``): per group, consecutive events
    merge into one "run.events" message (sessions/consumers.py handles both kinds), groups
    in one pipeline, a group's events in commit order. A caller only appends to a queue
    (``submit``); the loop is woken once per batch, not once per event. The caller never
    waits on Redis: the event is already stored and replayable.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._woken = False
        """True from the first submit of a batch until the drain finds the queue empty:
        later submits only append (the drain will see them)."""
        self._senders: dict[int, tuple[object, object]] = {}
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), name="hermes-event-publisher",
                         daemon=True).start()
        ready.wait(5)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        ready.set()
        self.loop.run_forever()

    def submit(self, layer, group: str, message: dict) -> None:
        """Queue ``message`` for ``group`` (any thread; returns at once)."""
        with self._lock:
            self._queue.append((layer, group, message))
            if self._woken:
                return
            self._woken = True
        self.loop.call_soon_threadsafe(self.loop.create_task, self._drain())

    async def _drain(self) -> None:
        """Send batches until the queue is empty (the emptiness check and the reset of
        ``_woken`` happen under the lock, so nothing submitted meanwhile is stranded)."""
        while True:
            with self._lock:
                if not self._queue:
                    self._woken = False
                    return
                batch = list(self._queue)
                self._queue.clear()
            by_layer: dict[int, tuple[object, list]] = {}
            for layer, group, message in batch:
                by_layer.setdefault(id(layer), (layer, []))[1].append((group, message))
            for layer, items in by_layer.values():
                try:
                    await self._sender(layer)(layer, _coalesce_batch(items))
                except BaseException as exc:  # stored already; a socket replays it
                    log.exception("publishing %d messages failed", len(items))
                    if not isinstance(exc, Exception):  # cancelled: let the next submit wake
                        with self._lock:
                            self._woken = False
                        raise

    def _sender(self, layer):
        """The send function for ``layer``, chosen once per layer object (kept with it, so
        a new layer at a recycled id() never inherits another layer's sender)."""
        known = self._senders.get(id(layer))
        if known is None or known[0] is not layer:
            known = self._senders[id(layer)] = (layer, _redis_sender(layer) or _one_by_one)
        return known[1]


async def _one_by_one(layer, items: list[tuple[str, dict]]) -> None:
    """Any channel layer: one group_send per message, in order."""
    for group, message in items:
        try:
            await layer.group_send(group, message)
        except Exception:
            log.exception("publishing to %s failed", group)


def _redis_sender(layer):
    """For channels-redis's pub/sub layer: a sender that PUBLISHes a whole batch in ONE
    pipelined round trip per shard (the layer's own channel names, shards, serializer and
    connection), or None for any other layer or a channels-redis whose internals differ
    (then each message goes through group_send; tests/sessions/test_publish.py notices)."""
    loop_layer = getattr(layer, "_get_layer", None)
    if loop_layer is None or not hasattr(layer, "serialize"):
        return None
    try:
        loop_layer = layer._get_layer()  # this loop's layer (the publisher's loop)
        name_of = loop_layer._get_group_channel_name
        shard_of = loop_layer._get_shard
        shard_of(name_of("probe"))._ensure_redis
    except AttributeError:
        return None

    async def send(layer, items: list[tuple[str, dict]]) -> None:
        pipelines: dict[int, tuple[object, list]] = {}
        for group, message in items:
            channel = name_of(group)
            shard = shard_of(channel)
            pipelines.setdefault(id(shard), (shard, []))[1].append(
                (channel, layer.serialize(message)))
        for shard, publishes in pipelines.values():
            shard._ensure_redis()
            pipe = shard._redis.pipeline(transaction=False)
            for channel, data in publishes:
                pipe.publish(channel, data)
            await pipe.execute()

    return send


def _coalesce_batch(items: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The messages of one batch, per group in order, consecutive run.event messages of a
    group merged into ``{"type": "run.events", "events": [...]}`` (at most MAX_BATCH_EVENTS
    each); other kinds (force.close, session.check, ...) stay as they are, in place."""
    lanes: dict[str, deque] = {}
    for group, message in items:
        lanes.setdefault(group, deque()).append(message)
    out = []
    for group, lane in lanes.items():
        while lane:
            out.append((group, _coalesce(lane)))
    return out


def _coalesce(lane: deque) -> dict:
    """Pop the next message of ``lane``; consecutive run.event messages waiting behind it
    are merged into one ``{"type": "run.events", "events": [...]}`` (order kept)."""
    first = lane.popleft()
    if first["type"] != "run.event" or not lane or lane[0]["type"] != "run.event":
        return first
    events = [first["event"]]
    while lane and lane[0]["type"] == "run.event" and len(events) < MAX_BATCH_EVENTS:
        events.append(lane.popleft()["event"])
    return {"type": "run.events", "events": events, "sent_at": first["sent_at"]}


_publisher_lock = threading.Lock()
_publisher_instance: _Publisher | None = None


def _publisher() -> _Publisher:
    global _publisher_instance
    with _publisher_lock:
        if _publisher_instance is None:
            _publisher_instance = _Publisher()
        return _publisher_instance
