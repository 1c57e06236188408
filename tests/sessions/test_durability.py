"""Durability of a turn (issue 10 defects 1, 2, 3, 9, 10; cases B01, B02, B05, B06, B15, B39)
on the real database, the provider simulator over HTTP, the real runner, dispatcher and
Celery task. A worker "dies" in-process by raising a BaseException the runner cannot catch
(as SIGKILL, nothing after that line runs); tests/reliability/ kills real worker processes.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.errors import LeaseLost
from agents.context.history import NOT_EXECUTED, validate_and_repair
from agents.messages import Message as AgentMessage
from agents.messages import ToolCall
from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec
from agents.tools.ledger import REPLAYED_NOTE, UNKNOWN_OUTCOME
from approvals.models import ApprovalRequest
from approvals.services import approval_expire_due
from sessions import toolbox
from sessions.leases import lease_acquire
from sessions.models import Message, RunEvent, Session, Turn
from sessions.services import session_create, session_rewind, turn_start, turn_stop, workspace_path
from sessions.sink import DbSink
from sessions.tasks import turn_run_task
from sessions.transcript import history_load

pytestmark = pytest.mark.django_db(transaction=True)


class Killed(BaseException):
    """The worker dies here: nothing in the runner catches a BaseException."""


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "SIMULATOR_EMBEDDED": False}
    toolbox.backend_kind.cache_clear()
    yield make_user("alice", team="red")
    toolbox.backend_kind.cache_clear()


def run(session_id: int):
    return turn_run_task.apply(args=[session_id]).result


def in_thread(fn, *args):
    """Run ``fn`` in a thread with its own DB connection; returns (thread, results list)."""
    out: list = []

    def body():
        try:
            out.append(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            out.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, out


def side_effect_script(command: str, *, call_id: str | None = None):
    """A model that runs ``command`` once when asked to "work", then repeats what the tool
    said (so the test sees exactly what the model was told)."""

    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="tool said: " + " | ".join(r.result for r in request.tool_results))
        if "work" in request.last_user_text:
            return Reply(text="working", tool_calls=(
                ToolCallSpec(name="terminal", input={"command": command}, id=call_id),))
        return Reply(text=f"echo: {request.last_user_text}")

    return Script(policy)


def expire_lease(session: Session) -> None:
    """What time does to a dead worker's lease."""
    root = session.lineage_root_id or session.pk
    Session.objects.filter(pk=root).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


# --- defect 1: a worker never fails another worker's turn; every write checks the lease --

@pytest.mark.services  # two threads writing at once: see the long-lease test below
def test_a_worker_that_lost_its_lease_does_not_fail_the_new_holders_turn(alice, simulator):
    simulator.state.script = side_effect_script("sleep 2; echo slow-done")
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="work please")
    thread, out = in_thread(run, session.pk)
    deadline = time.monotonic() + 20
    while not RunEvent.objects.filter(session=session, type="tool.called").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # Another worker takes over (the first one's lease "expired"): B now runs the turn.
    Session.objects.filter(pk=session.pk).update(
        lease_owner="worker-b", lease_expires_at=timezone.now() + timedelta(seconds=60))
    thread.join(timeout=30)
    assert not thread.is_alive()
    turn.refresh_from_db()
    assert turn.status == Turn.Status.RUNNING, (turn.status, turn.error)  # B's, untouched
    assert not RunEvent.objects.filter(session=session, type="turn.failed").exists()
    assert not Message.objects.filter(session=session, role="tool").exists()  # A wrote nothing


def _atomic(fn, **kwargs):
    from django.db import transaction

    with transaction.atomic():
        return fn(**kwargs)


def _intruder_paths(session, turn):
    """Every transcript write path of a turn, driven by a worker that does not hold the lease."""
    from agents.errors import ApprovalRequired
    from sessions import runner
    from sessions.context import session_prune, transcript_replace
    from sessions.tasks import turn_next

    ctx = runner.TurnContext(session=session, turn=turn, owner="intruder")
    sink = DbSink(session=session, turn=turn, owner="intruder")
    msg = AgentMessage(role="user", content="sneaky")
    call = ToolCall(id="c1", name="terminal", arguments='{"command": "ls"}')
    return {
        "message_added": lambda: sink.message_added(msg),
        "messages_added": lambda: sink.messages_added([msg, msg]),
        "transcript_replace (compaction, micro-compaction)": lambda: _atomic(
            transcript_replace, session=session, turn_owner="intruder", new_live=[msg]),
        "session_prune": lambda: session_prune(ctx=ctx, history=history_load(session=session),
                                               projected=10**6, forced=True),
        "begin": lambda: runner._begin(ctx, sink),
        "reduce_by_hand": lambda: runner._reduce_by_hand(ctx, sink),
        "await_approval": lambda: runner._await_approval(
            ctx, sink, ApprovalRequired([(call, None)])),
        "turn_next": lambda: turn_next(session=session, owner="intruder"),
        "tool_called (a call may only start under the lease)": lambda: sink.tool_called(call),
    }


