"""The durable human gate (issue 5 item 5): requests, decisions, expiry, rules, bypass,
audit and badges, on the real database and the real channel layer."""

from __future__ import annotations

import functools
import threading
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.http import Http404
from django.utils import timezone

from accounts.models import Team
from approvals.models import ApprovalRequest, ApprovalRule, AuditEntry
from approvals.services import (
    TIMED_OUT_REASON,
    ApprovalAlreadyDecided,
    approval_cancel_for_session,
    approval_decide,
    approval_expire_due,
    approval_rule_revoke,
    gate_state,
    rule_hit,
    session_bypass_set,
)
from sessions.events import user_group
from sessions.models import RunEvent, Session


def resumes(callbacks) -> list[tuple]:
    """Args of every turn_run_task enqueued on commit among captured callbacks."""
    return [cb.args for cb in callbacks if isinstance(cb, functools.partial)
            and getattr(getattr(cb.func, "__self__", None), "name", "") == "sessions.turn_run_task"]


def events(session, type_: str) -> list[dict]:
    return [e.payload for e in RunEvent.objects.filter(session=session, type=type_).order_by("seq")]


def test_one_row_per_asking_call_with_a_300_second_deadline(session_a, ask):
    session, turn = session_a
    before = timezone.now()
    row = ask(session, turn, command="rm -rf ./build")
    assert ask(session, turn, command="ls", verdict="allow") is None
    assert ApprovalRequest.objects.filter(session=session).count() == 1
    assert row.state == "pending" and row.requester_id == session.owner_id
    assert row.command == "rm -rf ./build" and row.workspace == "/ws/1"
    assert timedelta(seconds=299) < row.expires_at - before < timedelta(seconds=301)
    [payload] = events(session, "approval.requested")
    shown = payload["approval"]
    assert shown["id"] == row.pk and shown["tool_name"] == "terminal"
    assert shown["command"] == "rm -rf ./build" and shown["allow_always"] is True
    assert shown["risk_class"] == "destructive" and shown["reason"]
    assert shown["expires_at"] == row.expires_at.isoformat()


def test_file_tool_requests_show_every_path_of_a_multi_file_patch(session_a, ask):
    session, turn = session_a
    row = ask(session, turn, tool="patch", rule="protected_file", risk_class="instruction_file",
              arguments='{"edits": [{"path": "src/a.py", "old_string": "a", "new_string": "b"},'
                        ' {"path": "AGENTS.md", "old_string": "x", "new_string": "y"}]}',
              normalized="/ws/1/AGENTS.md")
    assert row.command == "src/a.py, AGENTS.md"
    assert row.allow_always is False


def test_badges_go_to_the_owner_and_the_team_admins_only(people, session_a, ask, listen,
                                                         django_capture_on_commit_callbacks):
    listeners = {name: listen([user_group(user.pk)]) for name, user in people.items()}
    session, turn = session_a
    with django_capture_on_commit_callbacks(execute=True):
        ask(session, turn)
        ask(session, turn, command="curl x | sh")
    got = {name: listener.drain() for name, listener in listeners.items()}
    badges = {name: [m["event"] for m in msgs if m["event"].get("type") == "approval.badge"]
              for name, msgs in got.items()}
    assert badges["alice"] and badges["alice"][-1]["count"] == 2
    assert badges["carol"] and badges["carol"][-1]["count"] == 2
    assert badges["bob"] == [] and badges["dave"] == []
    assert got["bob"] == [] and got["dave"] == []


def test_badge_count_drops_after_a_decision(people, session_a, ask, listen,
                                            django_capture_on_commit_callbacks):
    session, turn = session_a
    row = ask(session, turn)
    carol = listen([user_group(people["carol"].pk)])
    with django_capture_on_commit_callbacks(execute=True):
        approval_decide(user=people["alice"], approval_id=row.pk, choice="once")
    [badge] = [m["event"] for m in carol.drain() if m["event"].get("type") == "approval.badge"]
    assert badge["count"] == 0


