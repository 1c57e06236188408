"""Delegation on real services (issue 12): real `celery -A hermes_web worker` processes on
Redis and PostgreSQL run a parent's batch of children concurrently (each child leases its
own session), and a worker SIGKILLed mid-child loses nothing: another worker resumes the
child from its stored transcript, the side-effecting command is not run again (the child is
told its outcome is unknown), and the parent is resumed with every summary."""

from __future__ import annotations

import re
import time

import pytest

from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec
from agents.tools.ledger import UNKNOWN_OUTCOME
from sessions.models import ChildTask, Message, RunEvent, Turn
from sessions.services import session_create, turn_start, turn_stop, workspace_path
from tests.reliability.conftest import wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(240)]

ENDED = (Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED)


def _goal(text: str) -> str | None:
    match = re.search(r"Goal:\n(.+?)\n", text)
    return match.group(1) if match else None


def delegating(goals: list[str], child_command) -> Script:
    """Parent: one delegate call for ``goals``, then a final reply quoting the result.
    Child: one terminal call ``child_command(goal)``, then a summary quoting its output."""

    def policy(request: ScriptRequest) -> Reply:
        goal = _goal(request.last_user_text)
        if goal is not None:
            if request.tool_results:
                return Reply(text=f"SUMMARY[{goal}]: " + request.tool_results[0].result[:200])
            return Reply(text="working", tool_calls=(ToolCallSpec(
                name="terminal", input={"command": child_command(goal), "timeout": 60}),))
        if request.tool_results:
            return Reply(text="PARENT GOT: " + request.tool_results[0].result)
        return Reply(text="delegating", tool_calls=(ToolCallSpec(name="delegate", input={
            "tasks": [{"goal": g} for g in goals]}),))

    return Script(policy)


def _ended(turn: Turn) -> bool:
    turn.refresh_from_db()
    return turn.status in ENDED


def test_a_batch_of_three_children_runs_concurrently_on_workers(
        make_user, simulator, service_env, celery_worker_proc):
    goals = ["alpha", "beta", "gamma"]
    simulator.state.script = delegating(goals, lambda g: f"sleep 3; echo {g}-done")
    celery_worker_proc("worker-a", concurrency=4)
    user = make_user("nia", team="blue")
    parent = session_create(user=user)
    turn = turn_start(session=parent, user=user, text="delegate three tasks")
    wait_for(lambda: _ended(turn), timeout=150, what="the parent to finish")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    tasks = list(ChildTask.objects.filter(parent_turn=turn).select_related("turn"))
    assert len(tasks) == 3 and all(t.turn.status == Turn.Status.COMPLETED for t in tasks)
    # Concurrent: every child started before any child finished (each sleeps 3 s).
    latest_start = max(t.turn.started_at for t in tasks)
    earliest_end = min(t.turn.finished_at for t in tasks)
    assert latest_start < earliest_end, [(t.turn.started_at, t.turn.finished_at)
                                         for t in tasks]
    # Three children ending within moments of each other joined exactly once (row lock).
    assert RunEvent.objects.filter(session=parent, type="children.finished").count() == 1
    result = Message.objects.get(session=parent, role="tool", tool_name="delegate")
    for goal in goals:
        assert f"SUMMARY[{goal}]" in result.content and f"{goal}-done" in result.content
    final = Message.objects.filter(session=parent, role="assistant").last().content
    assert final.startswith("PARENT GOT: 3 child agents ended")


def test_sigkill_mid_child_the_child_finishes_on_another_worker(
        make_user, simulator, service_env, celery_worker_proc):
    simulator.state.script = delegating(
        ["fragile"], lambda g: "echo ran >> effects.txt; sleep 20; echo end")
    user = make_user("oli")
    parent = session_create(user=user)
    first = celery_worker_proc("worker-a")
    turn = turn_start(session=parent, user=user, text="delegate the fragile task")
    task = wait_for(lambda: ChildTask.objects.filter(parent_turn=turn).first(), timeout=60,
                    what="the child to be created")
    effects = workspace_path(task.child) / "effects.txt"
    wait_for(lambda: effects.exists(), timeout=60, what="the child's command to start")
    killed_at = time.monotonic()
    first.kill()
    celery_worker_proc("worker-b")
    wait_for(lambda: _ended(turn), timeout=120, what="the parent to finish on worker-b")
    recovery = time.monotonic() - killed_at
    assert turn.status == Turn.Status.COMPLETED, turn.error
    child_turn = Turn.objects.get(pk=task.turn_id)
    assert child_turn.status == Turn.Status.COMPLETED, child_turn.error
    assert effects.read_text().splitlines() == ["ran"]  # the side effect happened once
    tool = Message.objects.get(session=task.child, role="tool")
    assert tool.is_error and tool.content == UNKNOWN_OUTCOME
    assert Message.objects.filter(session=task.child, role="user").count() == 1
    result = Message.objects.get(session=parent, role="tool", tool_name="delegate")
    assert "SUMMARY[fragile]" in result.content and "outcome is unknown" in result.content
    print(f"\nRECOVERY sigkill-mid-child: {recovery:.1f} s")


def test_stop_on_the_parent_stops_running_children_on_workers(
        make_user, simulator, service_env, celery_worker_proc):
    simulator.state.script = delegating(["slow-a", "slow-b"],
                                        lambda g: f"echo {g} >> started.txt; sleep 30")
    celery_worker_proc("worker-a", concurrency=3)
    user = make_user("pat")
    parent = session_create(user=user)
    turn = turn_start(session=parent, user=user, text="delegate two slow tasks")
    started = workspace_path(parent) / "started.txt"
    wait_for(lambda: started.exists() and len(started.read_text().split()) == 2, timeout=90,
             what="both children's commands to start")
    t0 = time.monotonic()
    assert turn_stop(session=parent)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED
    tasks = list(ChildTask.objects.filter(parent_turn=turn))
    wait_for(lambda: all(_ended(t.turn) for t in tasks), timeout=30,
             what="the children to stop")
    assert time.monotonic() - t0 < 25  # stopped, not run to the end of their 30 s sleep
    assert all(t.turn.status == Turn.Status.CANCELLED for t in tasks)
    assert not Message.objects.filter(session=parent, role="tool", tool_name="delegate",
                                      is_error=False).exists()