def test_every_transcript_write_path_refuses_a_worker_without_the_lease(alice):
    session = session_create(user=alice)
    turn = Turn.objects.create(session=session, input_text="x", kind="compact")
    big = "x" * 30_000
    for n in range(30):  # old bulky tool output, then a recent tail: prunable
        Message.objects.create(session=session, role="user", content=f"step {n}")
        Message.objects.create(session=session, role="assistant", content="",
                               tool_calls=[{"id": f"t{n}", "name": "terminal",
                                            "arguments": "{}"}])
        Message.objects.create(session=session, role="tool", content=big if n < 10 else "ok",
                               tool_call_id=f"t{n}", tool_name="terminal")
    Turn.objects.create(session=session, input_text="stale", status=Turn.Status.RUNNING)
    assert lease_acquire(session=session, owner="holder", seconds=60)
    before = (list(Message.objects.filter(session=session).values()),
              list(Turn.objects.filter(session=session).values()))
    for name, path in _intruder_paths(session, turn).items():
        with pytest.raises(LeaseLost):
            path()
        after = (list(Message.objects.filter(session=session).values()),
                 list(Turn.objects.filter(session=session).values()))
        assert after == before, f"{name} wrote without the lease"
    assert not ApprovalRequest.objects.exists()
    # Positive control: the holder's prune on the same rows does write.
    from sessions import runner
    from sessions.context import session_prune

    holder = runner.TurnContext(session=session, turn=turn, owner="holder")
    assert session_prune(ctx=holder, history=history_load(session=session),
                         projected=10**6, forced=True) is not None


def test_a_reply_without_the_lease_keeps_its_usage_and_text_but_stores_no_message(alice):
    """The reply's one write (sessions/writes.py): the lease guards the message; the call
    was billed and its text streamed whoever holds the lease, so those are kept."""
    from agents.messages import ModelRequest, ModelResponse, Usage
    from sessions.models import UsageRecord

    session = session_create(user=alice)
    turn = Turn.objects.create(session=session, input_text="x", status=Turn.Status.RUNNING)
    assert lease_acquire(session=session, owner="holder", seconds=60)
    sink = DbSink(session=session, turn=turn, owner="intruder", lease_seconds=60)
    sink.text_delta("streamed ")
    reply = AgentMessage(role="assistant", content="streamed text")
    with pytest.raises(LeaseLost):
        sink.reply_added(reply, usage=Usage(input_tokens=10, output_tokens=3),
                         request=ModelRequest(model="m", system="", messages=()),
                         response=ModelResponse(message=reply, usage=None))
    assert not Message.objects.filter(session=session).exists()
    assert UsageRecord.objects.filter(session=session, input_tokens=10).count() == 1
    types = list(RunEvent.objects.filter(session=session).values_list("type", flat=True))
    assert types == ["text.delta", "usage"], types
    session.refresh_from_db()
    assert session.lease_owner == "holder" and session.message_count == 0

    # The holder's reply: usage, text and message in one write, seqs in that order, and
    # the lease renewed by it.
    before = session.lease_expires_at
    holder = DbSink(session=session, turn=turn, owner="holder", lease_seconds=600)
    holder.text_delta("more ")
    stored = holder.reply_added(reply, usage=Usage(input_tokens=7),
                                request=ModelRequest(model="m", system="", messages=()),
                                response=ModelResponse(message=reply, usage=None))
    assert stored.id == Message.objects.get(session=session).pk
    events = list(RunEvent.objects.filter(session=session).order_by("seq")
                  .values_list("seq", "type"))
    assert [t for _, t in events] == ["text.delta", "usage", "text.delta", "usage",
                                      "message.added"]
    assert [q for q, _ in events] == [1, 2, 3, 4, 5]
    session.refresh_from_db()
    assert session.message_count == 1 and session.event_seq == 5
    assert session.lease_expires_at > before + timedelta(seconds=500)
    assert holder.lease_renewed_at is not None


