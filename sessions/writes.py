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
from sessions.models import Message, RunEvent, Session, Turn
from sessions.steer import STEER
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
    stop: bool | None = None
    """The session's stop flag as the write's UPDATE saw it (None: not read)."""
    bypass: bool | None = None
    """The session's approval bypass flag as the write saw it (None: not read)."""
    steer: bool | None = None
    """Whether a correction (a queued steer turn) waited, as the write saw it (None: not
    read). The sink answers the loop's safe-point questions from these two instead of one
    query each: every safe point follows a write (sessions/sink.py)."""
    start: StartFacts | None = None
    """What a turn's start needs to know of the session, read by the same statement
    (``start_facts``; None: not read, the caller queries)."""


@dataclass(frozen=True)
class StartFacts:
    """The session as a turn's first write found it, before the write's own rows (one
    statement sees one snapshot): its ``transcript_version``; ``last_message_at``, the
    newest message's created_at (None: no message yet), whose age is the idle gap the cache
    strategy reads; ``last_message_id``, that message's id (None: none), which tells a kept
    copy that ends there it has missed no row; and ``served_after``: whether a turn other than the writing one, newer
    than the turn id the caller asked about, has started (another worker served the
    session: the caller's kept copy is stale; None when not asked)."""

    transcript_version: int
    last_message_at: datetime | None
    served_after: bool | None
    last_message_id: int | None = None
    turn_started: bool | None = None
    """Whether the same statement marked the turn running (``TurnStart``): False when the
    turn was no longer open (Stop won the race; the caller rolls the write back); None when
    it was not asked."""


@dataclass(frozen=True)
class TurnStart:
    """Mark turn ``turn_id`` running in the turn's start write: status RUNNING,
    ``started_at`` where still unset, ``user_message_id`` to the write's first message when
    it stores one; only while the turn's status is one of ``open_statuses`` (a stopped turn
    is not restarted). One round trip less per turn start than a separate UPDATE (issue 15
    target 1)."""

    turn_id: int
    started_at: datetime
    open_statuses: tuple[str, ...]


