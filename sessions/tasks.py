"""Celery tasks for turns. Thin: take the lease, pick the next turn, hand it to the runner.

``turn_run_task(session_id)`` is enqueued on commit by turn_start and by approval
decisions. It holds the lineage turn lease while it works through the session's turns in
order: a resumable turn awaiting approval first, then queued ones. A turn awaiting a human
ends the task (no worker waits on a person); queued inputs behind it wait too, because the
transcript has unanswered tool calls until the decision lands.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from agents.errors import LeaseLost
from agents.transports.anthropic_wire import render_cache_clear
from sessions.events import event_append
from sessions.leases import LeaseHeartbeat, lease_acquire_id, lease_release, lease_validate
from sessions.models import RunEvent, Session, Turn
# Imported here, not in the task: the runner pulls in the provider SDKs, which a prefork
# worker should import once before forking, not once per child on its first turn (six
# children importing the anthropic SDK at once took over 30 s on a loaded 2-core host).
from sessions.runner import turn_execute
from sessions.waits import (WAITING_STATUSES, resumer_register, turn_ended,
                            turn_wait_pending, waits_expire_due)

log = logging.getLogger("hermes.tasks")


def lease_owner_id() -> str:
    """A unique holder name: host, process, thread and a random suffix."""
    return (f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:"
            f"{uuid.uuid4().hex[:8]}")


MAX_TURN_RECOVERIES = 3
"""Times a turn left RUNNING by a dead worker is resumed before it is failed (a turn that
kills its worker every time must not loop forever)."""


def turn_next(*, session: Session, owner: str) -> Turn | None:
    """The next turn to run while ``owner`` holds the turn lease, or None.

    A RUNNING turn found under our lease was left by a worker that died (its lease expired
    before we took it): it is resumed from its stored transcript, and failed only after
    MAX_TURN_RECOVERIES resumes. The fate of turns is decided inside a transaction that
    re-validates our lease, so a worker that lost the lease can never fail the new holder's
    running turn (issue 10 defect 1). An AWAITING_APPROVAL turn blocks everything behind it
    until its approvals are decided (any waiting status: sessions/waits.py). Raises LeaseLost when the lease is not ours."""
    rows = _open_turns(session)
    for stale in (t for t in rows if t.status == Turn.Status.RUNNING):
        with transaction.atomic():
            lease_validate(session=session, owner=owner)
            recovered = RunEvent.objects.filter(session=session, type="turn.recovered",
                                                payload__turn_id=stale.pk).count()
            if recovered < MAX_TURN_RECOVERIES:
                event_append(session_id=session.pk, type="turn.recovered", payload={
                    "turn_id": stale.pk, "attempt": recovered + 1,
                    "reason": "The worker running this turn stopped; resuming it."})
                return stale
            Turn.objects.filter(pk=stale.pk).update(
                status=Turn.Status.FAILED, finished_at=timezone.now(),
                error="interrupted: the workers running this turn stopped "
                      f"{recovered + 1} times")
            turn_ended(stale.pk)  # a failed child still reports to its parent
            event_append(session_id=session.pk, type="turn.failed", payload={
                "turn_id": stale.pk,
                "reason": "The worker running this turn stopped repeatedly; its unfinished "
                          "tool calls were marked as interrupted. Your message was kept."})
    waiting = next((t for t in rows if t.status in WAITING_STATUSES), None)
    if waiting is not None:
        # Expire what is overdue first (the beat task does every 15 s) so a wait whose
        # deadline has passed resumes now, fail-closed, rather than at the next sweep; only
        # a session with a wait needs it (it was a query of every task before).
        waits_expire_due()
        waiting.refresh_from_db()
        if waiting.status not in WAITING_STATUSES:  # the expiry ended it: look again
            rows = _open_turns(session)
            waiting = next((t for t in rows if t.status in WAITING_STATUSES), None)
        if waiting is not None:
            return None if turn_wait_pending(waiting) else waiting
    return next((t for t in rows if t.status == Turn.Status.QUEUED), None)


def _turns_sql(statuses: tuple[str, ...]) -> str:
    """SELECT every Turn column of session %s's turns in ``statuses``, oldest first, built
    once from the model: these reads open and close every task, and the ORM's build of
    them cost more than their round trips (issue 15 target 1)."""
    meta = Turn._meta
    columns = ", ".join(f'"{f.column}"' for f in meta.concrete_fields)
    marks = ", ".join(["%s"] * len(statuses))
    return (f'SELECT {columns} FROM "{meta.db_table}" WHERE "{meta.get_field("session").column}"'
            f' = %s AND "{meta.get_field("status").column}" IN ({marks}) '
            f'ORDER BY "{meta.pk.column}"')


_OPEN = (Turn.Status.RUNNING, *WAITING_STATUSES, Turn.Status.QUEUED)
_RUNNABLE = (*WAITING_STATUSES, Turn.Status.QUEUED)
_OPEN_SQL, _RUNNABLE_SQL = _turns_sql(_OPEN), _turns_sql(_RUNNABLE)


def _open_turns(session: Session) -> list[Turn]:
    """The session's turns that are not over (running, waiting, queued), oldest first: one
    query where turn_next used to ask three."""
    return list(Turn.objects.raw(_OPEN_SQL, [session.pk, *_OPEN]))


def turn_runnable(*, session: Session) -> bool:
    """Read-only, lease not required: is there a queued turn, or a waiting turn (approval,
    children, answer) whose wait has settled? (Never changes a turn: we may not hold the
    lease.)"""
    rows = list(Turn.objects.raw(_RUNNABLE_SQL, [session.pk, *_RUNNABLE]))  # one query, was two
    waiting = next((t for t in rows if t.status in WAITING_STATUSES), None)
    if waiting is not None:  # a wait blocks everything behind it
        return not turn_wait_pending(waiting)
    return bool(rows)


DB_RETRY_SECONDS = (1, 2, 4, 8, 15, 30)
"""Waits (seconds) before each new delivery of a task that could not reach the database
at its start; after the last, the recovery beat (``turn_recover_task``, every 60 s) is
what runs the turn."""


def _db_unavailable(session_id: int, attempt: int, owner: str) -> str:
    """The database refused or dropped the connection before the lease was ours (a restart,
    "too many clients"): nothing was written, so the turn is simply delivered again a
    little later. Without this the task ended in an exception, the broker counted it as
    done, and the turn stayed queued until the recovery beat found it (never, where no
    beat runs). The next delivery holds the lease as the same ``owner``: if this one's
    lease UPDATE committed before the connection failed, the lease is re-entered, not
    waited out."""
    connection.close()  # the next delivery connects afresh
    if attempt >= len(DB_RETRY_SECONDS):
        log.error("session %s: the database is still unavailable; the recovery beat will "
                  "run the turn", session_id)
        return "db_unavailable"
    log.warning("session %s: the database is unavailable; trying again in %s s",
                session_id, DB_RETRY_SECONDS[attempt], exc_info=True)
    turn_run_task.apply_async(args=[session_id],
                              kwargs={"db_attempt": attempt + 1, "owner": owner},
                              countdown=DB_RETRY_SECONDS[attempt])
    return "db_unavailable"


@shared_task(name="sessions.turn_run_task", acks_late=True, reject_on_worker_lost=True)
def turn_run_task(session_id: int, db_attempt: int = 0, owner: str = "") -> str:
    """Run every runnable turn of a session under its lineage lease. Returns a short status.

    Idempotent under redelivery (B39): a second delivery finds the lease held ("busy") or
    the turn done; a delivery after the holder died resumes the turn, and the tool-result
    ledger keeps a side effect from running twice. The lease is renewed by a heartbeat
    while the turn runs, so a long tool call never loses it. ``db_attempt`` and ``owner``:
    set on a delivery made because the previous one found the database unavailable
    (``_db_unavailable``): how many did, and the lease holder name they used."""
    owner = owner or lease_owner_id()
    seconds = settings.HERMES["LEASE_SECONDS"]
    try:
        if not lease_acquire_id(session_id=session_id, owner=owner, seconds=seconds):
            # Held by another (the holder re-checks the queue after it releases), or no
            # such session.
            return "busy" if Session.objects.filter(pk=session_id).exists() else "no_session"
        # Read after the lease is ours: no other worker changes the row from here on, so
        # the first turn needs no re-read (later ones do: their predecessor changed it).
        session = Session.objects.filter(pk=session_id).first()
    except (OperationalError, InterfaceError):
        return _db_unavailable(session_id, db_attempt, owner)
    if session is None:  # deleted since: its rows, lease included, are gone
        return "no_session"
    ran = 0
    db_lost = False
    try:
        with LeaseHeartbeat(session=session, owner=owner, seconds=seconds):
            while (turn := turn_next(session=session, owner=owner)) is not None:
                if ran:
                    session.refresh_from_db()
                status = turn_execute(session=session, turn=turn, owner=owner)
                ran += 1
                if status == "lease_lost" or status in WAITING_STATUSES:
                    break
    except LeaseLost:
        log.warning("session %s: turn lease lost between turns", session_id)
    except (OperationalError, InterfaceError):
        # The connection died mid-turn (a database restart, a terminated backend). Every
        # write that matters was one transaction, so nothing is half-written; the turn is
        # resumed from what was committed, by a fresh delivery on a fresh connection.
        log.exception("session %s: the database connection was lost mid-turn", session_id)
        db_lost = True
        connection.close()
    finally:
        render_cache_clear()  # this thread's last wire body held the session's history
        try:
            lease_release(session=session, owner=owner)
        except DatabaseError:  # still away: the lease expires on its own
            log.warning("session %s: could not release the turn lease", session_id)
            connection.close()
    if db_lost:
        turn_run_task.apply_async(args=[session_id], countdown=1)
        return "db_lost"
    # Released first, then re-checked: an input queued while we held the lease is never
    # stranded (its own task found the lease busy and returned).
    try:
        runnable = turn_runnable(session=session)
    except (OperationalError, InterfaceError):
        runnable = True  # cannot tell: one more delivery finds out (at worst, nothing)
        connection.close()
    if runnable:
        turn_run_task.delay(session_id)
    return f"ran {ran}"


@shared_task(name="sessions.turn_recover_task")
def turn_recover_task() -> int:
    """Beat: re-enqueue sessions with queued or stale running turns whose lease is free or
    expired (a worker died, a broker message was lost). Returns how many were enqueued."""
    now = timezone.now()
    ids = set(Turn.objects.filter(status__in=[Turn.Status.QUEUED, Turn.Status.RUNNING])
              .values_list("session_id", flat=True))
    enqueued = 0
    for session in Session.objects.filter(pk__in=ids):
        root = Session.objects.get(pk=session.lineage_root_id or session.pk)
        if not root.lease_owner or (root.lease_expires_at and root.lease_expires_at < now):
            turn_run_task.delay(session.pk)
            enqueued += 1
    return enqueued


def _resume_on_commit(session_id: int) -> None:
    turn_run_task.delay_on_commit(session_id)


# The hook through which apps above sessions/ resume a waiting turn (sessions/waits.py).
resumer_register(_resume_on_commit)