@pytest.mark.services  # two threads writing at once: SQLite's in-memory test database
# locks whole tables ("database table is locked" seen in an embedded CI run)
def test_two_workers_racing_on_one_session_run_each_turn_once_in_order(alice, simulator):
    """B39: the same task delivered twice at once runs once, with one model call per turn."""
    session = session_create(user=alice)
    for text in ("one", "two", "three"):
        turn_start(session=session, user=alice, text=f"hello {text}")
    simulator.state.reset()
    threads = [in_thread(run, session.pk) for _ in range(2)]
    for thread, _ in threads:
        thread.join(timeout=60)
    results = sorted(str(out[0]) for _, out in threads)
    assert all(not isinstance(out[0], BaseException) for _, out in threads), results
    statuses = list(Turn.objects.filter(session=session).values_list("status", flat=True))
    assert statuses == ["completed"] * 3
    assert len(simulator.state.requests) == 3  # one model call per turn, none twice
    roles = list(Message.objects.filter(session=session).values_list("role", "content"))
    assert roles == [("user", "hello one"), ("assistant", roles[1][1]),
                     ("user", "hello two"), ("assistant", roles[3][1]),
                     ("user", "hello three"), ("assistant", roles[5][1])]


def test_rewind_checks_and_writes_under_the_lineage_lock_and_refuses_a_live_lease(alice):
    session = session_create(user=alice)
    Message.objects.create(session=session, role="user", content="hi")
    Message.objects.create(session=session, role="assistant", content="hello")
    assert lease_acquire(session=session, owner="worker", seconds=60)  # a turn is starting
    with pytest.raises(Exception, match="Wait for the current turn"):
        session_rewind(session=session)
    assert Message.objects.filter(session=session, active=True).count() == 2


# --- defect 2: Stop cancels a turn waiting for approval ----------------------------------

def test_stop_cancels_the_pending_approval_and_the_turn_and_expiry_never_resumes_it(
        alice, simulator):
    simulator.state.script = side_effect_script("rm -rf build")
    session = session_create(user=alice)
    (workspace_path(session) / "build").mkdir()
    (workspace_path(session) / "build" / "keep.txt").write_text("keep")
    turn = turn_start(session=session, user=alice, text="work: clean up")
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert turn_stop(session=session) is True
    turn.refresh_from_db()
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.state == ApprovalRequest.State.CANCELLED
    assert turn.status == Turn.Status.CANCELLED
    assert RunEvent.objects.filter(session=session, type="turn.cancelled").exists()
    # Expiry (well past the timeout) and another delivery of the task change nothing.
    assert approval_expire_due(now=timezone.now() + timedelta(hours=1)) == 0
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED
    assert (workspace_path(session) / "build" / "keep.txt").exists()  # never ran
    # The next message works and the model sees the call answered as never run.
    turn_start(session=session, user=alice, text="hello again")
    run(session.pk)
    assert Turn.objects.filter(session=session).last().status == Turn.Status.COMPLETED
    answered = Message.objects.get(session=session, role="tool")
    assert answered.is_error and "not executed" in answered.content


# --- defect 3 / B01 / B39 / B02 / B05 / B06: crashes around a tool call ------------------

def _side_effects(session) -> list[str]:
    path = workspace_path(session) / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_b01_a_call_that_started_and_lost_its_output_is_interrupted_never_rerun(
        alice, simulator, monkeypatch):
    """Defect 3: the started set comes from the stored ``tool.called`` events; a half-run
    command is reported as interrupted with unknown outcome, never as not executed, and is
    not run again on the resumed turn."""
    simulator.state.script = side_effect_script("echo ran >> effects.txt")
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="work please")

    def die(*args, **kwargs):
        raise Killed()

    monkeypatch.setattr(DbSink, "tool_finished", die)  # dies before the output is recorded
    with pytest.raises(Killed):
        turn_run_task.apply(args=[session.pk], throw=True)
    monkeypatch.undo()
    assert _side_effects(session) == ["ran"]
    expire_lease(session)
    run(session.pk)  # the redelivered task / the recovery job
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    result = Message.objects.get(session=session, role="tool")
    assert result.is_error and result.content == UNKNOWN_OUTCOME
    assert "not executed" not in result.content
    assert _side_effects(session) == ["ran"]  # not run twice
    assert UNKNOWN_OUTCOME in json.dumps(simulator.state.requests[-1].body)
    assert RunEvent.objects.filter(session=session, type="turn.recovered").count() == 1
    assert Message.objects.filter(session=session, role="user").count() == 1