def transcript_write(*, session: Session, owner: str | None, turn_id: int | None,
                     entries: list[Entry] = (), free_events: list[tuple[str, dict]] = (),
                     events: list[tuple[str, dict]] = (), columns: dict | None = None,
                     renew_seconds: int | None = None, before_commit=None,
                     relaxed_commit: bool = False,
                     head_events: list[tuple[str, dict]] = (), usage_rows=(),
                     start_facts: bool = False, served_after: int | None = None,
                     start_turn: TurnStart | None = None) -> Written:
    """Store ``entries`` and ``events`` under ``owner``'s turn lease and ``free_events``
    whatever the lease, in one transaction (see the module docstring).

    ``owner`` None: nothing is guarded (only ``free_events`` and ``before_commit`` may be
    given). ``head_events``: guarded events stored before the entries' events (a turn's
    ``turn.started`` ahead of its user message). ``columns``: Session field name -> value,
    written with the guarded part.
    ``renew_seconds``: extend the lease to now + that many seconds. ``before_commit``:
    called with ``lease_ok`` inside the transaction, after the rows. ``start_facts``:
    read the session's StartFacts into ``Written.start`` (``served_after``: the turn id
    they answer "served since" about; None leaves that fact unread); only the one-statement path reads them (else None: the caller
    queries). ``start_turn`` (with ``start_facts``): also mark the turn running in the same
    statement; ``Written.start.turn_started`` says whether it was (only the one-statement
    path does it: with no StartFacts the caller updates the turn). Raises LeaseLost
    (after committing the lease-free part), ValueError for an unknown event type,
    Session.DoesNotExist for an unknown session."""
    for type_, _ in (*free_events, *head_events, *events):
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}")
    for entry in entries:
        if entry.event_type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {entry.event_type!r}")
    if owner is None and (entries or events or head_events or columns):
        raise ValueError("a transcript write needs the lease owner")
    alias = router.db_for_write(Message)
    connection = connections[alias]
    now = timezone.now()
    guarded = owner is not None
    relaxed = relaxed_commit and not connection.in_atomic_block  # never a caller's commit
    if (guarded and not relaxed and before_commit is None and connection.vendor == "postgresql"
            and not (session.lineage_root_id and session.lineage_root_id != session.pk)):
        written = _one_statement(connection, session, owner=owner, turn_id=turn_id, now=now,
                                 entries=list(entries),
                                 items_before=[*free_events, *head_events],
                                 events=list(events), columns=columns or {},
                                 renew_seconds=renew_seconds, usage_rows=list(usage_rows),
                                 start_facts=start_facts, served_after=served_after,
                                 start_turn=start_turn if start_facts else None)
        if written is not None:
            for event in written.events:
                event_publish_on_commit(event)
            return written
        # The lease is not ours: the usage rows are stored; the lease-free events follow
        # below and LeaseLost is raised.
        entries, events, head_events, usage_rows = [], [], [], []
    with transaction.atomic(using=alias, savepoint=False):
        if relaxed:
            relax_commit(connection)
        lease_ok = guarded
        flags = (None, None, None)
        if guarded:
            updated = _session_update(connection, session, owner=owner, now=now,
                                      n_events=(len(free_events) + len(head_events)
                                                + len(entries) + len(events)),
                                      n_messages=len(entries), columns=columns or {},
                                      renew_seconds=renew_seconds)
            lease_ok = updated is not None
            if lease_ok:
                last, *flags = updated
        if not lease_ok:
            updated = _session_update(connection, session, owner=None, now=now,
                                      n_events=len(free_events), n_messages=0, columns={},
                                      renew_seconds=None) if free_events else (0, None, None,
                                                                               None)
            if updated is None:
                raise Session.DoesNotExist(f"no session {session.pk}")
            last = updated[0]
            entries, events, head_events = [], [], []
        for usage_row in usage_rows:
            usage_row.save(force_insert=True)
        if before_commit is not None:
            before_commit(lease_ok)
        # The events last: the shortest hold of the events table's lock before the commit
        # (readers of an in-memory SQLite database with a shared cache fail on it at once).
        written = _insert(session, turn_id, now, last, [*free_events, *head_events], entries,
                          events)
        if flags[0] is not None:
            written.stop, written.steer, written.bypass = (bool(f) for f in flags)
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
                    renew_seconds: int | None) -> tuple[int, bool, bool, bool] | None:
    """The session row's UPDATE (and the root's, for a segment): returns (the new
    ``event_seq``, the stop flag, whether a queued steer turn waits, the bypass flag), or
    None when the lease
    is not ``owner``'s (nothing written then). The two flags ride on the UPDATE the write
    makes anyway, so the loop's safe points need no query of their own."""
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
        turn = Turn._meta
        steer = (f'EXISTS (SELECT 1 FROM "{turn.db_table}" WHERE "session_id" = %s AND '
                 f'"kind" = %s AND "status" = %s)')
        cursor.execute(f'UPDATE "{table}" SET {", ".join([*sets, *lease_sets])} '
                       f'WHERE "{pk}" = %s{lease_where} '
                       f'RETURNING "event_seq", "stop_requested", {steer}, "bypass_approvals"',
                       [*params, *lease_params, session.pk, *where_params,
                        session.pk, STEER, Turn.Status.QUEUED])
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1], row[2], row[3])


# --- PostgreSQL: the whole write as ONE statement -----------------------------------------------

def _cast_row(model, obj, connection, *, fields) -> tuple[str, list]:
    """``(%s::type, ...)`` and the parameters of one unsaved ``obj`` for ``fields`` (as
    Django's INSERT compiler prepares them: pre_save, then the field's db value). Every
    placeholder is cast to its column's type, so a VALUES column of NULLs is never taken
    for text."""
    params = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    return _row_marks(model, connection.vendor, connection), params


