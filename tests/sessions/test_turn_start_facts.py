"""A turn's start reads what it needs of the session (the newest message's time, the
transcript version, whether another worker served the session) in its own start write, not
in queries of its own (issue 15 target 1), and reads them from before that write's rows:
sessions/writes.py StartFacts, used by sessions/runner.py ``_begin``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from simulator.script import Reply, Script
from sessions.leases import lease_acquire
from sessions.models import Message, RunEvent, Session, Turn
from sessions.runner import TurnContext, turn_execute
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task
from sessions.writes import Entry, transcript_write

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owned(make_user, hermes_settings, simulator):
    simulator.state.script = Script(lambda request: Reply(text="ok"))
    user = make_user("uma")
    session = session_create(user=user)
    turn_start(session=session, user=user, text="first")
    turn_run_task.apply(args=[session.pk])
    return user, Session.objects.get(pk=session.pk)


@pytest.mark.services  # the one-statement write is PostgreSQL's; on SQLite the runner queries
def test_the_start_write_reads_the_message_before_its_own_and_who_served_since(owned):
    user, session = owned
    assert connection.vendor == "postgresql"
    newest = Message.objects.filter(session=session).order_by("-id").first()
    old = timezone.now() - timedelta(hours=3)
    Message.objects.filter(pk=newest.pk).update(created_at=old)
    first_turn = Turn.objects.get(session=session)
    assert lease_acquire(session=session, owner="w1", seconds=60)
    second = Turn.objects.create(session=session, input_text="second")
    row = Message(session=session, role="user", content="second")
    written = transcript_write(session=session, owner="w1", turn_id=second.pk,
                               entries=[Entry(row=row)], start_facts=True, served_after=first_turn.pk)
    facts = written.start
    assert row.id is not None and facts.last_message_at == old  # not the row it wrote
    assert facts.last_message_id == newest.pk
    assert facts.transcript_version == session.transcript_version
    assert facts.served_after is False  # only the writing turn is newer, and it is excluded
    third = Turn.objects.create(session=session, input_text="third",
                                started_at=timezone.now())
    again = transcript_write(session=session, owner="w1", turn_id=second.pk,
                             events=[("turn.started", {"turn_id": second.pk})],
                             start_facts=True, served_after=first_turn.pk).start
    assert again.served_after is True and again.last_message_at == Message.objects.get(
        pk=row.id).created_at
    assert again.last_message_id == row.id
    assert transcript_write(session=session, owner="w1", turn_id=third.pk,
                            events=[("turn.started", {"turn_id": third.pk})],
                            start_facts=True).start.served_after is None
    assert transcript_write(session=session, owner="w1", turn_id=third.pk,
                            events=[("turn.started", {"turn_id": third.pk})]).start is None


def test_a_turn_after_three_idle_hours_measures_them_whatever_the_database(owned, monkeypatch):
    """Through the real path: the runner's idle gap (what the cache strategy reads) is the
    age of the newest message before the turn's own user message, on PostgreSQL from the
    start write, on SQLite from its query."""
    import sessions.runner as runner

    user, session = owned
    Message.objects.filter(session=session).update(
        created_at=timezone.now() - timedelta(hours=3))
    seen = []
    begin = runner._begin

    def spy(ctx: TurnContext, sink):
        loaded = begin(ctx, sink)
        seen.append(ctx.idle_seconds)
        return loaded

    monkeypatch.setattr(runner, "_begin", spy)
    turn_start(session=session, user=user, text="back again")
    turn_run_task.apply(args=[session.pk])
    assert Turn.objects.filter(session=session).order_by("-id").first().status == "completed"
    assert len(seen) == 1 and 3 * 3600 - 60 < seen[0] < 3 * 3600 + 60, seen


@pytest.mark.parametrize("stopped", [False, True], ids=["starts", "stop-won-the-race"])
def test_the_start_write_marks_the_turn_running_or_leaves_nothing_when_stop_won(owned, stopped):
    """The turn's status rides in its start write (PostgreSQL; SQLite updates it on its own
    in the same transaction). When Stop ended the turn after the worker read it as open,
    the start must leave nothing: no ``turn.started``, no user message, the turn stays
    stopped; otherwise the turn is running with its message linked and its start time."""
    user, session = owned
    turn = turn_start(session=session, user=user, text="race me")
    assert lease_acquire(session=session, owner="w1", seconds=60)
    read = Turn.objects.get(pk=turn.pk)  # what turn_next handed the runner: QUEUED
    if stopped:  # Stop wins between the read and the start write
        Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.CANCELLED)
    started_events = RunEvent.objects.filter(session=session, type="turn.started",
                                             payload__turn_id=turn.pk)
    status = turn_execute(session=session, turn=read, owner="w1")
    row = Turn.objects.get(pk=turn.pk)
    messages = Message.objects.filter(session=session, role="user", content="race me")
    if stopped:
        assert status == Turn.Status.CANCELLED
        assert row.user_message_id is None and row.started_at is None
        assert not messages.exists() and not started_events.exists()
    else:
        assert status == Turn.Status.COMPLETED
        assert row.user_message_id == messages.get().pk and row.started_at is not None
        assert started_events.count() == 1