def test_b39_b06_a_result_ledgered_before_the_crash_is_used_not_rerun(
        alice, simulator, monkeypatch):
    simulator.state.script = side_effect_script("echo ran >> effects.txt; echo output-42")
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="work please")

    def die(self, messages):
        raise Killed()

    monkeypatch.setattr(DbSink, "messages_added", die)  # ledgered, not yet in the transcript
    with pytest.raises(Killed):
        turn_run_task.apply(args=[session.pk], throw=True)
    monkeypatch.undo()
    expire_lease(session)
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    result = Message.objects.get(session=session, role="tool")
    assert "output-42" in result.content and not result.is_error
    assert _side_effects(session) == ["ran"]
    final = Message.objects.filter(session=session, role="assistant").last().content
    assert "output-42" in final


def test_a_worker_killed_after_the_reply_but_before_the_end_is_not_redone(
        alice, simulator, monkeypatch):
    """Found by the soak: the resumed turn asked the model again and ran the command twice."""
    from sessions import runner

    simulator.state.script = side_effect_script("echo ran >> effects.txt")
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="work please")
    real_finish = runner._finish

    def die(*args, **kwargs):
        raise Killed()

    monkeypatch.setattr(runner, "_finish", die)
    with pytest.raises(Killed):
        turn_run_task.apply(args=[session.pk], throw=True)
    monkeypatch.setattr(runner, "_finish", real_finish)
    requests = len(simulator.state.requests)
    expire_lease(session)
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert len(simulator.state.requests) == requests  # the model was not asked again
    assert _side_effects(session) == ["ran"]
    assert Message.objects.filter(session=session, role="assistant").count() == 2


def test_b02_b05_a_crash_while_storing_a_batch_keeps_all_of_its_results_or_none(
        alice, simulator, monkeypatch):
    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="done: " + " | ".join(r.result for r in request.tool_results))
        return Reply(text="two calls", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": "echo a >> effects.txt"}),
            ToolCallSpec(name="terminal", input={"command": "echo b >> effects.txt"})))

    simulator.state.script = Script(policy)
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="go")
    import sessions.writes as writes_module

    from django.db import connection, transaction

    inserted: list = []
    if connection.vendor == "postgresql":
        # PostgreSQL stores a batch with ONE statement (writes._one_statement), which no crash
        # can split; the worker dying after it ran but before its commit is the statement
        # run inside a transaction that never commits.
        real_statement = writes_module._one_statement

        def statement_then_die(*args, **kwargs):
            with transaction.atomic():
                written = real_statement(*args, **kwargs)
                if written is not None and any(r.role == "tool" for r in written.rows):
                    inserted.extend(r.pk for r in written.rows)
                    raise Killed()
            return written

        monkeypatch.setattr(writes_module, "_one_statement", statement_then_die)
    else:
        real_insert = writes_module._insert_rows

        def insert_then_die(rows):
            rows = real_insert(rows)
            if any(row.role == "tool" for row in rows):  # the batch's rows are in, uncommitted
                inserted.extend(row.pk for row in rows)
                raise Killed()
            return rows

        monkeypatch.setattr(writes_module, "_insert_rows", insert_then_die)
    with pytest.raises(Killed):
        turn_run_task.apply(args=[session.pk], throw=True)
    monkeypatch.undo()
    assert inserted  # the first result was written inside the batch's transaction ...
    assert Message.objects.filter(session=session, role="tool").count() == 0  # ... rolled back
    expire_lease(session)
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    tools = list(Message.objects.filter(session=session, role="tool").order_by("id"))
    assert len(tools) == 2 and all(not t.is_error for t in tools)
    assert sorted(_side_effects(session)) == ["a", "b"]  # each ran once


def test_b06_a_repeated_call_id_with_the_same_arguments_is_not_renamed_and_run_again(
        alice, simulator):
    simulator.state.script = side_effect_script("echo ran >> effects.txt; echo out-1",
                                                call_id="call_0")
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="work once")
    run(session.pk)
    turn_start(session=session, user=alice, text="work again")
    run(session.pk)
    assert _side_effects(session) == ["ran"]
    results = list(Message.objects.filter(session=session, role="tool").order_by("id"))
    assert len(results) == 2
    assert results[1].content.startswith(REPLAYED_NOTE) and "out-1" in results[1].content
    assert all(t.status == "completed" for t in Turn.objects.filter(session=session))


