"""One transaction per thing a turn stores: the lease check, the rows, their events and the
session's counters together (issue 15 target 1: harness overhead close to the floor).

Why: every COMMIT that wrote something waits for the WAL to reach the disk, and that wait,
not the round trips, is what an iteration's writes cost (about one floor each; see
benchmarks/bench_overhead.py). A stored reply used to be five of them (the delta flush, the
usage row, its event, the message with its event, the observed counters) plus a lease
renewal before the next request; it is one here.

``transcript_write`` does, inside ONE transaction (the caller's, when there is one):

1. One UPDATE of the session row that validates the turn lease (owner and expiry in its
   WHERE: it takes the row lock a ``SELECT ... FOR UPDATE`` took, and PostgreSQL re-checks
   the condition on the row it waited for), optionally renews it, allocates the seqs of
   every event of the write, and applies the counters (message_count, last_activity_at)
   and any other columns the caller passes (the calibration anchor, the breaker, cache
   health). A session whose lineage root is another row: the root's lease row first, then
   the session row, in that order (the order lease_validate locked them in).
2. The message rows (one multi-row INSERT) and the events (one multi-row INSERT), seqs in
   the order given: lease-free events, then the messages' events, then guarded events.
   (``before_commit(lease_ok)`` runs just before them: the usage row and the settlement of
   its reservation.)

Events are published after the commit (sessions/events.py::event_publish_on_commit), in seq
order. When the lease is not ours the guarded part (messages, guarded events, columns) is
not written; the lease-free part (text already streamed, usage already billed) is, as it
was when those were separate writes; then LeaseLost is raised.

``relaxed_commit`` (PostgreSQL, a transaction of its own): ``SET LOCAL synchronous_commit TO
OFF``. The commit is visible at once and survives the worker being killed (the server has
it); only a crash of the database server can lose it, and then only together with every
commit after it (the WAL is flushed in order, and every ordinary commit flushes all before
it). So a relaxed write lost in a server crash is the same as the worker having died just
before it. Used only where that is harmless (HERMES["RELAXED_READ_ONLY_COMMITS"]): the
start and the ledgered output of a read-only call, whose loss can at worst make a read run
again; a call with effects is announced by a commit that waits for the disk, which also
makes every relaxed commit before it durable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connections, router, transaction
from django.utils import timezone

from agents.errors import LeaseLost
from sessions.events import EVENT_TYPES, event_publish_on_commit
from sessions.models import Message, RunEvent, Session
from sessions.transcript import message_to_display


@dataclass
class Entry:
    """One message row to store (unsaved ``row``) and its event: ``event_type`` with
    payload ``{"turn_id", "message": <display of the stored row>, **extra}``."""

    row: Message
    event_type: str = "message.added"
    extra: dict = field(default_factory=dict)


@dataclass
class Written:
    """What a write stored: the rows (with ids) and the events, in seq order."""

    rows: list[Message]
    events: list[RunEvent]


def transcript_write(*, session: Session, owner: str | None, turn_id: int | None,
                     entries: list[Entry] = (), free_events: list[tuple[str, dict]] = (),
                     events: list[tuple[str, dict]] = (), columns: dict | None = None,
                     renew_seconds: int | None = None, before_commit=None,
                     relaxed_commit: bool = False) -> Written:
    """Store ``entries`` and ``events`` under ``owner``'s turn lease and ``free_events``
    whatever the lease, in one transaction (see the module docstring).

    ``owner`` None: nothing is guarded (only ``free_events`` and ``before_commit`` may be
    given). ``columns``: Session field name -> value, written with the guarded part.
    ``renew_seconds``: extend the lease to now + that many seconds. ``before_commit``:
    called with ``lease_ok`` inside the transaction, after the rows. Raises LeaseLost
    (after committing the lease-free part), ValueError for an unknown event type,
    Session.DoesNotExist for an unknown session."""
    for type_, _ in (*free_events, *events):
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}")
    for entry in entries:
        if entry.event_type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {entry.event_type!r}")
    if owner is None and (entries or events or columns):
        raise ValueError("a transcript write needs the lease owner")
    alias = router.db_for_write(Message)
    connection = connections[alias]
    now = timezone.now()
    guarded = owner is not None
    relaxed = relaxed_commit and not connection.in_atomic_block  # never a caller's commit
    with transaction.atomic(using=alias, savepoint=False):
        if relaxed:
            relax_commit(connection)
        lease_ok = guarded
        if guarded:
            last = _session_update(connection, session, owner=owner, now=now,
                                   n_events=len(free_events) + len(entries) + len(events),
                                   n_messages=len(entries), columns=columns or {},
                                   renew_seconds=renew_seconds)
            lease_ok = last is not None
        if not lease_ok:
            last = _session_update(connection, session, owner=None, now=now,
                                   n_events=len(free_events), n_messages=0, columns={},
                                   renew_seconds=None) if free_events else 0
            if last is None:
                raise Session.DoesNotExist(f"no session {session.pk}")
            entries, events = [], []
        if before_commit is not None:
            before_commit(lease_ok)
        # The events last: the shortest hold of the events table's lock before the commit
        # (readers of an in-memory SQLite database with a shared cache fail on it at once).
        written = _insert(session, turn_id, now, last, free_events, entries, events)
        for event in written.events:
            event_publish_on_commit(event)
    if guarded and not lease_ok:
        raise LeaseLost(f"turn lease of session {session.pk} lost")
    return written


def relax_commit(connection) -> bool:
    """First thing in a transaction of one's own (never a caller's, whose other writes
    must keep their durability): commit it without waiting for the WAL flush (see the
    module docstring). No-op (False) on SQLite."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO OFF")
    return True


