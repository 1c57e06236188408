"""A turn end to end on the real database and the provider simulator over HTTP: the user
message stored, streamed events in order, tool results, usage, queueing, leases, failures."""

from __future__ import annotations

import json

import pytest

from agents.errors import LeaseLost
from agents.messages import Message as AgentMessage
from simulator.faults import Fault
from simulator.script import Script, ScriptRule, Reply, ToolCallSpec
from sessions.leases import lease_acquire, lease_release
from sessions.models import Message, RunEvent, Turn, UsageRecord
from sessions.services import session_create, turn_start
from sessions.sink import DbSink
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice", team="red")


def run(session_id: int) -> None:
    turn_run_task.apply(args=[session_id])


def test_demo_turn_lists_and_reads_with_two_tool_cards(alice):
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="list the files and read README.md")
    run(session.pk)
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.COMPLETED
    roles = list(Message.objects.filter(session=session).values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    tools = Message.objects.filter(session=session, role="tool").order_by("id")
    assert [t.tool_name for t in tools] == ["terminal", "read_file"]
    assert "README.md" in tools[0].content
    assert "Welcome to your Hermes workspace" in tools[1].content
    events = list(RunEvent.objects.filter(session=session).order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types[0] == "turn.queued" and types[-1] == "turn.finished"
    assert types.count("tool.called") == 2 and types.count("tool.result") == 2
    assert "text.delta" in types
    streamed = "".join(e.payload["text"] for e in events if e.type == "text.delta")
    final = Message.objects.filter(session=session, role="assistant").last().content
    assert final in streamed


def test_usage_is_recorded_per_call_in_disjoint_buckets(alice):
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="list the files and read README.md")
    run(session.pk)
    records = list(UsageRecord.objects.filter(session=session).order_by("id"))
    assert len(records) == 2
    first, second = records
    assert first.cache_write_5m_tokens > 0 and first.cache_read_tokens == 0
    # The second call re-reads the prefix the first wrote: the cache discipline at work.
    assert second.cache_read_tokens >= first.cache_write_5m_tokens
    assert second.raw["cache_read_input_tokens"] == second.cache_read_tokens
    assert all(r.output_tokens > 0 for r in records)


def test_messages_queued_during_a_turn_run_next_in_order(alice, simulator):
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="hello one")
    turn_start(session=session, user=alice, text="hello two")
    run(session.pk)
    statuses = list(Turn.objects.filter(session=session).order_by("id")
                    .values_list("status", flat=True))
    assert statuses == ["completed", "completed"]
    users = list(Message.objects.filter(session=session, role="user").order_by("id")
                 .values_list("content", flat=True))
    assert users == ["hello one", "hello two"]


def test_a_busy_lease_makes_the_task_return_and_loses_nothing(alice):
    session = session_create(user=alice)
    assert lease_acquire(session=session, owner="someone-else", seconds=60)
    turn_start(session=session, user=alice, text="hello")
    assert turn_run_task.apply(args=[session.pk]).result == "busy"
    assert Turn.objects.get(session=session).status == Turn.Status.QUEUED
    lease_release(session=session, owner="someone-else")
    run(session.pk)
    assert Turn.objects.get(session=session).status == Turn.Status.COMPLETED


def test_a_writer_without_the_lease_cannot_land_a_row(alice):
    session = session_create(user=alice)
    turn = Turn.objects.create(session=session, input_text="x")
    assert lease_acquire(session=session, owner="holder", seconds=60)
    sink = DbSink(session=session, turn=turn, owner="intruder")
    with pytest.raises(LeaseLost):
        sink.message_added(AgentMessage(role="user", content="sneaky"))
    assert not Message.objects.filter(session=session).exists()


def test_provider_error_fails_the_turn_readably_and_keeps_the_message(alice, simulator):
    session = session_create(user=alice)
    for _ in range(3):
        simulator.state.faults.push(Fault(kind="server_error"))
    turn_start(session=session, user=alice, text="hello there")
    run(session.pk)
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.FAILED
    failed = RunEvent.objects.get(session=session, type="turn.failed")
    assert "provider" in failed.payload["reason"].lower()
    assert "Traceback" not in failed.payload["reason"]
    assert Message.objects.filter(session=session, role="user",
                                  content="hello there").exists()