_MARKS: dict[tuple, str] = {}


def _row_marks(model, vendor: str, connection) -> str:
    """``(%s::type, ...)`` for ``_insert_fields(model)``, built once per model and vendor
    (field.db_type is a dozen calls a column, every row)."""
    key = (model, vendor)
    marks = _MARKS.get(key)
    if marks is None:
        marks = "(" + ", ".join(f"%s::{f.db_type(connection)}"
                                for f in _insert_fields(model)) + ")"
        _MARKS[key] = marks
    return marks


def _insert_fields(model):
    return [f for f in model._meta.concrete_fields if not f.primary_key]


def _one_statement(connection, session: Session, *, owner: str, turn_id, now: datetime,
                   entries: list[Entry], items_before: list[tuple[str, dict]],
                   events: list[tuple[str, dict]], columns: dict, renew_seconds,
                   usage_rows: list, start_facts: bool = False, served_after: int | None = None,
                   start_turn: TurnStart | None = None) -> Written | None:
    """The guarded write as one data-modifying statement in autocommit (PostgreSQL): the
    session UPDATE that checks and renews the lease, allocates the seqs and returns the
    stop and steer flags; the message rows (ids drawn from their sequence first, so each
    event's payload names its row); the events; and ``usage_rows`` (inserted whatever the
    lease: the call was billed). One round trip and one commit instead of BEGIN, three to
    five statements and COMMIT (issue 15 target 1: the floor is exactly this shape).

    Returns None when the lease is not ``owner``'s: then only ``usage_rows`` were stored and
    the caller writes the lease-free events the usual way. ``start_facts``: see
    transcript_write; the extra reads ride in the final SELECT, which sees the snapshot
    from before this statement's own inserts (PostgreSQL, "Data-Modifying Statements in
    WITH"): the newest message is the one before this write's. ``start_turn``: the turn's
    UPDATE rides in the statement too, after the session's (it waits on ``s``, so the
    session row is locked first, as every transcript writer locks it) and only when the
    lease held."""
    meta, mmeta, emeta = Session._meta, Message._meta, RunEvent._meta
    n_items = len(items_before) + len(entries) + len(events)

    def prep(name, value):
        return meta.get_field(name).get_db_prep_save(value, connection)

    sets = ['"event_seq" = "event_seq" + %s']
    params: list = [n_items]
    if entries:
        sets += ['"message_count" = "message_count" + %s', '"last_activity_at" = %s']
        params += [len(entries), prep("last_activity_at", now)]
    for name, value in columns.items():
        sets.append(f'"{meta.get_field(name).column}" = %s')
        params.append(prep(name, value))
    if renew_seconds is not None:
        sets.append('"lease_expires_at" = %s')
        params.append(prep("lease_expires_at", now + timedelta(seconds=renew_seconds)))
    turn_table = Turn._meta.db_table
    sql = [f'WITH s AS (UPDATE "{meta.db_table}" SET {", ".join(sets)} '
           f'WHERE "{meta.pk.column}" = %s AND "lease_owner" = %s AND "lease_expires_at" >= %s '
           f'RETURNING "event_seq", "stop_requested", EXISTS (SELECT 1 FROM "{turn_table}" '
           f'WHERE "session_id" = %s AND "kind" = %s AND "status" = %s) AS steer, '
           f'"bypass_approvals", "transcript_version")']
    params += [session.pk, owner, prep("lease_expires_at", now), session.pk, STEER,
               Turn.Status.QUEUED]
    if entries:
        sql.append(f", ids AS (SELECT nextval(pg_get_serial_sequence('\"{mmeta.db_table}\"', "
                   f"'{mmeta.pk.column}')) AS id, o FROM s, generate_series(1, %s) AS o)")
        params.append(len(entries))
        fields = _insert_fields(Message)
        rows = []
        for o, entry in enumerate(entries, 1):
            values, row_params = _cast_row(Message, entry.row, connection, fields=fields)
            rows.append(f"({o}, {values[1:]}")
            params += row_params
        names = ", ".join(f'"{f.column}"' for f in fields)
        vnames = ", ".join(f"c{i}" for i in range(len(fields)))
        sql.append(f', m AS (INSERT INTO "{mmeta.db_table}" ("{mmeta.pk.column}", {names}) '
                   f'SELECT ids.id, {vnames} FROM (VALUES {", ".join(rows)}) '
                   f'AS v(o, {vnames}) JOIN ids USING (o))')
    if start_turn is not None:
        tmeta = Turn._meta
        message_set = (', "user_message_id" = (SELECT id FROM ids WHERE o = 1)'
                       if entries else "")
        marks = ", ".join(["%s"] * len(start_turn.open_statuses))
        sql.append(f', t AS (UPDATE "{tmeta.db_table}" SET "status" = %s, "started_at" = '
                   f'COALESCE("started_at", %s){message_set} WHERE "{tmeta.pk.column}" = %s '
                   f'AND "status" IN ({marks}) AND EXISTS (SELECT 1 FROM s) RETURNING 1)')
        params += [Turn.Status.RUNNING,
                   tmeta.get_field("started_at").get_db_prep_save(start_turn.started_at,
                                                                   connection),
                   start_turn.turn_id, *start_turn.open_statuses]
    if usage_rows:
        model = type(usage_rows[0])
        fields = _insert_fields(model)
        tuples = []
        for usage_row in usage_rows:
            values, row_params = _cast_row(model, usage_row, connection, fields=fields)
            tuples.append(values)
            params += row_params
        names = ", ".join(f'"{f.column}"' for f in fields)
        sql.append(f', u AS (INSERT INTO "{model._meta.db_table}" ({names}) '
                   f'VALUES {", ".join(tuples)} RETURNING "{model._meta.pk.column}")')
    # The events: (index, type, payload, message ordinal or NULL), seqs in that order.
    items = [(t, p, None) for t, p in items_before]
    displays = []
    for o, entry in enumerate(entries, 1):
        display = message_to_display(entry.row)
        displays.append(display)
        items.append((entry.event_type, {"turn_id": turn_id, "message": display,
                                         **entry.extra}, o))
    items += [(t, p, None) for t, p in events]
    payload_field = emeta.get_field("payload")
    rows, row_params = [], []
    for k, (type_, payload, o) in enumerate(items):
        rows.append("(%s::int, %s::text, %s::jsonb, %s::int)")
        row_params += [k, type_, payload_field.get_db_prep_save(payload, connection), o]
    if rows:
        join = "LEFT JOIN ids ON ids.o = v.o" if entries else ""
        payload_sql = ("CASE WHEN v.o IS NULL THEN v.p ELSE jsonb_set(v.p, '{message,id}', "
                       "to_jsonb(ids.id)) END") if entries else "v.p"
        sql.append(f', e AS (INSERT INTO "{emeta.db_table}" ("session_id", "seq", "type", '
                   f'"payload", "created_at") SELECT %s, s.event_seq - %s + v.k, v.t, '
                   f'{payload_sql}, %s FROM s CROSS JOIN (VALUES {", ".join(rows)}) '
                   f'AS v(k, t, p, o) {join})')
        params += [session.pk, n_items - 1,
                   emeta.get_field("created_at").get_db_prep_save(now, connection),
                   *row_params]  # the SELECT list's placeholders come before the VALUES
    ids_sql = "(SELECT array_agg(id ORDER BY o) FROM ids)" if entries else "NULL"
    facts_sql = ""
    if start_facts:
        newest = (f'FROM "{mmeta.db_table}" WHERE "session_id" = %s '
                  f'ORDER BY "{mmeta.pk.column}" DESC LIMIT 1')
        facts_sql = (f', (SELECT "created_at" {newest}), (SELECT "{mmeta.pk.column}" {newest}), ')
        params += [session.pk, session.pk]
        if served_after is None:
            facts_sql += "NULL"
        else:
            facts_sql += (f'EXISTS (SELECT 1 FROM "{turn_table}" WHERE "session_id" = %s AND '
                          f'"id" > %s AND "started_at" IS NOT NULL AND "id" <> %s)')
            params += [session.pk, served_after, turn_id]
        facts_sql += ", EXISTS (SELECT 1 FROM t)" if start_turn is not None else ", NULL"
    sql.append(f" SELECT s.event_seq, s.stop_requested, s.steer, s.bypass_approvals, {ids_sql}, "
               f"s.transcript_version{facts_sql} FROM s")
    with connection.cursor() as cursor:
        cursor.execute("".join(sql), params)
        row = cursor.fetchone()
    if row is None:
        return None
    last, stop, steer, bypass, ids, version, *facts = row
    start = StartFacts(transcript_version=version, last_message_at=facts[0],
                       last_message_id=facts[1], served_after=facts[2],
                       turn_started=facts[3]) if start_facts else None
    stored = []
    for entry, message_id, display in zip(entries, ids or [], displays):
        entry.row.id = message_id
        entry.row._state.adding, entry.row._state.db = False, connection.alias
        display["id"] = message_id
        stored.append(entry.row)
    for usage_row in usage_rows:
        usage_row._state.adding = False
    first = last - n_items + 1
    written = [RunEvent(session_id=session.pk, seq=first + k, type=type_, payload=payload,
                        created_at=now) for k, (type_, payload, _) in enumerate(items)]
    return Written(rows=stored, events=written, stop=bool(stop), steer=bool(steer),
                   bypass=bool(bypass), start=start)


