"""A second user's attack (2026-12-02): programs that run a command given in an option or in
their script text were judged as programs that run nothing, so ``sed -n '1e rm -rf x' f``
deleted without asking and ``sed -n '1e kill -0 -1 && …'`` ran the floor's "signal every
process"; ``env -S"cmd"`` (no space) hid its command; ``kill -STOP``, ``prlimit``,
``renice``, ``ip link set`` acted on host processes with no approval; and on the sandbox
backend ``rm -rf "$PWD"`` or ``ls | xargs rm -rf`` wiped the workspace that ``rm -rf .`` may
not. Through the real path: the real policy on the real command, and real terminal calls
in real turns on the local backend with a canary on disk."""

from __future__ import annotations

import pytest

from sessions.models import Session, Turn
from tests.security.conftest import run_turn, terminal
from tests.security.test_policy_findings import check, ctx_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("command", [
    "sed -n '1e kill -9 -1' README.md",
    "sed -n '1e kill -0 -1 && echo SIGNAL_ALL_OK' README.md",
    "script -qc 'kill -9 -1' /dev/null",
    "env -S\"kill -9 -1\"",
    "env --split-string='kill -9 -1'",
    "man -P 'kill -9 -1' ls",
    "rsync -e 'kill -9 -1' a host:b",
    "zip -TT 'kill -9 -1' a.zip f",
    "sqlite3 notes.db '.shell kill -9 -1'",
])
def test_the_floor_judges_a_command_hidden_in_an_option(alice_session, people, command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "deny", command


@pytest.mark.parametrize("command", [
    "sed -n '1e rm -rf vdir' README.md",
    "env -S\"rm -rf vdir\"",
    "env -iS'rm -rf vdir'",
    "script -qc 'rm -rf vdir' /dev/null",
    "man --pager='rm -rf vdir' ls",
    "rsync --rsh='rm -rf vdir' a host:b",
    "zip --unzip-command 'rm -rf vdir' a.zip f",
    "psql -c '\\! rm -rf vdir'",
    "sed 's/.*/rm -rf vdir/e' README.md",
    "sed e README.md",
    "python3 -m pdb -c '!import shutil; shutil.rmtree(\"vdir\")' x.py",
    "kill -STOP 1", "kill -TERM 1", "kill 12345", "prlimit --pid 1 --nofile=1:1",
    "renice 19 -p 1", "ip link set lo down", "hostname pwned", "date -s '2001-01-01'",
    "sysctl -w kernel.panic=1",
])
def test_a_hidden_or_host_acting_command_asks(alice_session, people, command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "ask", command


@pytest.mark.parametrize("command", [
    "sed -n '/error/p' log.txt", "sed -i 's/foo/bar/g' notes.txt", "sed -e 's/a/b/' -e '3d' f",
    "rsync -av src/ dst/", "man ls", "kill -l", "ip addr", "hostname", "date",
    "env FOO=1 ls", "zip -r out.zip src",
])
def test_ordinary_forms_still_run_without_asking(alice_session, people, command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "allow", command


def test_sed_e_in_a_real_turn_deletes_nothing_without_approval(alice_session, people, model):
    """The attack as a member ran it: the directory survives, the turn waits for a human."""
    session, ws = alice_session
    (ws / "vdir").mkdir()
    (ws / "vdir" / "canary").write_text("keep")
    (ws / "README.md").write_text("readme\n")
    model.plan = [terminal("sed -n '1e rm -rf vdir' README.md")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert (ws / "vdir" / "canary").read_text() == "keep"


@pytest.mark.parametrize("command", [
    'rm -rf "$PWD"', "rm -rf `pwd`", "rm -rf $(ls)", "ls | xargs rm -rf", "mv * /tmp/",
    "rm -rf ./*",
])
def test_a_workspace_wipe_with_a_computed_target_asks_on_the_sandbox_too(
        alice_session, people, command):
    session, _ = alice_session
    ctx = ctx_for(Session.objects.get(pk=session.pk), people["alice"])
    from dataclasses import replace

    sandboxed = replace(ctx, backend_isolated=True, backend_has_host_paths=False)
    assert check(command, sandboxed) == "ask", command
    assert check("rm -rf build", sandboxed) == "allow"  # a named directory: contained


def test_a_session_made_before_joining_a_team_is_bound_by_its_reservations(
        people, make_user, model):
    """A second user made a session while in no team, joined a team, and approved their own
    ``rm -rf`` there (the team reserves destructive classes for another admin), with the
    session bypass too. The owner's teams' reservations now bind a session of no team: the
    turn waits, the owner cannot approve it, the bypass does not cover it."""
    from django.core.exceptions import ValidationError

    from accounts.models import Membership, Team
    from approvals.models import ApprovalRequest
    from approvals.services import (approval_decide, approval_permissions,
                                    session_bypass_set)
    from sessions.services import session_create, workspace_path

    dave = make_user("dave")
    session = session_create(user=dave)
    assert session.team_id is None
    Membership.objects.create(user=dave, team=Team.objects.get(name="red"))
    ws = workspace_path(session)
    (ws / "d2").mkdir(parents=True)
    (ws / "d2" / "canary").write_text("keep")
    session_bypass_set(user=dave, session=session, enabled=True)
    model.plan = [terminal("rm -rf d2")]
    turn = run_turn(session, dave)
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    approval = ApprovalRequest.objects.get(session=session)
    permissions = approval_permissions(user=dave, approval=approval)
    assert not permissions.can_approve and "'red'" in permissions.note
    with pytest.raises(ValidationError):
        approval_decide(user=dave, approval_id=approval.pk, choice="once")
    assert (ws / "d2" / "canary").read_text() == "keep"
