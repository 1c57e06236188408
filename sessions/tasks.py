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
from django.db import transaction
from django.utils import timezone

from sessions.events import event_append
from sessions.leases import lease_acquire, lease_release
from sessions.models import Session, Turn

log = logging.getLogger("hermes.tasks")


def lease_owner_id() -> str:
    """A unique holder name: host, process, thread and a random suffix."""
    return (f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:"
            f"{uuid.uuid4().hex[:8]}")


def turn_next(*, session: Session) -> Turn | None:
    """The next turn to run, or None. A RUNNING turn found while we hold the lease was left
    by a worker that died: it is failed (its unanswered calls get repaired as interrupted).
    An AWAITING_APPROVAL turn blocks everything behind it until its approvals are decided."""
    from approvals.services import approval_expire_due, turn_has_pending_approvals

    approval_expire_due()
    for stale in Turn.objects.filter(session=session, status=Turn.Status.RUNNING):
        with transaction.atomic():
            Turn.objects.filter(pk=stale.pk).update(
                status=Turn.Status.FAILED, finished_at=timezone.now(),
                error="interrupted: the worker running this turn stopped")
            event_append(session_id=session.pk, type="turn.failed", payload={
                "turn_id": stale.pk,
                "reason": "The worker running this turn stopped; its unfinished tool calls "
                          "were marked as interrupted."})
    waiting = Turn.objects.filter(session=session, status=Turn.Status.AWAITING_APPROVAL).first()
    if waiting is not None:
        return None if turn_has_pending_approvals(turn=waiting) else waiting
    return Turn.objects.filter(session=session, status=Turn.Status.QUEUED).order_by("id").first()


@shared_task(name="sessions.turn_run_task", acks_late=True)
def turn_run_task(session_id: int) -> str:
    """Run every runnable turn of a session under its lineage lease. Returns a short status."""
    from sessions.runner import turn_execute

    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return "no_session"
    owner = lease_owner_id()
    if not lease_acquire(session=session, owner=owner, seconds=settings.HERMES["LEASE_SECONDS"]):
        return "busy"  # the holder re-checks the queue after it releases
    ran = 0
    try:
        while (turn := turn_next(session=session)) is not None:
            session.refresh_from_db()
            status = turn_execute(session=session, turn=turn, owner=owner)
            ran += 1
            if status in ("lease_lost", Turn.Status.AWAITING_APPROVAL):
                break
    finally:
        lease_release(session=session, owner=owner)
    # Released first, then re-checked: an input queued while we held the lease is never
    # stranded (its own task found the lease busy and returned).
    if turn_next(session=session) is not None:
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