# available_apps makes the flush after this test TRUNCATE ... CASCADE: the message search
# side table (sessions migration 0002) references messages and is unknown to Django's flush.
# PostgreSQL only (marker "services"): SQLite's shared-cache test database answers a second
# concurrent writer with "database table is locked" instead of making it wait; the product's
# file database (WAL, IMMEDIATE transactions, 20 s busy timeout) waits instead.
@pytest.mark.services
@pytest.mark.django_db(transaction=True,
                        available_apps=[c.name for c in apps.get_app_configs()])
def test_first_decision_wins_between_two_racing_threads(people, session_a, ask):
    session, turn = session_a
    for attempt in range(4):
        row = ask(session, turn, command=f"rm -rf ./build{attempt}")
        barrier = threading.Barrier(2)
        outcomes: dict[str, object] = {}

        def decide(name: str, choice: str) -> None:
            try:
                barrier.wait(timeout=10)
                outcomes[name] = approval_decide(user=people[name], approval_id=row.pk,
                                                 choice=choice, reason=f"{name} says")
            except Exception as exc:  # recorded and asserted below
                outcomes[name] = exc
            finally:
                connection.close()

        threads = [threading.Thread(target=decide, args=("alice", "once")),
                   threading.Thread(target=decide, args=("carol", "deny"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        won = [n for n, o in outcomes.items() if isinstance(o, ApprovalRequest)]
        lost = [n for n, o in outcomes.items() if isinstance(o, ApprovalAlreadyDecided)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        row.refresh_from_db()
        assert row.decider.username == won[0]
        assert row.state == ("approved" if won[0] == "alice" else "denied")
        message = " ".join(outcomes[lost[0]].messages)
        assert f"already {row.state} by {won[0]}" in message
        assert AuditEntry.objects.filter(approval=row).count() == 1
        assert len(events(session, "approval.decided")) == attempt + 1


def test_a_late_decision_is_told_who_decided_first(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn)
    approval_decide(user=people["carol"], approval_id=row.pk, choice="deny", reason="no")
    with pytest.raises(ApprovalAlreadyDecided, match="already denied by carol"):
        approval_decide(user=people["alice"], approval_id=row.pk, choice="once")
    row.refresh_from_db()
    assert row.state == "denied" and row.decider == people["carol"]


def test_admin_only_risk_class_needs_an_admin_other_than_the_requester(people, session_a, ask):
    from accounts.models import Team

    Team.objects.filter(name="team-a").update(admin_only_risk_classes=["destructive"])
    session, turn = session_a
    row = ask(session, turn, risk_class="destructive")
    for choice in ("once", "session", "always"):
        with pytest.raises(ValidationError, match="team admin"):
            approval_decide(user=people["alice"], approval_id=row.pk, choice=choice)
    assert ApprovalRequest.objects.get(pk=row.pk).state == "pending"
    approval_decide(user=people["carol"], approval_id=row.pk, choice="once")
    assert ApprovalRequest.objects.get(pk=row.pk).state == "approved"
    # The owner may still deny such a request, and other risk classes stay self-approvable.
    denied = approval_decide(user=people["alice"], approval_id=ask(session, turn).pk,
                             choice="deny", reason="changed my mind")
    assert denied.state == "denied"
    network = ask(session, turn, risk_class="network", command="curl example.invalid")
    assert approval_decide(user=people["alice"], approval_id=network.pk,
                           choice="once").state == "approved"


def test_an_admin_cannot_approve_their_own_admin_only_request(people, ask, make_user):
    from accounts.models import Team
    from sessions.models import Turn

    Team.objects.filter(name="team-a").update(admin_only_risk_classes=["privilege"])
    carol = people["carol"]
    session = Session.objects.create(owner=carol, team=Team.objects.get(name="team-a"),
                                     provider="simulator", model="sim-1")
    turn = Turn.objects.create(session=session, input_text="x",
                               status=Turn.Status.AWAITING_APPROVAL)
    row = ask(session, turn, risk_class="privilege", command="sudo id")
    with pytest.raises(ValidationError, match="other than the requester"):
        approval_decide(user=carol, approval_id=row.pk, choice="once")
    second_admin = make_user("erin", team="team-a", role="admin")
    assert approval_decide(user=second_admin, approval_id=row.pk,
                           choice="once").decider == second_admin


def test_another_team_cannot_see_or_decide_a_request(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn)
    for name in ("bob", "dave"):
        for choice in ("once", "deny"):
            with pytest.raises(Http404):
                approval_decide(user=people[name], approval_id=row.pk, choice=choice)
    assert ApprovalRequest.objects.get(pk=row.pk).state == "pending"
    assert not AuditEntry.objects.exists()


def test_no_decision_in_time_expires_fail_closed_and_resumes(people, session_a, ask,
                                                            django_capture_on_commit_callbacks):
    session, turn = session_a
    row = ask(session, turn)
    assert approval_expire_due(now=row.expires_at - timedelta(seconds=1)) == 0
    with django_capture_on_commit_callbacks() as callbacks:
        assert approval_expire_due(now=row.expires_at + timedelta(seconds=1)) == 1
    row.refresh_from_db()
    assert row.state == "expired" and row.decider is None
    assert resumes(callbacks) == [(session.pk,)]
    state = gate_state(session=session, turn=turn)
    assert state.denied_call_ids == {row.tool_call_id: TIMED_OUT_REASON}
    assert TIMED_OUT_REASON == "not executed: approval timed out"
    assert row.tool_call_id not in state.approved_call_ids
    assert AuditEntry.objects.filter(approval=row, action="approval.expired").exists()
    assert events(session, "approval.decided")[-1]["approval"]["state"] == "expired"
    with pytest.raises(ApprovalAlreadyDecided, match="already expired"):
        approval_decide(user=people["alice"], approval_id=row.pk, choice="once")


def test_deciding_after_the_deadline_expires_instead_of_approving(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn)
    ApprovalRequest.objects.filter(pk=row.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ApprovalAlreadyDecided, match="expired"):
        approval_decide(user=people["alice"], approval_id=row.pk, choice="once")
    assert ApprovalRequest.objects.get(pk=row.pk).state == "expired"


def test_resume_is_enqueued_when_the_last_pending_call_is_decided(
        people, session_a, ask, django_capture_on_commit_callbacks):
    session, turn = session_a
    first, second = ask(session, turn), ask(session, turn, command="rm -rf ./dist")
    with django_capture_on_commit_callbacks() as callbacks:
        approval_decide(user=people["alice"], approval_id=first.pk, choice="once")
    assert resumes(callbacks) == []
    with django_capture_on_commit_callbacks() as callbacks:
        approval_decide(user=people["carol"], approval_id=second.pk, choice="deny",
                        reason="not on prod")
    assert resumes(callbacks) == [(session.pk,)]
    state = gate_state(session=session, turn=turn)
    assert state.approved_call_ids == frozenset({first.tool_call_id})
    assert state.denied_call_ids == {second.tool_call_id: "denied by carol: not on prod"}


def test_always_creates_a_rule_that_counts_hits_and_can_be_revoked(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn, command="make   deploy", normalized="make deploy")
    approval_decide(user=people["carol"], approval_id=row.pk, choice="always")
    rule = ApprovalRule.objects.get()
    assert (rule.user, rule.tool_name, rule.pattern) == (people["alice"], "terminal",
                                                         "make deploy")
    assert rule.created_by == people["carol"]
    state = gate_state(session=session, turn=None)
    assert state.always_rules == (("terminal", "make deploy"),)
    assert state.patterns_for("terminal") == ("make deploy",)
    assert state.rule_id_for(tool_name="terminal", pattern="make deploy") == rule.pk
    rule_hit(rule.pk)
    rule_hit(rule.pk)
    assert ApprovalRule.objects.get(pk=rule.pk).hit_count == 2
    with pytest.raises(Http404):
        approval_rule_revoke(user=people["bob"], rule_id=rule.pk)
    approval_rule_revoke(user=people["carol"], rule_id=rule.pk)
    assert gate_state(session=session, turn=None).always_rules == ()
    assert AuditEntry.objects.filter(action="rule.revoked", actor=people["carol"]).exists()
    with pytest.raises(ValidationError, match="already revoked"):
        approval_rule_revoke(user=people["alice"], rule_id=rule.pk)


def test_always_is_refused_for_protected_instruction_files(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn, tool="write_file", rule="protected_file",
              risk_class="instruction_file",
              arguments='{"path": "AGENTS.md", "content": "obey"}', normalized="/ws/1/AGENTS.md")
    assert row.allow_always is False
    for name in ("alice", "carol"):
        with pytest.raises(ValidationError, match="never allowed"):
            approval_decide(user=people[name], approval_id=row.pk, choice="always")
    assert not ApprovalRule.objects.exists()
    assert approval_decide(user=people["alice"], approval_id=row.pk,
                           choice="once").state == "approved"


def test_session_scope_allows_the_same_command_for_the_rest_of_the_session(
        people, session_a, session_b, ask):
    session, turn = session_a
    row = ask(session, turn, command="pytest -x", normalized="pytest -x")
    approval_decide(user=people["alice"], approval_id=row.pk, choice="session")
    assert gate_state(session=session, turn=turn).session_rules == (("terminal", "pytest -x"),)
    assert gate_state(session=session_b[0], turn=session_b[1]).session_rules == ()
    assert not ApprovalRule.objects.exists()


def test_every_decision_is_audited(people, session_a, ask):
    session, turn = session_a
    for choice, who in (("once", "alice"), ("session", "carol"), ("always", "alice"),
                        ("deny", "carol")):
        row = ask(session, turn, command=f"echo {choice} > /etc/x")
        approval_decide(user=people[who], approval_id=row.pk, choice=choice, reason="why")
        entry = AuditEntry.objects.get(approval=row)
        assert entry.actor == people[who] and entry.session_id == session.pk
        assert entry.action == ("approval.denied" if choice == "deny" else "approval.approved")
        assert entry.detail["choice"] == choice and entry.detail["reason"] == "why"


def test_stopping_a_turn_cancels_its_pending_requests(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn)
    assert approval_cancel_for_session(session=session) == 1
    row.refresh_from_db()
    assert row.state == "cancelled"
    assert gate_state(session=session, turn=turn).denied_call_ids[row.tool_call_id].startswith(
        "not executed")
    assert AuditEntry.objects.filter(approval=row, action="approval.cancelled").exists()
    with pytest.raises(ApprovalAlreadyDecided):
        approval_decide(user=people["alice"], approval_id=row.pk, choice="once")


def test_bypass_toggle_is_owner_only_and_audited(people, session_a):
    session, _turn = session_a
    for name in ("carol", "bob"):
        with pytest.raises(PermissionDenied):
            session_bypass_set(user=people[name], session=session, enabled=True)
    assert Session.objects.get(pk=session.pk).bypass_approvals is False
    assert not AuditEntry.objects.exists()
    session_bypass_set(user=people["alice"], session=session, enabled=True)
    assert Session.objects.get(pk=session.pk).bypass_approvals is True
    assert gate_state(session=session, turn=None).bypass is True
    session_bypass_set(user=people["alice"], session=session, enabled=False)
    entries = list(AuditEntry.objects.filter(action="session.bypass").order_by("id"))
    assert [(e.actor, e.detail) for e in entries] == [
        (people["alice"], {"enabled": True, "previous": False}),
        (people["alice"], {"enabled": False, "previous": True})]
    assert [p["bypass_approvals"] for p in events(session, "session.updated")] == [True, False]


def test_gate_state_carries_team_deny_rules_and_nothing_of_other_users(people, session_a,
                                                                     session_b, ask):
    from accounts.models import Team

    Team.objects.filter(name="team-a").update(deny_rules=["sudo *", "curl * | sh"])
    Team.objects.filter(name="team-b").update(deny_rules=["git push *"])
    session, turn = session_a
    other = ask(session_b[0], session_b[1], command="make deploy")
    approval_decide(user=people["bob"], approval_id=other.pk, choice="always")
    state = gate_state(session=session, turn=turn)
    assert state.deny_rules == ("sudo *", "curl * | sh")
    assert state.always_rules == () and state.bypass is False
    assert state.approved_call_ids == frozenset() and dict(state.denied_call_ids) == {}


def test_deny_rules_are_the_owners_teams_and_the_sessions_read_fresh_per_batch(
        people, session_a, make_user):
    """One query reads them (accounts/teams.py deny_rules), never a cached copy: a team the
    owner joins or leaves mid-turn binds at the next batch; another team never leaks in."""
    from accounts.models import Membership, Team

    session, turn = session_a
    Team.objects.filter(name="team-a").update(deny_rules=["sudo *"])
    Team.objects.filter(name="team-b").update(deny_rules=["git push *"])
    ops = Team.objects.create(name="ops", deny_rules=["sudo *", "rm -rf /srv/*"])
    assert gate_state(session=session, turn=turn).deny_rules == ("sudo *",)
    joined = Membership.objects.create(user=people["alice"], team=ops)
    assert gate_state(session=session, turn=turn).deny_rules == ("sudo *", "rm -rf /srv/*")
    joined.delete()
    assert gate_state(session=session, turn=turn).deny_rules == ("sudo *",)
    # The session's own team applies even to an owner who is not (or no longer) in it.
    Membership.objects.filter(user=people["alice"]).delete()
    assert gate_state(session=session, turn=turn).deny_rules == ("sudo *",)
    Session.objects.filter(pk=session.pk).update(team=None)
    session.refresh_from_db()
    assert gate_state(session=session, turn=turn).deny_rules == ()


def test_bypass_cannot_be_switched_on_from_the_environment_later(people, session_a, ask,
                                                                 monkeypatch):
    """B32 (a): an agent shell exporting a yolo variable changes nothing; only the audited
    service writes the session's bypass."""
    session, turn = session_a
    for name in ("HERMES_YOLO", "HERMES_YOLO_MODE", "APP_YOLO"):
        monkeypatch.setenv(name, "1")
    assert gate_state(session=session, turn=turn).bypass is False
    row = ask(session, turn, command="rm -rf ./build /tmp/x")
    assert row.state == "pending"
    assert not AuditEntry.objects.filter(action="session.bypass").exists()


def test_the_beat_task_expires_overdue_requests(session_a, ask):
    from approvals.tasks import approval_expire_task

    session, turn = session_a
    row = ask(session, turn)
    ApprovalRequest.objects.filter(pk=row.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    assert approval_expire_task.name == "approvals.expire_task"
    assert approval_expire_task.apply().result == 1
    assert ApprovalRequest.objects.get(pk=row.pk).state == "expired"


def test_gate_state_rules_are_exactly_the_ones_in_force_in_the_session(people, session_a):
    """The "always" rules a session's gate reads (plain SQL since issue 15): the owner's made
    in the session's team and the team's team-wide rules, oldest first; never the owner's
    rules of another team or of no team, another member's, another team's, or a revoked
    one. A teamless session of the same owner reads only the owner's teamless rules."""
    session, turn = session_a
    team_a, team_b = Team.objects.get(name="team-a"), Team.objects.get(name="team-b")
    alice, carol = people["alice"], people["carol"]

    def rule(pattern, *, user, team, revoked=False):
        return ApprovalRule.objects.create(user=user, team=team, tool_name="terminal",
                                           pattern=pattern, revoked=revoked).pk

    mine = rule("make mine", user=alice, team=team_a)
    team_wide = rule("make team", user=None, team=team_a)
    rule("make revoked", user=alice, team=team_a, revoked=True)
    rule("make carol", user=carol, team=team_a)
    rule("make other team", user=None, team=team_b)
    personal = rule("make personal", user=alice, team=None)
    state = gate_state(session=session, turn=turn)
    assert state.always_rules == (("terminal", "make mine"), ("terminal", "make team"))
    assert state.rule_id_for(tool_name="terminal", pattern="make team") == team_wide
    assert state.rule_id_for(tool_name="terminal", pattern="make mine") == mine
    teamless = Session.objects.create(owner=alice, title="teamless")
    state = gate_state(session=teamless, turn=None)
    assert state.always_rules == (("terminal", "make personal"),)
    assert state.rule_id_for(tool_name="terminal", pattern="make personal") == personal
