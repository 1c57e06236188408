"""Steering a running turn (issue 12 item 4), end to end: the real runner, the real loop and
dispatcher, the provider simulator over HTTP, rows in the database.

The prefix is read back from the simulator's own record of every request it answered
(simulator/state.py ``RecordedRequest``): what the turn sent before a correction
landed must be a byte-identical prefix of what it sent after.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.core.exceptions import ValidationError

from simulator.script import Reply, Script, ToolCallSpec
from agents.steer import STEERED_RESULT
from sessions.models import Message, RunEvent, Turn
from sessions.services import session_create, turn_start, turn_steer, workspace_path
from sessions.steer import STEER, STEERED
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)

CORRECTION = "Actually, do not write b.txt; stop after the first step."
WAIT_FOR_GO = ("touch started; while [ ! -f go ]; do sleep 0.05; done; "
               "echo first step done")
"""The first call: says it started (a file, so the test thread need not poll the database
while the worker writes: in-memory SQLite's shared cache fails a write that meets a read
instead of waiting) and waits for the test's go."""


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice", team="red")


def run(session_id: int) -> None:
    turn_run_task.apply(args=[session_id])


def run_in_thread(session_id: int) -> threading.Thread:
    def target():
        from django.db import connection

        try:
            run(session_id)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def wait_until(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def strip_markers(value):
    """A body with its cache_control markers removed (the planner moves them each request;
    they are not content)."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def wire_bytes(value) -> bytes:
    return json.dumps(strip_markers(value), ensure_ascii=False, separators=(",", ":")).encode()


def assert_prefix_unchanged(before: dict, after: dict) -> None:
    """Every byte ``before`` sent (system, tools, each message) is in ``after`` unchanged,
    and ``after`` only appends messages. (The OpenAI wire carries the system prompt as its
    first message.)"""
    assert wire_bytes(after.get("system")) == wire_bytes(before.get("system"))
    assert wire_bytes(after["tools"]) == wire_bytes(before["tools"])
    kept = len(before["messages"])
    assert len(after["messages"]) > kept
    for old, new in zip(before["messages"], after["messages"][:kept]):
        assert wire_bytes(new) == wire_bytes(old)


def conversation_requests(simulator) -> list[dict]:
    return [r.body for r in simulator.state.requests if r.status == 200 and r.body.get("tools")]


@pytest.mark.parametrize("provider", ["simulator", "simulator-openai"])
def test_a_correction_lands_between_two_tool_calls_with_the_prefix_byte_identical(
        alice, simulator, provider, settings):
    """Two terminal calls (each a barrier, so two segments). The correction is sent while
    the first runs: the first finishes and keeps its output, the second is answered "not
    run: the user steered" and never runs, the correction follows as a real user message,
    and the next request reproduces the previous one byte for byte before appending; on
    the Anthropic Messages wire and on OpenAI chat completions."""
    settings.HERMES = {**settings.HERMES, "PROVIDER": provider}

    def policy(request):
        if request.last_user_text == CORRECTION:
            return Reply(text="Understood: I stopped after the first step.")
        return Reply(text="Two steps: wait, then write b.txt.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": WAIT_FOR_GO}),
            ToolCallSpec(name="terminal", input={"command": "echo second > b.txt"})))

    simulator.state.script = Script(policy)
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="do the two steps")
    worker = run_in_thread(session.pk)
    wait_until((workspace_path(session) / "started").exists, "the first call to start")
    steer = turn_steer(session=session, user=alice, text=CORRECTION)
    # Durable at once: the correction is a row before any worker touched it.
    assert Turn.objects.get(pk=steer.pk).status == Turn.Status.QUEUED
    (workspace_path(session) / "go").write_text("")
    worker.join(timeout=30)
    assert not worker.is_alive()

    turn.refresh_from_db()
    steer.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    assert (steer.kind, steer.status) == (STEERED, Turn.Status.COMPLETED)
    assert not (workspace_path(session) / "b.txt").exists()  # the second call never ran
    called = RunEvent.objects.filter(session=session, type="tool.called")
    assert called.count() == 1

    rows = list(Message.objects.filter(session=session).order_by("id"))
    assert [(r.role, r.kind) for r in rows] == [
        ("user", ""), ("assistant", ""), ("tool", ""), ("tool", ""), ("user", STEER),
        ("assistant", "")]
    first, second = rows[2], rows[3]
    assert "first step done" in first.content and not first.is_error
    assert second.is_error and second.content == STEERED_RESULT
    assert second.tool_meta == {"steered": True}
    assert rows[4].content == CORRECTION and steer.user_message_id == rows[4].pk
    assert rows[5].content == "Understood: I stopped after the first step."

    before, after = conversation_requests(simulator)
    assert_prefix_unchanged(before, after)
    tail = after["messages"][len(before["messages"]):]
    if provider == "simulator":
        # The provider's own account: everything the first request cached is read back.
        first, second = [r.usage for r in simulator.state.requests if r.status == 200]
        cached = first["cache_read_input_tokens"] + first["cache_creation_input_tokens"]
        assert cached > 0 and second["cache_read_input_tokens"] >= cached
        assert [m["role"] for m in tail] == ["assistant", "user"]
        assert [b["type"] for b in tail[1]["content"]] == ["tool_result", "tool_result",
                                                           "text"]
        assert tail[1]["content"][1]["is_error"] is True
        assert tail[1]["content"][2]["text"] == CORRECTION
        assert not any(b.get("type") in ("thinking", "redacted_thinking")
                       for m in after["messages"] for b in m["content"])
    else:
        assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "user"]
        assert tail[2]["content"] == STEERED_RESULT and tail[3]["content"] == CORRECTION

    landed = RunEvent.objects.get(session=session, type="turn.steered").payload
    assert landed["turn_id"] == turn.pk and landed["steer_turn_ids"] == [steer.pk]
    assert landed["answered_calls"] == []  # the dispatcher answered the skipped call
    added = RunEvent.objects.filter(session=session, type="message.added",
                                    payload__message__id=rows[4].pk).get().payload
    assert added["steer_turn_id"] == steer.pk


def test_a_correction_waiting_when_the_stream_ends_answers_every_call_unrun(alice, simulator):
    """The correction arrives while the reply streams (the scripted model sends it through
    the real service before answering): at stream end no call has started, so none runs;
    each is answered and the correction follows."""
    session = session_create(user=alice)

    def policy(request):
        if request.last_user_text == CORRECTION:
            return Reply(text="Fine, nothing written.")
        turn_steer(session=session, user=alice, text=CORRECTION)
        return Reply(text="Writing both files.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": "echo a > a.txt"}),
            ToolCallSpec(name="terminal", input={"command": "echo b > b.txt"})))

    simulator.state.script = Script(policy)
    turn_start(session=session, user=alice, text="write the files")
    run(session.pk)

    assert not (workspace_path(session) / "a.txt").exists()
    assert not RunEvent.objects.filter(session=session, type="tool.called").exists()
    results = Message.objects.filter(session=session, role="tool").order_by("id")
    assert [r.content for r in results] == [STEERED_RESULT, STEERED_RESULT]
    before, after = conversation_requests(simulator)
    assert_prefix_unchanged(before, after)
    assert Turn.objects.filter(session=session, kind=STEERED).count() == 1
    landed = RunEvent.objects.get(session=session, type="turn.steered").payload
    assert landed["answered_calls"] == [r.tool_call_id for r in results]
    assert Message.objects.filter(session=session, role="assistant").last().content == (
        "Fine, nothing written.")


def test_a_correction_that_arrives_as_the_turn_ends_becomes_the_next_turn(alice, simulator):
    """The reply has no tool calls, so the turn ends with no safe point left: the
    correction is not lost, it runs as the next turn of the same task."""
    session = session_create(user=alice)

    def policy(request):
        if request.last_user_text == CORRECTION:
            return Reply(text="Taking your correction as a new request.")
        turn_steer(session=session, user=alice, text=CORRECTION)
        return Reply(text="Here is a long answer.")

    simulator.state.script = Script(policy)
    first = turn_start(session=session, user=alice, text="explain something")
    run(session.pk)

    turns = list(Turn.objects.filter(session=session).order_by("id"))
    assert [t.pk for t in turns][0] == first.pk and len(turns) == 2
    assert all(t.status == Turn.Status.COMPLETED for t in turns)
    assert turns[1].kind == STEER  # ran as its own turn: never claimed, never lost
    user = Message.objects.get(pk=turns[1].user_message_id)
    assert user.content == CORRECTION
    assert not RunEvent.objects.filter(session=session, type="turn.steered").exists()
    assert Message.objects.filter(session=session, role="assistant").last().content == (
        "Taking your correction as a new request.")


def test_a_correction_sent_after_the_turn_ended_is_a_queued_turn(alice, simulator):
    simulator.state.script = Script(lambda request: Reply(text=f"re: {request.last_user_text}"))
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="hello")
    run(session.pk)
    steer = turn_steer(session=session, user=alice, text="and another thing")
    assert Turn.objects.get(pk=steer.pk).status == Turn.Status.QUEUED
    assert RunEvent.objects.filter(session=session, type="steer.queued",
                                   payload__turn_id=steer.pk).exists()
    run(session.pk)
    steer.refresh_from_db()
    assert steer.status == Turn.Status.COMPLETED and steer.user_message_id is not None
    assert Message.objects.filter(session=session, role="assistant").last().content == (
        "re: and another thing")


def test_bad_corrections_are_refused_and_nothing_is_stored(alice, make_user):
    session = session_create(user=alice)
    bob = make_user("bob")
    for user, text in ((alice, "   "), (alice, "/compact"), (bob, "hi"),
                       (alice, "x" * 100_001)):
        with pytest.raises(ValidationError):
            turn_steer(session=session, user=user, text=text)
    assert not Turn.objects.filter(session=session).exists()


def test_a_correction_survives_the_worker_that_was_running_the_turn(alice, simulator):
    """The worker running the turn died (the turn is left RUNNING, its message stored, no
    lease held) and a correction was sent meanwhile: it waited as a row, and the worker that
    resumes the turn lands it before its first request."""
    from django.utils import timezone

    from agents.messages import Message as AgentMessage
    from sessions.transcript import _insert

    simulator.state.script = Script(lambda request: Reply(text=f"re: {request.last_user_text}"))
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="summarise the README")
    row = _insert(session=session, message=AgentMessage(role="user",
                                                        content="summarise the README"))
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING, user_message=row,
                                           started_at=timezone.now())
    steer = turn_steer(session=session, user=alice, text="in one sentence")
    run(session.pk)

    assert RunEvent.objects.filter(session=session, type="turn.recovered",
                                   payload__turn_id=turn.pk).exists()
    steer.refresh_from_db()
    assert steer.kind == STEERED
    landed = RunEvent.objects.get(session=session, type="turn.steered").payload
    assert landed["turn_id"] == turn.pk
    (body,) = conversation_requests(simulator)
    texts = [b["text"] for b in body["messages"][-1]["content"]]
    assert texts == ["summarise the README", "in one sentence"]
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.COMPLETED


@pytest.mark.services
def test_on_services_a_redis_worker_lands_the_correction_with_the_prefix_intact(
        alice, simulator, settings):
    """The same correction between two tool calls, with the turn enqueued on commit to a
    real Celery worker consuming from Redis and the rows in PostgreSQL."""
    from celery.contrib.testing.worker import start_worker

    from hermes_web.celery import app

    assert settings.CELERY_BROKER_URL.startswith("redis://"), "services tests need REDIS_URL"

    def policy(request):
        if request.last_user_text == CORRECTION:
            return Reply(text="Understood.")
        return Reply(text="Two steps.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": WAIT_FOR_GO}),
            ToolCallSpec(name="terminal", input={"command": "echo second > b.txt"})))

    simulator.state.script = Script(policy)
    session = session_create(user=alice)
    app.control.purge()
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False,
                      shutdown_timeout=30):
        turn = turn_start(session=session, user=alice, text="do the two steps")
        wait_until((workspace_path(session) / "started").exists, "the first call to start",
                   timeout=60)
        steer = turn_steer(session=session, user=alice, text=CORRECTION)
        (workspace_path(session) / "go").write_text("")
        wait_until(lambda: Turn.objects.get(pk=turn.pk).status == Turn.Status.COMPLETED,
                   "the turn to finish", timeout=60)
    assert Turn.objects.get(pk=steer.pk).kind == STEERED
    assert not (workspace_path(session) / "b.txt").exists()
    before, after = conversation_requests(simulator)
    assert_prefix_unchanged(before, after)
