"""The approval gate end to end (issue 5 items 5 and 6): a real turn on the real database, the
provider simulator over HTTP, the real policy, dispatcher, runner and Celery task.

A model asks for ``rm -rf build`` (the policy asks: recursive_delete). The turn is saved as
awaiting approval and the task ends with nothing run; a human decision (once, deny with a
reason, always) or the expiry decides what the resumed turn does. Turns are driven with
``turn_run_task.apply`` exactly as the worker runs them; a decision's own enqueue goes to the
in-memory broker, where nothing consumes it, so each test runs the resume by hand.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from django.db import connections

from agents.identity import bind_identity, current_identity, submit_with_identity
from agents.messages import ToolCall
from agents.policy import PolicyContext, check_command, decide
from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec
from approvals.models import ApprovalRequest, ApprovalRule, AuditEntry
from approvals.services import (
    TIMED_OUT_REASON,
    ApprovalAlreadyDecided,
    approval_decide,
    gate_state,
)
from sessions import toolbox
from sessions.events import event_to_dict
from sessions.models import Message, RunEvent, Turn, UsageRecord
from sessions.rendering import event_frame
from sessions.runner import TurnContext
from sessions.services import session_create, turn_start, workspace_path
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)

DANGEROUS = "rm -rf build"


@pytest.fixture
def gate_settings(hermes_settings):
    """The local backend (so the policy asks; under the sandbox it would not), quick retries,
    no simulator of the embedded mode (the test's own serves)."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local",
                              "RETRY_BASE_DELAY": 0.01, "SIMULATOR_EMBEDDED": False,
                              "APPROVAL_TIMEOUT_SECONDS": 300}
    toolbox.backend_kind.cache_clear()
    yield hermes_settings
    toolbox.backend_kind.cache_clear()


@pytest.fixture
def people(make_user, gate_settings):
    made = {"alice": make_user("alice", team="red"),
            "carol": make_user("carol", team="red", role="admin"),
            "bob": make_user("bob", team="blue")}
    # These tests exercise the owner approving their own requests: opt the teams out of the
    # default (destructive classes need another admin), which tests/security covers.
    from accounts.models import Team

    Team.objects.update(admin_only_risk_classes=[])
    return made


def model(request: ScriptRequest) -> Reply:
    """The simulated model: asked to clean, it runs ``rm -rf build``; given tool results it
    repeats them (so a test sees exactly what the model received); else it echoes."""
    if request.tool_results:
        return Reply(text="Tool said: " + " | ".join(x.result for x in request.tool_results))
    if "clean" in request.last_user_text:
        return Reply(text="Cleaning the build directory.",
                     tool_calls=(ToolCallSpec(name="terminal", input={"command": DANGEROUS}),))
    return Reply(text=f"echo: {request.last_user_text}")


@pytest.fixture
def scripted(simulator):
    simulator.state.script = Script(model)
    return simulator


def build_dir(session):
    """A workspace with build/keep.txt in it: the thing ``rm -rf build`` would delete."""
    target = workspace_path(session) / "build"
    target.mkdir(exist_ok=True)
    (target / "keep.txt").write_text("artefact")
    return target


def run(session_id: int) -> None:
    turn_run_task.apply(args=[session_id])


def types(session) -> list[str]:
    return list(RunEvent.objects.filter(session=session).order_by("seq")
                .values_list("type", flat=True))


def tool_rows(session) -> list[Message]:
    return list(Message.objects.filter(session=session, role="tool").order_by("id"))


def final_text(session) -> str:
    return Message.objects.filter(session=session, role="assistant").order_by("-id")[0].content


def awaiting(session, people) -> tuple[Turn, ApprovalRequest]:
    """Send "clean", run the task; check the turn stopped at the gate with nothing run."""
    turn = turn_start(session=session, user=people["alice"], text="please clean the build")
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.state == ApprovalRequest.State.PENDING
    assert approval.turn_id == turn.pk and approval.requester == people["alice"]
    assert approval.command == DANGEROUS and approval.tool_name == "terminal"
    assert approval.rule == "recursive_delete" and approval.risk_class == "destructive"
    assert tool_rows(session) == []
    return turn, approval