def test_invalid_tool_arguments_and_unknown_tools_become_error_results(alice, simulator):
    simulator.state.script = Script([
        ScriptRule(tool_result=".", reply=Reply(text="done")),
        ScriptRule(user="break", reply=Reply(text="trying", tool_calls=(
            ToolCallSpec(name="no_such_tool", input={}),
            ToolCallSpec(name="read_file", input={"nonsense": 1})))),
    ])
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="break things")
    run(session.pk)
    assert Turn.objects.get(session=session).status == Turn.Status.COMPLETED
    results = list(Message.objects.filter(session=session, role="tool").order_by("id"))
    assert len(results) == 2 and all(r.is_error for r in results)
    assert "no_such_tool" in results[0].content


def test_budget_exhaustion_ends_with_a_tool_free_summary_call(alice, simulator):
    def policy(request):
        if not request.tool_names:  # the finalizer: no tool schema offered
            return Reply(text="Summary: I read the README several times.")
        return Reply(text="again", tool_calls=(
            ToolCallSpec(name="read_file", input={"path": "README.md"}),))

    simulator.state.script = Script(policy)
    alice_settings = simulator  # keep the fixture order explicit
    from django.conf import settings

    settings.HERMES = {**settings.HERMES, "MAX_ITERATIONS": 3}
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="loop forever")
    run(session.pk)
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.COMPLETED
    finished = RunEvent.objects.get(session=session, type="turn.finished")
    assert finished.payload["status"] == "budget_exhausted"
    last_request = alice_settings.state.requests[-1]
    assert "tools" not in last_request.body
    assert Message.objects.filter(session=session, role="assistant").last().content.startswith(
        "Summary")


def test_stop_kills_the_running_command_and_the_next_message_is_answered(alice, simulator):
    import threading
    import time

    from sessions.services import turn_stop

    def policy(request):
        if request.tool_results:
            return Reply(text="the command ended")
        if "sleep" in request.last_user_text:
            return Reply(text="running it", tool_calls=(
                ToolCallSpec(name="terminal", input={"command": "sleep 30; echo never"}),))
        return Reply(text=f"you said: {request.last_user_text}")

    simulator.state.script = Script(policy)
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="please sleep a while")
    def in_thread():
        from django.db import connection

        try:
            run(session.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=in_thread)
    started = time.monotonic()
    worker.start()
    while not RunEvent.objects.filter(session=session, type="tool.called").exists():
        assert time.monotonic() - started < 20
        time.sleep(0.1)
    assert turn_stop(session=session)
    worker.join(timeout=20)
    assert not worker.is_alive() and time.monotonic() - started < 20
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.CANCELLED
    result = Message.objects.get(session=session, role="tool")
    assert result.is_error and "stopped by the user" in result.content
    assert "never" not in result.content
    turn_start(session=session, user=alice, text="help me")
    run(session.pk)
    last = Message.objects.filter(session=session, role="assistant").last()
    assert last.content == "you said: help me"


def test_a_workers_copy_of_the_transcript_is_dropped_when_the_rows_change(alice, simulator):
    """The worker keeps each session's transcript between turns; a rewind (not an append)
    makes it stale, and the next request must not carry the rewound exchange."""
    from sessions.services import session_rewind

    session = session_create(user=alice)
    for text in ("first about quokka", "second about wombat"):
        turn_start(session=session, user=alice, text=text)
        run(session.pk)
    session_rewind(session=session)
    turn_start(session=session, user=alice, text="third about narwhal")
    run(session.pk)
    body = json.dumps(simulator.state.requests[-1].body)
    assert "quokka" in body and "narwhal" in body and "wombat" not in body


def test_three_writes_without_a_read_raise_a_cache_warning_and_the_admin_flag(
        alice, simulator, hermes_settings):
    from sessions.models import Session

    # Fixed 5m TTLs: the default strategy would keep a new session's prompt for an hour, and
    # this test is about a cache that expires between calls.
    hermes_settings.HERMES = {**hermes_settings.HERMES, "CACHE_TTL": "5m"}
    session = session_create(user=alice)
    for n in range(3):
        turn_start(session=session, user=alice, text=f"hello {n}")
        run(session.pk)
        simulator.state.clock.advance(600)  # past the 5-minute TTL: every call writes anew
    warning = RunEvent.objects.get(session=session, type="cache.warning")
    assert "3 consecutive calls" in warning.payload["reason"]
    assert Session.objects.get(pk=session.pk).cache_warning
