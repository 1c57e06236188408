"""Corrections sent while a turn runs (issue 12 item 4): waiting, and landing in the turn.

A correction is stored at once as a queued Turn of kind ``STEER`` (sessions/services.py
``turn_steer``): a row, so it survives a worker kill and the page shows it. The running turn
asks at its safe points (agents/steer.py) whether one is waiting and, if so, lands it here:
the queued rows are claimed (kind ``STEERED``, status completed, ``user_message`` pointing at
the correction's row) and the messages the harness built are stored, in ONE transaction under
the turn lease, so a correction is either landed with its message or still queued, never
both and never neither. A correction that no turn claimed before its turn ended is an
ordinary queued turn: it runs next (sessions/tasks.py turn_next), never lost.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from agents.messages import Message as AgentMessage
from agents.steer import Correction
from sessions.events import event_append
from sessions.leases import lease_validate
from sessions.models import Session, Turn
from sessions.transcript import message_to_agent
from sessions.waits import WAITING_STATUSES

STEER = "steer"
"""Turn.kind of a correction still waiting (it runs as an ordinary turn if no turn claims
it) and Message.kind of the user message a landed correction became."""
STEERED = "steered"
"""Turn.kind of a correction that landed inside another turn (its row stays: the audit of
what the user sent and where it went)."""


def turn_running(*, session: Session) -> bool:
    """Does ``session`` have a turn a correction could land in (running, or waiting and
    to be resumed)? Read-only."""
    return Turn.objects.filter(session=session, status__in=[
        Turn.Status.RUNNING, *WAITING_STATUSES]).exists()


def steers_waiting(*, session: Session) -> bool:
    """Is a correction waiting for ``session``'s running turn? One indexed query; a dropped
    connection answers False (the next safe point asks again)."""
    try:
        return Turn.objects.filter(session=session, kind=STEER,
                                   status=Turn.Status.QUEUED).exists()
    except (OperationalError, InterfaceError):
        connection.close()
        return False


def steers_land(*, session: Session, turn: Turn, owner: str,
                build: Callable[[list[Correction]], tuple[AgentMessage, ...]],
                store: Callable[..., object]) -> list[AgentMessage]:
    """Claim every waiting correction of ``session`` (oldest first), store what
    ``build(corrections)`` returns through ``store(message, kind, extra)`` (the sink's row
    writer) and announce ``turn.steered``, all in one transaction that re-validates the turn
    lease (raises LeaseLost: nothing is claimed then). Tool results built here get the
    display metadata {"steered": True}. Returns the stored messages ([] if none waited)."""
    with transaction.atomic():
        lease_validate(session=session, owner=owner)
        claimed: list[Turn] = []
        for row in Turn.objects.filter(session=session, kind=STEER,
                                       status=Turn.Status.QUEUED).order_by("id"):
            # Conditional: a row another writer changed meanwhile is not ours to land.
            if Turn.objects.filter(pk=row.pk, kind=STEER, status=Turn.Status.QUEUED).update(
                    kind=STEERED, status=Turn.Status.COMPLETED, started_at=timezone.now(),
                    finished_at=timezone.now()):
                claimed.append(row)
        if not claimed:
            return []
        corrections = [Correction(text=row.input_text, ref=row.pk) for row in claimed]
        built = list(build(corrections))
        users = [m for m in built if m.role == "user"]
        if len(users) != len(claimed):
            raise ValueError("a landing must append one user message per correction")
        stored, skipped = [], []
        steer_ids = iter(row.pk for row in claimed)
        for message in built:
            if message.role == "tool":
                skipped.append(message.tool_call_id)
                row = store(message, "", {"steered": True})
            else:
                steer_id = next(steer_ids)
                row = store(message, STEER, None, {"steer_turn_id": steer_id})
                Turn.objects.filter(pk=steer_id).update(user_message=row)
            stored.append(row)
        event_append(session_id=session.pk, type="turn.steered", payload={
            "turn_id": turn.pk, "steer_turn_ids": [row.pk for row in claimed],
            "message_ids": [r.pk for r in stored if r.role == "user"],
            "answered_calls": skipped})
    return [message_to_agent(r) for r in stored]
