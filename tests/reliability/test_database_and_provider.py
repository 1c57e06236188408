"""The database and the provider under faults, through real Celery worker processes:
PostgreSQL terminates the worker's connections mid-turn (pg_terminate_backend on the shared
server: only this test database's backends, never a restart), and a provider answers 429
to every call for a while."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from agents.context.history import validate_and_repair
from simulator.faults import Fault
from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec
from sessions.models import Message, RunEvent, Turn
from sessions.services import session_create, turn_start, workspace_path
from sessions.transcript import history_load
from tests.reliability.conftest import wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

TERMINAL = (Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED)


def _terminate_other_backends() -> int:
    """pg_terminate_backend every connection to this test database but our own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def _assert_whole(session) -> None:
    """Never half-written: one user message, every call answered exactly once in the
    stored transcript (no repair needed), events contiguous."""
    assert Message.objects.filter(session=session, role="user").count() == 1
    repair = validate_and_repair(history_load(session=session))
    assert not repair.problems, repair.problems
    seqs = list(RunEvent.objects.filter(session=session).order_by("seq")
                .values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_postgres_terminating_the_workers_connections_mid_turn_resumes_it_whole(
        make_user, simulator, service_env, celery_worker_proc):
    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="tool said: " + " | ".join(r.result for r in request.tool_results))
        return Reply(text="on it", tool_calls=(ToolCallSpec(
            name="terminal", input={"command": "echo ran >> effects.txt; sleep 3; echo ok"}),))

    simulator.state.script = Script(policy)
    user = make_user("ona")
    session = session_create(user=user)
    effects = workspace_path(session) / "effects.txt"
    celery_worker_proc("worker-pg")
    turn = turn_start(session=session, user=user, text="do the thing")
    wait_for(effects.exists, timeout=60, what="the command to start")
    cut_at = time.monotonic()
    assert _terminate_other_backends() >= 1
    wait_for(lambda: Turn.objects.filter(pk=turn.pk, status__in=TERMINAL).exists(),
             timeout=120, what="the turn to end")
    recovery = time.monotonic() - cut_at
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error  # resumed, not lost
    _assert_whole(session)
    assert effects.read_text().splitlines() == ["ran"]
    result = Message.objects.get(session=session, role="tool")
    assert "Error" not in result.content, result.content  # the dropped connection is not
    print(f"\nRECOVERY pg-terminate-backend: {recovery:.1f} s")


def test_a_turn_picked_up_while_postgres_refuses_connections_runs_once_it_accepts_them(
        make_user, simulator, service_env, celery_worker_proc):
    """The worker cannot connect when the task arrives (what "too many clients" or a
    restarting server does to it): the task is delivered again a little later instead of
    ending in an exception that leaves the turn queued with nobody to run it (no beat runs
    here). ALLOW_CONNECTIONS false refuses every new connection to this test database,
    superusers' too; this test's own connection is already open."""
    simulator.state.script = Script(lambda request: Reply(text="done"))
    user = make_user("ria")
    session = session_create(user=user)
    worker = celery_worker_proc("worker-refused")
    quoted = connection.ops.quote_name(connection.settings_dict["NAME"])

    def allow(flag: bool) -> None:
        # From the server's maintenance database: a database cannot bar connections to
        # itself from inside.
        params = {k: v for k, v in connection.get_connection_params().items()
                  if k in ("host", "port", "user", "password")}
        with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
            admin.execute(f"ALTER DATABASE {quoted} WITH ALLOW_CONNECTIONS {str(flag).lower()}")

    try:
        allow(False)
        _terminate_other_backends()  # the worker's open connections go too
        turn = turn_start(session=session, user=user, text="are you there")
        wait_for(lambda: "database is unavailable" in worker.output(), timeout=60,
                 what="the worker to find the database unavailable")
        time.sleep(1.5)
        assert Turn.objects.get(pk=turn.pk).status == Turn.Status.QUEUED
    finally:
        allow(True)
    wait_for(lambda: Turn.objects.filter(pk=turn.pk, status__in=TERMINAL).exists(),
             timeout=90, what="the turn to end")
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    _assert_whole(session)
    assert Message.objects.filter(session=session, role="assistant").count() == 1


