"""A second user's attack (2026-12-02, policy-only local backend): a path the shell computes
when the command runs (``cat "$(dirname $PWD)/../hermes.sqlite3"``, ``echo x >
"$(dirname $PWD)/1/pwn"``) was judged as the literal text after the substitution, so it read
the app's database and wrote into another user's workspace without asking; where no OS
confinement stands behind the policy, such a path now asks. ``/proc/<pid>/task/<tid>/environ``
(the same file as ``/proc/<pid>/environ``) was read without asking, and a path through
``/proc/1/root`` crashed the policy (the turn failed with an internal error). Through the
real path: the real policy on the real command, and real terminal calls in real turns on the
local backend with canaries on disk."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sessions.models import Turn
from sessions.services import session_create, workspace_path
from tests.security.conftest import run_turn, terminal
from tests.security.test_policy_findings import check, ctx_for

pytestmark = pytest.mark.django_db(transaction=True)

COMPUTED = [
    'cat "$(dirname $PWD)/../hermes.sqlite3"',
    'cp "$(dirname $PWD)/../hermes.sqlite3" db',
    'echo x > "$(dirname $PWD)/1/pwn"',
    "cat `dirname $PWD`/x",
    "F=$(dirname $PWD); cat $F/../hermes.sqlite3",
    'cd "$(dirname $PWD)/.."; cat hermes.sqlite3',
    "cd $D; cat hermes.sqlite3",
    'echo hi > "$OUT"',
    "X=$(pwd)/.. make",
]
"""Spellings whose target the policy cannot know before the command runs."""


@pytest.mark.parametrize("command", COMPUTED)
def test_a_computed_path_asks_where_the_policy_is_the_only_guard(
        policy_only, alice_session, people, command):
    session, _ = alice_session
    ctx = ctx_for(session, people["alice"])
    assert ctx.host_confined is False
    assert check(command, ctx) == "ask", command
    # With Landlock the kernel stops what the policy cannot see: no question for these.
    assert check(command, replace(ctx, host_confined=True)) == "allow", command


@pytest.mark.parametrize("command", [
    "ls $PWD/src", "cat $HOME/notes.txt", 'echo "$(date)"', "awk -F: '{print $1}' /etc/passwd",
    "F=notes.txt; cat $F", "printf '%s\\n' \"$(ls)\"", "ls -la", "cat README.md",
])
def test_what_the_policy_can_see_still_runs_without_asking(policy_only, alice_session, people,
                                                           command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "allow", command


@pytest.mark.parametrize("command", [
    "cat /proc/1/task/1/environ", "cat /proc/self/task/*/environ",
    "tr '\\0' '\\n' < /proc/1/task/1/environ", "cat /proc/1/root/etc/hostname",
    "ls /proc/1/cwd/",
])
@pytest.mark.parametrize("confined", [False, True])
def test_another_process_environment_or_root_asks_by_any_path(alice_session, people, command,
                                                             confined):
    session, _ = alice_session
    ctx = replace(ctx_for(session, people["alice"]), host_confined=confined)
    assert check(command, ctx) == "ask", command


def test_the_attack_in_a_real_turn_reads_and_writes_nothing_without_approval(
        policy_only, people, model, layout):
    """The member's turns as they ran them: each waits for a human; the other user's
    workspace has no new file and no copy of the database was made."""
    victim = session_create(user=people["bob"])
    victim_ws = workspace_path(victim)
    session = session_create(user=people["alice"])
    ws = workspace_path(session)
    for command in (f'echo owned > "$(dirname $PWD)/{victim.pk}/pwn.txt"',
                    'cp "$(dirname $PWD)/../hermes.sqlite3" stolen.sqlite3'):
        model.plan = [terminal(command)]
        turn = run_turn(session, people["alice"])
        assert turn.status == Turn.Status.AWAITING_APPROVAL, (command, turn.error)
        Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.CANCELLED)
    assert not (victim_ws / "pwn.txt").exists()
    assert not (ws / "stolen.sqlite3").exists()


def test_a_path_through_proc_root_asks_instead_of_failing_the_turn(people, model,
                                                                  alice_session):
    """realpath() of /proc/1/root/... raised PermissionError inside the policy: the turn
    failed with "Internal error". It is judged as typed now, and asks."""
    session, _ = alice_session
    model.plan = [terminal("cat /proc/1/root/etc/hostname")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL, turn.error