def _insert(session: Session, turn_id, now: datetime, last: int, free_events, entries,
            events) -> Written:
    rows = _insert_rows([e.row for e in entries])
    items = [*free_events,
             *((e.event_type, {"turn_id": turn_id, "message": message_to_display(r), **e.extra})
               for e, r in zip(entries, rows)),
             *events]
    first = last - len(items) + 1
    stored = [RunEvent(session_id=session.pk, seq=first + i, type=type_, payload=payload,
                       created_at=now) for i, (type_, payload) in enumerate(items)]
    if stored:
        RunEvent.objects.bulk_create(stored)
    return Written(rows=rows, events=stored)


def _insert_rows(rows: list[Message]) -> list[Message]:
    """One multi-row INSERT (ids returned on PostgreSQL and SQLite >= 3.35)."""
    if not rows:
        return []
    if len(rows) == 1:
        rows[0].save(force_insert=True)
        return rows
    return Message.objects.bulk_create(rows)


def _session_update(connection, session: Session, *, owner: str | None, now: datetime,
                    n_events: int, n_messages: int, columns: dict,
                    renew_seconds: int | None) -> int | None:
    """The session row's UPDATE (and the root's, for a segment): returns the new
    ``event_seq``, or None when the lease is not ``owner``'s (nothing written then)."""
    meta = Session._meta
    table, pk = meta.db_table, meta.pk.column
    root = session.lineage_root_id or session.pk

    def prep(name, value):
        return meta.get_field(name).get_db_prep_save(value, connection)

    lease_sets, lease_params = [], []
    if renew_seconds is not None:
        lease_sets.append('"lease_expires_at" = %s')
        lease_params.append(prep("lease_expires_at", now + timedelta(seconds=renew_seconds)))
    lease_where, where_params = "", []
    if owner is not None:
        lease_where = ' AND "lease_owner" = %s AND "lease_expires_at" >= %s'
        where_params = [owner, prep("lease_expires_at", now)]
    sets = ['"event_seq" = "event_seq" + %s']
    params: list = [n_events]
    if n_messages:
        sets += ['"message_count" = "message_count" + %s', '"last_activity_at" = %s']
        params += [n_messages, prep("last_activity_at", now)]
    for name, value in columns.items():
        sets.append(f'"{meta.get_field(name).column}" = %s')
        params.append(prep(name, value))
    with connection.cursor() as cursor:
        if root != session.pk and owner is not None:
            assign = ", ".join(lease_sets) or f'"{pk}" = "{pk}"'
            cursor.execute(f'UPDATE "{table}" SET {assign} '
                           f'WHERE "{pk}" = %s{lease_where} RETURNING "{pk}"',
                           [*lease_params, root, *where_params])
            if cursor.fetchone() is None:
                return None
            lease_sets, lease_params, lease_where, where_params = [], [], "", []
        cursor.execute(f'UPDATE "{table}" SET {", ".join([*sets, *lease_sets])} '
                       f'WHERE "{pk}" = %s{lease_where} RETURNING "event_seq"',
                       [*params, *lease_params, session.pk, *where_params])
        row = cursor.fetchone()
    return None if row is None else row[0]
