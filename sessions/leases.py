"""Leases on the Session row (seed, "Two leases, and a hole"; hermes-facts §6).

- The lineage turn lease (``lease_*``): held on the lineage root's row so segments of one
  conversation never run twice at once. Every transcript write re-validates it inside its
  own transaction (``lease_validate``), so a worker that lost it during a long turn cannot
  land a row. There is no opt-out: every write path passes an owner.
- The per-session compaction lease (``compaction_lease_*``, 300 s): taken around a
  compaction commit and re-validated inside that transaction.

Both are the same mechanism on two column pairs: one conditional UPDATE acquires; a
``SELECT ... FOR UPDATE`` inside the caller's transaction validates.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

from django.db import DatabaseError, connection
from django.db.models import Q
from django.utils import timezone

from agents.errors import LeaseLost
from sessions.models import Session

COMPACTION_LEASE_SECONDS = 300
log = logging.getLogger("hermes.leases")


@dataclass(frozen=True, slots=True)
class _Columns:
    owner: str
    expires: str
    name: str


_TURN = _Columns("lease_owner", "lease_expires_at", "turn lease")
_COMPACTION = _Columns("compaction_lease_owner", "compaction_lease_expires_at",
                       "compaction lease")


def _root_id(session: Session) -> int:
    return session.lineage_root_id or session.pk


def _acquire(pk: int, cols: _Columns, owner: str, seconds: int) -> bool:
    now = timezone.now()
    free = (Q(**{cols.owner: ""}) | Q(**{f"{cols.expires}__lt": now})
            | Q(**{cols.owner: owner}))
    return bool(Session.objects.filter(free, pk=pk).update(
        **{cols.owner: owner, cols.expires: now + timedelta(seconds=seconds)}))


def _validate(pk: int, cols: _Columns, owner: str, session_pk: int) -> None:
    row = (Session.objects.select_for_update().filter(pk=pk)
           .values(cols.owner, cols.expires).first())
    if (row is None or row[cols.owner] != owner or row[cols.expires] is None
            or row[cols.expires] < timezone.now()):
        raise LeaseLost(f"{cols.name} of session {session_pk} lost")


def _release(pk: int, cols: _Columns, owner: str) -> None:
    Session.objects.filter(pk=pk, **{cols.owner: owner}).update(
        **{cols.owner: "", cols.expires: None})


def lease_acquire(*, session: Session, owner: str, seconds: int) -> bool:
    """Take the turn lease if free, expired or already ours. Returns True on success."""
    return _acquire(_root_id(session), _TURN, owner, seconds)


def lease_acquire_id(*, session_id: int, owner: str, seconds: int) -> bool:
    """lease_acquire for a session known only by id: the lineage root is found by the same
    UPDATE (so the caller can read the row once, after taking the lease). False when the
    lease is held by another or the session does not exist."""
    now = timezone.now()
    field = Session._meta.get_field("lease_expires_at")
    # Plain SQL: every turn task starts here, and the ORM's build of this UPDATE (a
    # subquery, three Q objects, Coalesce) cost more than its round trip (issue 15 target 1).
    with connection.cursor() as cursor:
        cursor.execute(_ACQUIRE_BY_ID_SQL, [
            owner, field.get_db_prep_save(now + timedelta(seconds=seconds), connection),
            session_id, field.get_db_prep_save(now, connection), owner])
        return cursor.rowcount > 0


def _acquire_by_id_sql() -> str:
    """lease_acquire_id's UPDATE, built once from the model's columns: take the turn lease
    on the lineage root of session %s (its own row when it has none) if it is free, expired
    or already %s's."""
    meta = Session._meta
    col = {f.name: f.column for f in meta.concrete_fields}
    table, pk = meta.db_table, meta.pk.column
    owner, expires = f'"{col["lease_owner"]}"', f'"{col["lease_expires_at"]}"'
    return (f'UPDATE "{table}" SET {owner} = %s, {expires} = %s WHERE "{pk}" = '
            f'(SELECT COALESCE("{col["lineage_root"]}", "{pk}") FROM "{table}" '
            f'WHERE "{pk}" = %s) AND ({owner} = \'\' OR {expires} < %s OR {owner} = %s)')


