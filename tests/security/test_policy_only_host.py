"""A second user's attack (2026-12-03) on the local backend with no OS confinement
(HERMES_LOCAL_CONFINEMENT=none): ``cat /proc/self/cwd/../../secret_key`` read the secret key,
``python3 -c "open('..'+'/2/x','w')"`` wrote into another user's workspace, ``sed '1e ...'``
(through /proc/self/cwd) and ``tar -xPf`` reached past the workspace, ``ps eww`` printed the worker's environment, all
without a question; and what did ask (``cat ../2/secret``) the attacker approved himself.

Now: a path through a process's cwd/root/descriptors asks under every mode; where the policy
is the only guard, code it cannot follow asks too; and every request a command raises there
carries the ``unconfined`` class, which no bypass skips and only a team admin other than the
requester may approve (nobody, in a session of no team). Through the real path: the real
policy on the real command, and real turns on the local backend with canaries on disk."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.core.exceptions import ValidationError

from accounts.models import Team
from approvals.models import ApprovalRequest
from approvals.services import approval_decide, approval_permissions
from sessions.models import Turn
from sessions.services import session_create, workspace_path
from sessions.tasks import turn_run_task
from tests.security.conftest import run_turn, terminal, tool_results
from tests.security.test_policy_findings import check, ctx_for

pytestmark = pytest.mark.django_db(transaction=True)

THROUGH_A_PROCESS = [
    "cat /proc/self/cwd/../../secret_key", "cat /proc/thread-self/cwd/../../secret_key",
    "cat /dev/fd/../cwd/../../secret_key", "cd /proc/self/cwd && cat ../../secret_key",
    "sqlite3 /proc/self/cwd/../../hermes.sqlite3 .dump", "cat /proc/1/fd/3",
    "ls /proc/self/root/etc", "ps eww -o args -p 1", "ps auxe",
    "sed -n '1e head -c 20 /proc/self/cwd/../..\\/hermes.sqlite3' README.md",
    "python3 -c \"open('/proc/self/cwd/../2/'+'planted.txt','w').write('owned')\"",
]
"""Spellings whose target only the running command can resolve: they ask in every mode."""

UNFOLLOWABLE = [
    "python3 -c \"import os; open(os.environ['T'], 'w').write('owned')\"",
    "python3 -c \"import os;d=os.getcwd();open(d[:d.find('-data')]+'/x.py','w')\"",
    "perl -e 'open F,\"<\",chr(47).\"etc\".chr(47).\"hostname\"; print <F>'",
    "tar -xPf evil.tar", "tar xPf evil.tar", "unzip -: evil.zip", "cpio -idv < evil.cpio",
    "awk 'BEGIN{system(\"id\")}'", "awk '{print > $2}' list.txt", "node -e 'require(\"fs\")'",
]
"""Code or archives whose reach the policy cannot read: they ask where it is the only guard
and run under Landlock, where the kernel holds the boundary (the attack showed it held)."""


@pytest.mark.parametrize("command", THROUGH_A_PROCESS)
@pytest.mark.parametrize("confined", [False, True])
def test_a_path_through_a_process_asks_in_every_mode(alice_session, people, command, confined):
    session, _ = alice_session
    ctx = replace(ctx_for(session, people["alice"]), host_confined=confined)
    assert check(command, ctx) == "ask", command


@pytest.mark.parametrize("command", UNFOLLOWABLE)
def test_code_the_policy_cannot_follow_asks_only_where_it_is_the_only_guard(
        policy_only, alice_session, people, command):
    session, _ = alice_session
    ctx = ctx_for(session, people["alice"])
    assert ctx.host_confined is False
    assert check(command, ctx) == "ask", command
    assert check(command, replace(ctx, host_confined=True)) == "allow", command


@pytest.mark.parametrize("command", [
    "python3 --version", "awk -F: '{print $1}' /etc/passwd", "sed -n 's/a/b/p' README.md",
    "tar -xf a.tar", "ps aux", "ps -ef", "echo hi > /dev/fd/2", "ls /proc/self/fd/",
    "cat /proc/cpuinfo",
])
def test_what_it_can_follow_still_runs_without_asking(policy_only, alice_session, people,
                                                      command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "allow", command


def test_every_request_is_unconfined_there_and_no_bypass_skips_it(policy_only, alice_session,
                                                                 people):
    from agents.policy import check_command

    session, _ = alice_session
    ctx = ctx_for(session, people["alice"])
    for command in ("sudo ls", "cat ../2/secret.txt", "python3 -c 'print(1)'"):
        d = check_command(command, replace(ctx, bypass=True))
        assert d.verdict == "ask" and "unconfined" in d.risk_classes, (command, d)
        assert "unconfined" not in check_command(
            command, replace(ctx, host_confined=True)).risk_classes


def test_the_attack_in_real_turns_reads_and_writes_nothing_and_cannot_be_self_approved(
        policy_only, people, model, layout, make_user):
    """The attacker's turns as he ran them, in a session of no team: each waits for a
    human, he cannot approve his own request, and the secret and the victim's workspace are
    untouched."""
    victim = session_create(user=people["alice"])
    victim_ws = workspace_path(victim)
    (victim_ws / "secret_a.txt").write_text("ALICE-PRIVATE")
    attacker = make_user("mallory")
    session = session_create(user=attacker)
    assert session.team_id is None
    for command in (f"cat /proc/self/cwd/../{victim.pk}/secret_a.txt",
                    "cat /proc/self/cwd/../../secret_key",
                    f"python3 -c \"open('/proc/self/cwd/../{victim.pk}/'+'planted.txt','w')"
                    ".write('owned')\"",
                    "ps eww -o args"):
        model.plan = [terminal(command)]
        turn = run_turn(session, attacker)
        assert turn.status == Turn.Status.AWAITING_APPROVAL, (command, turn.error)
        request = ApprovalRequest.objects.get(turn=turn)
        assert "unconfined" in request.risk_classes
        perms = approval_permissions(user=attacker, approval=request)
        assert not perms.can_approve and perms.can_deny and "no OS confinement" in perms.note
        for choice in ("once", "session", "always"):
            with pytest.raises(ValidationError):
                approval_decide(user=attacker, approval_id=request.pk, choice=choice)
        Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.CANCELLED)
    assert not (victim_ws / "planted.txt").exists()
    assert all("s3cret" not in m.content and "ALICE-PRIVATE" not in m.content
               for m in tool_results(session))


def test_in_a_team_only_another_admin_approves_and_then_it_runs(policy_only, people, model,
                                                                layout):
    """A team session: the requester (even a team admin) cannot approve; another admin of
    the team can, and the approved command runs."""
    red = Team.objects.get(name="red")
    session = session_create(user=people["carol"], team=red)
    model.plan = [terminal("python3 -c 'print(6*7)'")]
    turn = run_turn(session, people["carol"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL, turn.error
    request = ApprovalRequest.objects.get(turn=turn)
    assert not approval_permissions(user=people["carol"], approval=request).can_approve
    with pytest.raises(ValidationError):
        approval_decide(user=people["carol"], approval_id=request.pk, choice="once")
    other = people["alice"]
    red.memberships.filter(user=other).update(role="admin")
    assert approval_permissions(user=other, approval=request).can_approve
    approval_decide(user=other, approval_id=request.pk, choice="once")
    turn_run_task.apply(args=[session.pk])  # the resume the decision enqueued, as a worker
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert any("42" in m.content for m in tool_results(session))