@pytest.mark.services  # three threads writing at once: SQLite's in-memory test database
# (shared cache) answers "table is locked"; PostgreSQL is where workers race for real
def test_b39_a_tool_call_longer_than_the_lease_keeps_its_turn(alice, simulator):
    """The heartbeat renews the 2 s lease during a 5 s command: a second delivery of the task
    meanwhile finds it busy, and nothing fails the running turn."""
    alice_settings = simulator
    from django.conf import settings

    settings.HERMES = {**settings.HERMES, "LEASE_SECONDS": 2}
    alice_settings.state.script = side_effect_script("sleep 5; echo ran >> effects.txt; "
                                                     "echo long-done")
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="work slowly")
    thread, out = in_thread(run, session.pk)
    deadline = time.monotonic() + 20
    while not RunEvent.objects.filter(session=session, type="tool.called").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(3)  # past the lease's 2 s
    assert run(session.pk) == "busy"
    from sessions.tasks import turn_recover_task

    assert turn_recover_task() == 0  # the lease is live: nothing to recover
    thread.join(timeout=30)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    result = Message.objects.get(session=session, role="tool")
    assert "long-done" in result.content and not result.is_error
    assert _side_effects(session) == ["ran"]
    assert not RunEvent.objects.filter(session=session, type="turn.failed").exists()


def test_the_celery_visibility_timeout_outlasts_the_longest_tool_call():
    from hermes_web.celery import LONGEST_TOOL_CALL_SECONDS, app, visibility_timeout

    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    configured = app.conf.broker_transport_options["visibility_timeout"]
    assert configured >= LONGEST_TOOL_CALL_SECONDS + 120
    assert visibility_timeout(lease_seconds=120) >= 3600
    assert visibility_timeout(lease_seconds=120, configured=5) == 5


# --- B15: order is by id only ------------------------------------------------------------

def test_b15_rows_written_under_a_stepped_back_clock_load_and_resume_by_id(alice, simulator):
    session = session_create(user=alice)
    base = timezone.now()
    at = lambda s: base + timedelta(seconds=s)  # noqa: E731
    rows = [
        ("user", dict(content="list then read"), 1000.300),
        ("assistant", dict(tool_calls=[{"id": "c_a", "name": "terminal",
                                        "arguments": '{"command": "ls"}'}]), 1000.400),
        ("tool", dict(content="README.md", tool_call_id="c_a", tool_name="terminal"), 1000.500),
        ("assistant", dict(tool_calls=[{"id": "c_b", "name": "read_file",
                                        "arguments": '{"path": "README.md"}'}]), 1000.450),
        ("tool", dict(content="# Welcome", tool_call_id="c_b", tool_name="read_file"), 1000.460),
        ("assistant", dict(content="done"), 999.0),  # the clock stepped back a second
    ]
    for role, fields, ts in rows:
        Message.objects.create(session=session, role=role, created_at=at(ts), **fields)
    loaded = history_load(session=session)
    assert [m.id for m in loaded] == sorted(m.id for m in loaded)
    assert [m.tool_call_id for m in loaded if m.role == "tool"] == ["c_a", "c_b"]
    repair = validate_and_repair(loaded)
    assert not repair.problems  # nothing to move: a reader sorting by time would need it
    by_time = sorted(loaded, key=lambda m: Message.objects.get(pk=m.id).created_at)
    assert validate_and_repair(by_time).problems  # the validator would have hidden it
    # The UI and export readers order the same way.
    from sessions.selectors import message_list_display

    shown = [m.pk for m in message_list_display(session=session)]
    assert shown == sorted(shown)
    # A real turn on top: the simulator validates the wire history like a provider.
    turn_start(session=session, user=alice, text="hello after the clock step")
    run(session.pk)
    assert Turn.objects.get(session=session).status == Turn.Status.COMPLETED
    sent = simulator.state.requests[-1].body["messages"]
    assert [m["role"] for m in sent][:4] == ["user", "assistant", "user", "assistant"]
    assert NOT_EXECUTED not in json.dumps(simulator.state.requests[-1].body)