_ACQUIRE_BY_ID_SQL = _acquire_by_id_sql()


def lease_renew(*, session: Session, owner: str, seconds: int) -> None:
    """Extend our turn lease. Raises LeaseLost if it is no longer ours."""
    now = timezone.now()
    if not Session.objects.filter(pk=_root_id(session), lease_owner=owner,
                                  lease_expires_at__gte=now).update(
            lease_expires_at=now + timedelta(seconds=seconds)):
        raise LeaseLost(f"turn lease of session {session.pk} lost")


def lease_validate(*, session: Session, owner: str) -> None:
    """Inside the caller's transaction: lock the root row and check the turn lease is ours
    and unexpired. Raises LeaseLost otherwise."""
    _validate(_root_id(session), _TURN, owner, session.pk)


def lease_live(*, session: Session) -> bool:
    """True while someone holds the turn lease and it has not expired."""
    return Session.objects.filter(pk=_root_id(session), lease_expires_at__gte=timezone.now()
                                  ).exclude(lease_owner="").exists()


def lease_held_by_other(*, session: Session, owner: str) -> bool:
    """True when a holder other than ``owner`` has a live turn lease (``owner`` must then
    not decide the fate of the session's turns)."""
    return Session.objects.filter(pk=_root_id(session), lease_expires_at__gte=timezone.now()
                                  ).exclude(lease_owner__in=["", owner]).exists()


class LeaseHeartbeat:
    """Renews ``owner``'s turn lease every ``seconds / 3`` from a daemon thread while the
    turn runs, so a tool call longer than the lease (a 600 s command against a 120 s lease)
    keeps its turn (issue 10 defect 9, case B39). A dead worker stops renewing and the lease
    expires after ``seconds``. Use as a context manager; ``lost`` is set when a renewal
    found the lease gone (every later transcript write then raises LeaseLost anyway)."""

    def __init__(self, *, session: Session, owner: str, seconds: int):
        self.session, self.owner, self.seconds = session, owner, seconds
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"hermes-lease-{session.pk}")

    def _run(self) -> None:
        try:
            while not self._stop.wait(max(0.2, self.seconds / 3)):
                try:
                    lease_renew(session=self.session, owner=self.owner, seconds=self.seconds)
                except LeaseLost:
                    self.lost.set()
                    return
                except DatabaseError:  # the database is briefly away: try next tick
                    log.warning("renewing the turn lease of session %s failed",
                                self.session.pk, exc_info=True)
                finally:
                    # Reconnect next tick (seconds / 3 away) rather than hold a second
                    # PostgreSQL backend per running turn through a long command: a
                    # worker's turns then need one each (issue 15 target 2).
                    connection.close()
        finally:
            connection.close()

    def __enter__(self) -> LeaseHeartbeat:
        # An in-memory SQLite database (the embedded-mode test database, shared cache) has
        # table locks that make a second writing thread fail other threads' writes with
        # "table is locked"; there the lease is renewed per iteration only. File SQLite
        # (WAL, `make run`) and PostgreSQL get the heartbeat.
        in_memory = getattr(connection, "is_in_memory_db", None)
        if not (connection.vendor == "sqlite" and in_memory is not None and in_memory()):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def lease_release(*, session: Session, owner: str) -> None:
    """Give the turn lease up if it is ours (a no-op otherwise)."""
    _release(_root_id(session), _TURN, owner)


def compaction_lease_acquire(*, session: Session, owner: str) -> bool:
    """Take the per-session compaction lease (300 s) if free, expired or ours; True on
    success."""
    return _acquire(session.pk, _COMPACTION, owner, COMPACTION_LEASE_SECONDS)


def compaction_lease_validate(*, session: Session, owner: str) -> None:
    """Inside the commit transaction: the compaction lease is still ours, else LeaseLost."""
    _validate(session.pk, _COMPACTION, owner, session.pk)


def compaction_lease_release(*, session: Session, owner: str) -> None:
    """Give the compaction lease up if it is ours (no-op otherwise)."""
    _release(session.pk, _COMPACTION, owner)