def test_ask_stops_the_turn_with_nothing_run_and_approve_once_resumes(people, scripted):
    session = session_create(user=people["alice"])
    build = build_dir(session)
    turn, approval = awaiting(session, people)
    assert build.exists()
    seen = types(session)
    assert seen[-2:] == ["approval.requested", "turn.awaiting_approval"]
    assert "tool.result" not in seen and "turn.finished" not in seen
    requested = RunEvent.objects.get(session=session, type="approval.requested").payload
    assert requested["approval"]["id"] == approval.pk
    assert requested["approval"]["state"] == "pending"

    # A second task while nobody has decided runs nothing (no worker waits on a person).
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_APPROVAL and build.exists()

    decided = approval_decide(user=people["carol"], approval_id=approval.pk, choice="once")
    assert decided.state == "approved" and decided.scope == "once"
    assert decided.decider == people["carol"]
    assert AuditEntry.objects.filter(approval=approval, action="approval.approved").exists()
    with pytest.raises(ApprovalAlreadyDecided):
        approval_decide(user=people["alice"], approval_id=approval.pk, choice="deny")
    run(session.pk)

    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    assert not build.exists()
    (result,) = tool_rows(session)
    assert "[exit code 0]" in result.content
    assert final_text(session) == f"Tool said: {result.content}"
    roles = list(Message.objects.filter(session=session).order_by("id")
                 .values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool", "assistant"]
    after = types(session)
    assert after.index("approval.decided") < after.index("tool.result")
    assert after[-1] == "turn.finished"


def test_deny_with_a_reason_reaches_the_model_and_runs_nothing(people, scripted):
    session = session_create(user=people["alice"])
    build = build_dir(session)
    turn, approval = awaiting(session, people)
    approval_decide(user=people["alice"], approval_id=approval.pk, choice="deny",
                    reason="keep the build, I still need it")
    run(session.pk)

    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    assert (build / "keep.txt").read_text() == "artefact"
    (result,) = tool_rows(session)
    assert result.content == "not executed: denied by alice: keep the build, I still need it"
    assert result.is_error
    assert "keep the build, I still need it" in final_text(session)
    last = scripted.state.requests[-1]
    sent = ScriptRequest.from_body(last.endpoint, last.body)
    assert [x.result for x in sent.tool_results] == [result.content]


def test_expiry_fails_closed_and_the_turn_goes_on(people, scripted, gate_settings):
    gate_settings.HERMES = {**gate_settings.HERMES, "APPROVAL_TIMEOUT_SECONDS": 1}
    session = session_create(user=people["alice"])
    build = build_dir(session)
    turn, approval = awaiting(session, people)
    time.sleep(1.2)
    # Nobody swept yet: a late approval finds the deadline passed, expires it, and is refused.
    with pytest.raises(ApprovalAlreadyDecided, match="expired"):
        approval_decide(user=people["carol"], approval_id=approval.pk, choice="once")
    approval.refresh_from_db()
    assert approval.state == "expired" and approval.decision_reason == TIMED_OUT_REASON
    assert AuditEntry.objects.filter(approval=approval, action="approval.expired").exists()
    run(session.pk)

    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    assert build.exists()
    (result,) = tool_rows(session)
    assert result.content == TIMED_OUT_REASON
    assert final_text(session) == f"Tool said: {TIMED_OUT_REASON}"


def test_the_task_itself_expires_an_overdue_request_before_resuming(people, scripted,
                                                                    gate_settings):
    gate_settings.HERMES = {**gate_settings.HERMES, "APPROVAL_TIMEOUT_SECONDS": 1}
    session = session_create(user=people["alice"])
    build = build_dir(session)
    turn, approval = awaiting(session, people)
    time.sleep(1.2)
    run(session.pk)  # no sweep, no decision: turn_next expires it (fail-closed) and resumes

    approval.refresh_from_db()
    turn.refresh_from_db()
    assert approval.state == "expired"
    assert turn.status == Turn.Status.COMPLETED and build.exists()
    assert tool_rows(session)[0].content == TIMED_OUT_REASON


def test_always_lets_the_next_identical_command_through_and_counts_the_hit(people, scripted):
    session = session_create(user=people["alice"])
    build = build_dir(session)
    _, approval = awaiting(session, people)
    approval_decide(user=people["alice"], approval_id=approval.pk, choice="always")
    rule = ApprovalRule.objects.get()
    assert (rule.user, rule.tool_name, rule.pattern) == (people["alice"], "terminal",
                                                         approval.normalized)
    run(session.pk)
    assert not build.exists()
    rule.refresh_from_db()
    assert rule.hit_count == 0  # this call passed on the human's decision, not the rule

    build_dir(session)
    second = turn_start(session=session, user=people["alice"], text="clean the build again")
    run(session.pk)
    second.refresh_from_db()
    assert second.status == Turn.Status.COMPLETED
    assert not build.exists()
    assert ApprovalRequest.objects.filter(session=session).count() == 1
    rule.refresh_from_db()
    assert rule.hit_count == 1

    # In another session of the same user the rule holds too; revoked, it asks again.
    other = session_create(user=people["alice"])
    build_dir(other)
    turn_start(session=other, user=people["alice"], text="clean please")
    run(other.pk)
    rule.refresh_from_db()
    assert rule.hit_count == 2
    assert not (workspace_path(other) / "build").exists()
    ApprovalRule.objects.filter(pk=rule.pk).update(revoked=True)
    build_dir(other)
    turn_start(session=other, user=people["alice"], text="clean once more")
    run(other.pk)
    assert Turn.objects.filter(session=other).order_by("-id")[0].status == "awaiting_approval"


def test_a_message_sent_while_awaiting_runs_only_after_the_decision(people, scripted):
    session = session_create(user=people["alice"])
    build_dir(session)
    first, approval = awaiting(session, people)
    second = turn_start(session=session, user=people["alice"], text="and say hello")
    run(session.pk)
    second.refresh_from_db()
    assert second.status == Turn.Status.QUEUED
    assert not Message.objects.filter(session=session, content="and say hello").exists()

    approval_decide(user=people["alice"], approval_id=approval.pk, choice="once")
    run(session.pk)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == ("completed", "completed")
    transcript = list(Message.objects.filter(session=session).order_by("id")
                      .values_list("role", "content"))
    assert [role for role, _ in transcript] == ["user", "assistant", "tool", "assistant",
                                                "user", "assistant"]
    assert transcript[4:] == [("user", "and say hello"), ("assistant", "echo: and say hello")]


@pytest.mark.services
def test_two_sessions_interleaved_in_one_pool_keep_their_identities(people, simulator):
    """Both turns are inside the model call at the same time (a barrier in the simulated
    model), on two threads of one pool; each runs ``pwd`` (allowed) and asks for the
    dangerous command. A leaked identity would deny (identity_mismatch) or file the request
    under the wrong session or user. Marked ``services``: two writers at once need a real
    server database (SQLite's shared-cache test database refuses concurrent writers)."""
    met = threading.Barrier(2, timeout=20)
    overlapped: list[bool] = []

    def interleaved(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="Tool said: " + " | ".join(x.result for x in request.tool_results))
        try:
            met.wait()
            overlapped.append(True)
        except threading.BrokenBarrierError:
            overlapped.append(False)
        return Reply(text="Checking.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": "pwd"}),
            ToolCallSpec(name="terminal", input={"command": DANGEROUS})))

    simulator.state.script = Script(interleaved)
    alice, bob = people["alice"], people["bob"]
    sessions = [session_create(user=alice), session_create(user=bob)]
    for session, user in zip(sessions, (alice, bob)):
        build_dir(session)
        turn_start(session=session, user=user, text="check where you are")

    def work(session_id: int) -> None:
        try:
            run(session_id)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(work, [s.pk for s in sessions]))

    assert overlapped == [True, True]
    for session, user in zip(sessions, (alice, bob)):
        (pwd,) = tool_rows(session)
        assert pwd.content.splitlines()[0] == str(workspace_path(session).resolve())
        approval = ApprovalRequest.objects.get(session=session)
        assert approval.requester == user and approval.command == DANGEROUS
        assert Turn.objects.get(session=session).status == Turn.Status.AWAITING_APPROVAL
        assert (workspace_path(session) / "build").exists()


