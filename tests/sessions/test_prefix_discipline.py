"""The prefix discipline through the real runner (issue 3, "Tests"): the request bytes up to
the earliest message breakpoint never change from one iteration to the next, across a worker
restart (in-process caches cleared) and across a resumed turn; a compaction is the one place
they change. Also restart recovery after SOUL.md changed, and byte-exact sidecar replay of a
skill invocation. Every request is read back from the provider simulator's own record.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from agents import prompt as agents_prompt
from agents.cache import REGISTRY
from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec
from sessions.models import Message, RunEvent, Session, Turn
from sessions.services import session_create, turn_start, workspace_path
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)

ITERATIONS = 4
"""Tool iterations per turn before the scripted model answers in text."""


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    hermes_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    user = make_user("alice", team="red")
    # alice approves her own destructive request here: opt out of the team default
    from accounts.models import Team

    Team.objects.update(admin_only_risk_classes=[])
    return user


def _iterations_since_user_text(body: dict) -> int:
    """Assistant messages after the newest user message that carries text."""
    count = 0
    for message in reversed(body["messages"]):
        content = message["content"]
        if message["role"] == "user" and any(b.get("type") == "text" for b in content):
            return count
        count += message["role"] == "assistant"
    return count


def tool_loop_policy(request: ScriptRequest) -> Reply:
    """read_file ``ITERATIONS`` times per user message, then a text answer; "clean" asks for
    a command that needs approval; a request without tools (summariser, finalizer) gets a
    summary."""
    if not request.tool_names:
        return Reply(text="Summary: the user asked for reads; README was read repeatedly.")
    done = _iterations_since_user_text(request.body)
    if "clean" in request.last_user_text and done == 0:
        return Reply(text="Cleaning.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": "rm -rf build", "timeout": 30}),))
    if done < ITERATIONS:
        path = "big.txt" if done % 2 else "README.md"
        return Reply(tool_calls=(ToolCallSpec(name="read_file", input={"path": path}),))
    return Reply(text=f"Finished after {done} steps.")


def run(session_id: int) -> None:
    turn_run_task.apply(args=[session_id])


def restart_worker() -> None:
    """What a fresh worker process has: no recovery verdicts, an empty prefix registry, no
    sessions bound from earlier turns."""
    from sessions import runner

    with agents_prompt._recovery_lock:
        agents_prompt._recovery_memo.clear()
    REGISTRY.clear()
    runner.BOUND.clear()


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def prefix_digest(body: dict, n_messages: int) -> str:
    """sha256 of tools + system + the first ``n_messages`` wire messages, markers removed."""
    data = _strip({"tools": body.get("tools", []), "system": body.get("system", []),
                   "messages": body["messages"][:n_messages]})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def earliest_message_breakpoint(body: dict) -> int:
    return min(i for i, m in enumerate(body["messages"])
               if any("cache_control" in b for b in m["content"]))


def holds(previous: dict, current: dict) -> bool:
    """The discipline between two consecutive requests: ``current`` reproduces ``previous``
    byte for byte up to its earliest message breakpoint (or all of ``previous`` when that
    breakpoint lies beyond it, as on a new turn: assistant reply + user text appended), and
    every message of ``previous`` but the newest in any case."""
    cut = min(earliest_message_breakpoint(current) + 1, len(previous["messages"]))
    kept = len(previous["messages"]) - 1
    return (prefix_digest(current, cut) == prefix_digest(previous, cut)
            and prefix_digest(current, kept) == prefix_digest(previous, kept))


def main_requests(simulator) -> list:
    """Recorded conversation requests (the summariser's own requests excluded)."""
    return [r for r in simulator.state.requests
            if r.status == 200 and not r.body["messages"][0]["content"][0].get(
                "text", "").startswith("Summarise")]


def write_big_file(session: Session, lines: int = 60) -> None:
    text = "\n".join(f"line {n}: the quick brown fox jumps over the lazy dog {n * 7}"
                     for n in range(lines))
    (workspace_path(session) / "big.txt").write_text(text)


def test_prefix_identical_across_iterations_worker_restart_and_approval_resume(alice,
                                                                               simulator):
    """Nothing here compacts or prunes. Turn 1 runs 4 tool iterations; the worker restarts;
    turn 2 runs 4 more; turn 3 stops for an approval, the worker restarts again, and the
    approved turn resumes. Every consecutive pair of requests holds the discipline, and
    every request after the first reads the cache."""
    from approvals.models import ApprovalRequest
    from approvals.services import approval_decide

    simulator.state.script = Script(tool_loop_policy)
    session = session_create(user=alice)
    write_big_file(session)
    turn_start(session=session, user=alice, text="read things please")
    run(session.pk)
    restart_worker()
    turn_start(session=session, user=alice, text="read them again")
    run(session.pk)
    turn_start(session=session, user=alice, text="clean the build directory")
    run(session.pk)
    turn = Turn.objects.get(session=session, input_text__startswith="clean")
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    restart_worker()
    approval = ApprovalRequest.objects.get(turn=turn)
    approval_decide(user=alice, approval_id=approval.pk, choice="once")
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    assert not RunEvent.objects.filter(session=session, type__in=("compaction", "prune"))

    requests = main_requests(simulator)
    assert len(requests) == 3 * (ITERATIONS + 1)  # the approved command counts as one step
    bodies = [r.body for r in requests]
    assert all(holds(a, b) for a, b in zip(bodies, bodies[1:]))
    assert all(r.usage["cache_read_input_tokens"] > 0 for r in requests[1:])
    assert requests[0].usage["cache_creation_input_tokens"] > 0
    # The stable/volatile split of the system prompt survived both restarts.
    assert {len(b["system"]) for b in bodies} == {2}
    assert all(sum("cache_control" in b for b in body["system"]) == 2 for body in bodies)


def test_compaction_is_the_one_place_the_prefix_changes(alice, simulator, settings):
    """This test COMPACTS on purpose: a small window makes the threshold fire mid-session.
    Every pair of consecutive requests holds the discipline except the one that straddles
    the compaction, and that pair is exactly where the compaction event was committed."""
    # 9000 + ~800 for the four issue-13 tool schemas (memory, todo, clarify, execute_code)
    # every request carries: the same room above the floor as before they existed.
    settings.HERMES = {**settings.HERMES, "CONTEXT_WINDOW": 9800}
    simulator.state.script = Script(tool_loop_policy)
    session = session_create(user=alice)
    write_big_file(session, lines=120)
    for n in range(4):
        turn_start(session=session, user=alice, text=f"read things please, round {n}")
        run(session.pk)
        if n == 1:
            restart_worker()
    compactions = list(RunEvent.objects.filter(session=session, type="compaction"))
    assert len(compactions) >= 1
    assert simulator.state.requests and all(r.status == 200 for r in simulator.state.requests)
    summaries = [i for i, r in enumerate(simulator.state.requests)
                 if r.body["messages"][0]["content"][0].get("text", "").startswith("Summarise")]
    assert len(summaries) == len(compactions)
    everything = simulator.state.requests
    broken = []
    requests = main_requests(simulator)
    for a, b in zip(requests, requests[1:]):
        if not holds(a.body, b.body):
            broken.append(everything.index(b))
    # Each break is the first conversation request after a summariser call, and each
    # summariser call is followed by a break.
    after_summary = [next(i for i in range(s + 1, len(everything))
                          if everything[i] in requests) for s in summaries
                     if any(everything[i] in requests for i in range(s + 1, len(everything)))]
    assert broken == after_summary and broken


def test_soul_edit_between_restarts_sends_the_stored_prompt_with_one_breakpoint(alice,
                                                                                  simulator,
                                                                                  settings):
    """SOUL.md changes while no worker holds the session: recovery cannot prove the stable
    boundary, so the stored prompt goes out byte-exact as ONE system block with one marker;
    the database row is never rewritten; the message prefix is still reproduced."""
    home = settings.HERMES["HOME"]
    home.mkdir(parents=True, exist_ok=True)
    (home / "SOUL.md").write_text("You are Hermes, the original soul.")
    simulator.state.script = Script(tool_loop_policy)
    session = session_create(user=alice)
    write_big_file(session)
    turn_start(session=session, user=alice, text="read things please")
    run(session.pk)
    stored = Session.objects.get(pk=session.pk).system_prompt
    assert stored.startswith("You are Hermes, the original soul.")
    before = len(simulator.state.requests)
    restart_worker()
    (home / "SOUL.md").write_text("You are Hermes, an edited soul of another length.")
    turn_start(session=session, user=alice, text="read them again")
    run(session.pk)
    assert Session.objects.get(pk=session.pk).system_prompt == stored
    old, new = simulator.state.requests[before - 1].body, simulator.state.requests[before].body
    assert "".join(b["text"] for b in old["system"]) == stored and len(old["system"]) == 2
    for request in simulator.state.requests[before:]:
        system = request.body["system"]
        assert [b["text"] for b in system] == [stored]
        assert system[0]["cache_control"] == {"type": "ephemeral"}  # 5m: the default TTL
    n = len(old["messages"])
    assert _strip(new["messages"][:n]) == _strip(old["messages"])
    bodies = [r.body for r in simulator.state.requests[before:]]
    assert all(holds(a, b) for a, b in zip(bodies, bodies[1:]))


def test_skill_invocation_sent_content_replayed_exactly_across_a_restart(alice, simulator,
                                                                         settings):
    """Sidecar bytes: `/deploy v2` is shown as typed but sent as scaffold + arguments; every
    later request (after a worker restart that empties the prefix registry too) sends those
    exact bytes as the same two blocks [scaffold, tail]."""
    skill_dir = settings.HERMES["HOME"] / "skills" / "deploy"
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Ship the app\n---\n"
        + "Check the release notes, then run the deploy script.\n" * 30)
    simulator.state.script = Script(tool_loop_policy)
    session = session_create(user=alice)
    write_big_file(session)
    turn_start(session=session, user=alice, text="/deploy v2")
    run(session.pk)
    row = Message.objects.filter(session=session, role="user").first()
    assert row.content == "/deploy v2" and row.sent_content.endswith("Arguments: v2")
    assert 0 < row.stable_prefix_chars < len(row.sent_content)
    restart_worker()
    turn_start(session=session, user=alice, text="read them again")
    run(session.pk)
    scaffold, tail = (row.sent_content[:row.stable_prefix_chars],
                      row.sent_content[row.stable_prefix_chars:])
    requests = main_requests(simulator)
    assert len(requests) == 2 * (ITERATIONS + 1)
    for request in requests:
        first = request.body["messages"][0]["content"]
        assert [b["text"] for b in first] == [scaffold, tail]
    assert "cache_control" in requests[0].body["messages"][0]["content"][0]
    assert not any("cache_control" in b for b in requests[-1].body["messages"][0]["content"])
    bodies = [r.body for r in requests]
    assert all(holds(a, b) for a, b in zip(bodies, bodies[1:]))
    assert re.search(r"Arguments: v2$", "".join(b["text"] for b in
                                                requests[-1].body["messages"][0]["content"]))