def test_postgres_terminating_the_workers_connections_mid_stream_never_half_writes(
        make_user, simulator, service_env, celery_worker_proc):
    """The worker's connections are cut while the reply streams (text.delta events being
    stored): the turn ends whole, the reply stored once, the events contiguous. The cut
    is made twice, 1 s apart, so a connection re-opened after the first is cut too."""
    text = " ".join(f"w{n}" for n in range(120))
    simulator.state.script = Script(lambda request: Reply(text=text, token_delay=0.03))
    user = make_user("oli")
    session = session_create(user=user)
    celery_worker_proc("worker-pg-stream")
    turn = turn_start(session=session, user=user, text="a long answer please")
    wait_for(lambda: RunEvent.objects.filter(session=session, type="text.delta").count() >= 10,
             timeout=60, what="the stream to start")
    cut_at = time.monotonic()
    terminated = _terminate_other_backends()
    time.sleep(1.0)
    terminated += _terminate_other_backends()
    assert terminated >= 1
    wait_for(lambda: Turn.objects.filter(pk=turn.pk, status__in=TERMINAL).exists(),
             timeout=120, what="the turn to end")
    recovery = time.monotonic() - cut_at
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    _assert_whole(session)
    replies = list(Message.objects.filter(session=session, role="assistant")
                   .values_list("content", flat=True))
    assert len(replies) == 1 and replies[0].strip() == text
    print(f"\nRECOVERY pg-terminate-backend mid-stream: {recovery:.1f} s "
          f"({terminated} backends terminated, {len(simulator.state.requests)} model calls)")


@pytest.mark.timeout(420)
def test_a_provider_answering_429_for_a_minute_turns_back_off_and_finish_without_a_storm(
        make_user, simulator, service_env, celery_worker_proc):
    """Every call is throttled (429, retry-after: 5) for a minute from the first call. Eight
    turns on a four-child worker wait it out (the route's retries, then
    agents/transports/patience.py: backoff raised to the shared cooldown, capped at 20 s,
    jittered) and all finish once the provider recovers; the throttled minute sees a
    bounded number of calls per turn (a client retrying every second would send 60)."""
    window, turns_n = 60.0, 8
    simulator.state.script = Script(lambda request: Reply(text="fine now"))
    env = {**service_env, "HERMES_RETRY_BASE_DELAY": "1.0"}
    user = make_user("pia")
    sessions = [session_create(user=user) for _ in range(turns_n)]
    worker = celery_worker_proc("worker-429", env, concurrency=4)
    throttled = threading.Event()
    timings: dict = {}

    def top_up():
        while len(simulator.state.faults.pending()) < 50:
            simulator.state.faults.push(Fault(kind="rate_limit", retry_after="5"))

    def feeder():  # every call answered 429 from the first one until WINDOW s later
        top_up()
        throttled.set()
        wait_for(lambda: simulator.state.requests, timeout=60, interval=0.01,
                 what="the first call")
        end = time.monotonic() + window
        while time.monotonic() < end:
            top_up()
            time.sleep(0.02)
        simulator.state.faults.clear()
        timings["recovered"] = time.monotonic()

    thread = threading.Thread(target=feeder)
    thread.start()
    throttled.wait(5)
    started = time.monotonic()
    turns = [turn_start(session=s, user=user, text="hello") for s in sessions]
    thread.join(window + 90)
    throttled_calls = sum(1 for r in simulator.state.requests if r.status == 429)
    ids = [t.pk for t in turns]
    try:
        wait_for(lambda: Turn.objects.filter(pk__in=ids, status__in=TERMINAL).count()
                 == len(turns), timeout=240, what="every turn to end")
    except AssertionError:
        print(list(Turn.objects.filter(pk__in=ids).values_list("status", "error")),
              [(r.status, r.fault) for r in simulator.state.requests])
        print(worker.output()[-5000:])
        raise
    done = time.monotonic()
    statuses = list(Turn.objects.filter(pk__in=ids).values_list("status", flat=True))
    assert statuses == [Turn.Status.COMPLETED] * len(turns), [
        (t.status, t.error) for t in Turn.objects.filter(pk__in=ids)]
    assert all(Message.objects.filter(session=s, role="assistant").count() == 1
               for s in sessions)
    waits = RunEvent.objects.filter(session__in=sessions, type="provider.failover",
                                    payload__has_key="wait_seconds")
    assert waits.exists()  # the user was told the turn waits, and how long
    waited = {e.session_id for e in waits}
    # The heartbeat kept each waiting turn's 3 s lease through its 20 s waits: no turn
    # was taken for dead and resumed.
    assert not RunEvent.objects.filter(session__in=sessions, type="turn.recovered").exists()
    # Every turn that ran during the throttled minute was throttled and told so; the
    # ones queued behind them (4 children) may have started after it ended.
    assert len(waited) >= 4
    # No storm: per turn, at most 3 route attempts per wait, and waits of >= 20 s once
    # the shared cooldown escalates: a minute holds at most 3 rounds.
    assert throttled_calls <= 9 * len(waited), throttled_calls
    requests = len(simulator.state.requests)
    print(f"\nRECOVERY 429-for-{window:.0f}s: {len(turns)} turns done {done - started:.1f} s "
          f"after they started, {done - timings['recovered']:.1f} s after the provider "
          f"recovered; {throttled_calls} throttled calls + {requests - throttled_calls} "
          f"served = {requests} provider requests for {len(turns)} turns "
          f"({len(waited)} turns waited)")