def test_a_gate_without_identity_or_with_another_identity_denies(people, scripted):
    alice, bob = people["alice"], people["bob"]
    mine, theirs = session_create(user=alice), session_create(user=bob)
    turn = Turn.objects.create(session=mine, input_text="x")
    ctx = TurnContext(session=mine, turn=turn, owner="test")
    gate = toolbox.policy_gate(ctx, gate_state(session=mine, turn=turn))
    pwd = ToolCall(id="c1", name="terminal", arguments='{"command": "pwd"}')
    dangerous = ToolCall(id="c2", name="terminal", arguments='{"command": "rm -rf build"}')

    assert current_identity() is None
    assert gate(pwd).verdict == "deny" and gate(pwd).rule == "missing_identity"
    with bind_identity(session_id=str(mine.pk), user_id=str(alice.pk)):
        assert gate(pwd).verdict == "allow"
        assert gate(dangerous).verdict == "ask"
        # A bare executor submit does not carry the context: the worker has no identity.
        with ThreadPoolExecutor(max_workers=1) as pool:
            bare = pool.submit(gate, dangerous).result()
            carried = submit_with_identity(pool, gate, dangerous).result()
        assert (bare.verdict, bare.rule) == ("deny", "missing_identity")
        assert carried.verdict == "ask"
    with bind_identity(session_id=str(theirs.pk), user_id=str(bob.pk)):
        assert (gate(pwd).verdict, gate(pwd).rule) == ("deny", "identity_mismatch")
    # The policy function alone, with no identity anywhere: deny.
    bare_ctx = PolicyContext(session_id=None, user_id=None, workspace=str(ctx.workspace))
    assert decide(dangerous, bare_ctx).rule == "missing_identity"
    assert check_command(DANGEROUS, bare_ctx).verdict == "deny"