def turn_finish_write(*, session: Session, turn_id: int, status: str, error: str,
                      iterations_add: int, event_type: str, payload: dict
                      ) -> tuple[RunEvent, int] | None:
    """A turn's end as ONE statement on PostgreSQL (a session that is nobody's child, whose
    holder knows its lease is live): the turn's status, error, finish time and iterations,
    the session's stop flag cleared, and the closing event with the next seq; autocommit,
    so one round trip and one commit. Returns (the event, the session's transcript_version)
    or None where the statement does not apply (another database): the caller then writes
    the same rows the usual way. Raises ValueError for an unknown event type."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    connection = connections[router.db_for_write(RunEvent)]
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return None
    now = timezone.now()
    turn_meta, meta, emeta = Turn._meta, Session._meta, RunEvent._meta
    stamp = emeta.get_field("created_at").get_db_prep_save(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f'WITH t AS (UPDATE "{turn_meta.db_table}" SET "status" = %s, "error" = %s, '
            f'"finished_at" = %s, "iterations" = "iterations" + %s WHERE "id" = %s), '
            f's AS (UPDATE "{meta.db_table}" SET "stop_requested" = false, '
            f'"event_seq" = "event_seq" + 1 WHERE "id" = %s '
            f'RETURNING "event_seq", "transcript_version"), '
            f'e AS (INSERT INTO "{emeta.db_table}" ("session_id", "seq", "type", "payload", '
            f'"created_at") SELECT %s, s.event_seq, %s, %s::jsonb, %s FROM s RETURNING "seq") '
            f'SELECT e.seq, s.transcript_version FROM e, s',
            [status, error[:5000], stamp, iterations_add, turn_id, session.pk, session.pk,
             event_type, emeta.get_field("payload").get_db_prep_save(payload, connection),
             stamp])
        row = cursor.fetchone()
    if row is None:
        raise Session.DoesNotExist(f"no session {session.pk}")
    event = RunEvent(session_id=session.pk, seq=row[0], type=event_type, payload=payload,
                     created_at=now)
    event_publish_on_commit(event)
    return event, row[1]