def test_a_turn_resumed_after_approval_shows_its_whole_cost_live_and_after_reload(
        people, scripted, login):
    """The turn ran in two pieces (the call that asked, then the resumed call after the
    decision): turn.finished's cost line counts both calls, as the reloaded page does. The
    live line used to count only the resumed piece's call."""
    session = session_create(user=people["alice"])
    build_dir(session)
    turn, approval = awaiting(session, people)
    # While the turn waits, a reload draws no cost line for it (nor does the live page): a
    # line drawn now sat above the reply that came after it, and stayed there.
    page = login(people["alice"]).get(f"/sessions/{session.pk}/").content.decode()
    assert f'id="usage-{turn.pk}"' not in page
    approval_decide(user=people["carol"], approval_id=approval.pk, choice="once")
    run(session.pk)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    records = list(UsageRecord.objects.filter(turn=turn))
    assert len(records) == 2  # one model call before the approval, one after
    finished = RunEvent.objects.get(session=session, type="turn.finished").payload["usage"]
    assert finished["calls"] == 2
    assert finished["output_tokens"] == sum(r.output_tokens for r in records)
    assert Decimal(finished["cost_usd"]) == sum(r.cost_usd for r in records)
    live = re.search(r'<p class="usage"[^>]*>.*?</p>', event_frame(event_to_dict(
        RunEvent.objects.get(session=session, type="turn.finished")))["html"], re.S).group(0)
    page = login(people["alice"]).get(f"/sessions/{session.pk}/").content.decode()
    assert re.search(rf'<p class="usage" id="usage-{turn.pk}">.*?</p>', page, re.S).group(0) \
        == live
    reply = Message.objects.filter(session=session, role="assistant").latest("id")
    # the line comes after the reply
    assert page.index(f'id="msg-{reply.pk}"') < page.index(f'id="usage-{turn.pk}"')
