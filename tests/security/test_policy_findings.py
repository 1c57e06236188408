"""Issue 8 findings 2 (policy side), 3, 6 and 7, and issue 16 B29, B32, B33, through the real
path: the real policy on the real command, and real terminal calls on the local backend in
real turns on the simulator, asserting the call asks or is denied and nothing ran.

Each test names the finding or case it reproduces. Canary files sit where the attack would
land (the app's database, another user's workspace, the app's code), so "nothing ran" is
checked on disk, not only on the decision.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404

from accounts.models import Team
from accounts.services import team_policy_set
from approvals.models import ApprovalRequest, ApprovalRule, AuditEntry
from approvals.services import approval_decide, approval_rule_revoke, session_bypass_set
from sessions import toolbox
from sessions.models import Session, Turn
from sessions.services import session_create, workspace_path
from tests.security.conftest import bypass_flag, run_turn, terminal, tool_results, write_file

pytestmark = pytest.mark.django_db(transaction=True)


def ctx_for(session, user):
    """The PolicyContext the runner builds for ``session`` (real settings, real paths)."""
    return toolbox.policy_context_for(user=user, session=session,
                                      workspace=workspace_path(session))


def check(command: str, ctx) -> str:
    from agents.policy import check_command

    return check_command(command, ctx).verdict


# --- finding 2 (policy side) and B32: the app's database, secret key, code, others' data --

@pytest.mark.parametrize("command", [
    "sqlite3 ../../hermes.sqlite3 'UPDATE sessions_session SET bypass_approvals=1'",
    "cd ../.. && sqlite3 hermes.sqlite3 'UPDATE sessions_session SET bypass_approvals=1'",
    "cd ..; cd ..; sqlite3 ./hermes.sqlite3 .dump",
    "python3 -c \"import sqlite3; sqlite3.connect('../../hermes.sqlite3')\" ; "
    "sqlite3 ../ws/../../hermes.sqlite3 .tables",
    "cat ../../secret_key",
    "cp ../../hermes.sqlite3 copy.db",
])
def test_finding_2_app_database_and_secret_key_are_denied_by_any_spelling(
        alice_session, people, command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "deny", command


def test_finding_2_b32_shell_cannot_write_the_app_database_in_a_real_turn(
        alice_session, people, model, layout):
    session, ws = alice_session
    model.plan = [terminal("sqlite3 ../../hermes.sqlite3 "
                           "'UPDATE sessions_session SET bypass_approvals=1'")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.COMPLETED
    (result,) = tool_results(session)
    assert result.is_error and result.content.startswith("not executed:")
    assert "hermes.sqlite3" in result.content
    assert bypass_flag(layout["db"]) == 0


def test_b33_a_symlink_to_the_database_is_judged_by_the_file_it_resolves_to(
        alice_session, people, model, layout):
    session, ws = alice_session
    ctx = ctx_for(session, people["alice"])
    # creating the link names the database too, and is denied ...
    assert check("ln -s ../../hermes.sqlite3 notes.db", ctx) == "deny"
    # ... so plant it as an earlier command could have; the path as typed is harmless
    os.symlink(layout["db"], ws / "notes.db")
    os.symlink(layout["data"], ws / "up")
    for command in ("sqlite3 notes.db 'UPDATE sessions_session SET bypass_approvals=1'",
                    "echo x >> notes.db", "sqlite3 up/hermes.sqlite3 .dump"):
        assert check(command, ctx) == "deny", command
    model.plan = [terminal("sqlite3 notes.db 'UPDATE sessions_session SET bypass_approvals=1'")]
    run_turn(session, people["alice"])
    (result,) = tool_results(session)
    assert result.content.startswith("not executed:")
    assert bypass_flag(layout["db"]) == 0


def test_b33_a_scratch_symlink_to_a_home_config_file_asks(alice_session, people, tmp_path):
    session, ws = alice_session
    ctx = ctx_for(session, people["alice"])
    scratch = Path("/tmp") / f"hermes-notes-{session.pk}-{os.getpid()}"
    (ws / ".ssh").mkdir()
    try:
        os.symlink(ws / ".ssh" / "authorized_keys", scratch)
        assert check(f"echo ssh-ed25519 AAAA >> {scratch}", ctx) == "ask"
        assert check("echo fine > /tmp/hermes-plain-output.txt", ctx) == "allow"
    finally:
        scratch.unlink(missing_ok=True)


def test_finding_2_reads_of_other_workspaces_and_process_environments_ask(
        alice_session, people, model):
    session, ws = alice_session
    bob_session = session_create(user=people["bob"])
    bob_ws = workspace_path(bob_session)
    (bob_ws / "secret.txt").write_text("bob's secret")
    ctx = ctx_for(session, people["alice"])
    for command in (f"cat ../{bob_session.pk}/secret.txt", f"cat {bob_ws}/secret.txt",
                    "cat /proc/1/environ", "cat /proc/$PPID/environ", "ls ..",
                    f"cd ../{bob_session.pk} && cat secret.txt",
                    f"cat {Path(settings.BASE_DIR) / 'manage.py'}"):
        assert check(command, ctx) == "ask", command
    model.plan = [terminal(f"cat ../{bob_session.pk}/secret.txt")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.risk_class == "host_read" and tool_results(session) == []


def test_finding_2_writes_into_the_app_code_or_another_workspace_are_denied(
        alice_session, people, model):
    session, ws = alice_session
    bob_session = session_create(user=people["bob"])
    bob_ws = workspace_path(bob_session)
    target = Path(settings.BASE_DIR) / "hermes_web" / f"pwned_{session.pk}.py"
    ctx = ctx_for(session, people["alice"])
    assert check(f"echo 'x' > {target}", ctx) == "deny"
    assert check(f"cp evil.py ../{bob_session.pk}/AGENTS.txt", ctx) == "deny"
    model.plan = [terminal(f"echo pwned > ../{bob_session.pk}/canary.txt")]
    run_turn(session, people["alice"])
    (result,) = tool_results(session)
    assert result.content.startswith("not executed:")
    assert not (bob_ws / "canary.txt").exists() and not target.exists()


# --- finding 3: scripts, redirect-only commands, glob and variable names ---------------

@pytest.mark.parametrize("runner", ["sh evil.sh", "bash evil.sh", ". evil.sh",
                                    "source ./evil.sh", "./evil.sh", "bash -x evil.sh"])
def test_finding_3_a_written_script_is_read_and_judged_like_the_command(
        alice_session, people, runner):
    session, ws = alice_session
    (ws / "evil.sh").write_text("echo tidy\nrm -rf /\n")
    (ws / "evil.sh").chmod(0o755)
    (ws / "fine.sh").write_text("echo tidy\nls -la\n")
    ctx = ctx_for(session, people["alice"])
    assert check(runner, ctx) == "deny", runner
    assert check(runner.replace("evil", "fine"), ctx) == "allow"


def test_finding_3_scripts_that_cannot_be_read_safely_ask(alice_session, people, tmp_path):
    session, ws = alice_session
    (tmp_path / "outside.sh").write_text("ls\n")
    os.symlink(tmp_path / "outside.sh", ws / "link.sh")
    (ws / "evil.py").write_text("import shutil\nshutil.rmtree('/home')\n")
    (ws / "sneaky.py").write_text("import os\nf = os.system\nf('rm -rf /')\n")
    ctx = ctx_for(session, people["alice"])
    assert check("sh link.sh", ctx) == "ask"          # a symlink is never followed
    assert check("bash missing.sh", ctx) == "ask"     # nothing to read yet
    assert check("python3 evil.py", ctx) == "deny"    # shutil.rmtree('/home') is the floor
    assert check("python3 sneaky.py", ctx) == "ask"   # a call through an alias is opaque


def test_finding_3_write_file_then_sh_in_one_real_turn_asks_and_runs_nothing(
        alice_session, people, model):
    session, ws = alice_session
    bob_ws = workspace_path(session_create(user=people["bob"]))
    canary = bob_ws / "keep"
    canary.mkdir()
    model.plan = [write_file("cleanup.sh", f"echo tidy\nrm -rf {canary}\n"),
                  terminal("sh cleanup.sh")]
    run_turn(session, people["alice"])
    assert (ws / "cleanup.sh").exists()  # the write_file call ran
    written, ran = tool_results(session)
    assert not written.is_error
    # the script deletes in another user's workspace: denied, and nothing was deleted
    assert ran.content.startswith("not executed:") and "keep" in ran.content
    assert canary.exists()


@pytest.mark.parametrize("command,verdict", [
    ("> /dev/sda", "deny"), (": > /dev/nvme0n1", "deny"), ("> /etc/passwd", "ask"),
    (">> /etc/profile", "ask"), ("/???/r? -rf /", "deny"), ("/bin/r[m] -rf /", "deny"),
    ("/usr/bin/r* -rf /", "deny"), ("$X -rf build", "ask"), ("X=rm; $X -rf /", "deny"),
    ("/bin/[r]m -rf build", "ask"),
])
def test_finding_3_redirect_only_and_dynamic_names(alice_session, people, command, verdict):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == verdict, command


def test_finding_3_glob_name_in_a_real_turn_asks_and_runs_nothing(alice_session, people,
                                                                  model):
    session, ws = alice_session
    (ws / "build").mkdir()
    model.plan = [terminal("/???/r? -rf build")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert (ws / "build").exists() and tool_results(session) == []


# --- B29: statically evaluated substitutions inside double quotes are one word --------

@pytest.mark.parametrize("command", [
    "bash -c \"$(printf 'rm -rf /')\"",
    "bash -c \"$(echo cm0gLXJmIC8= | base64 -d)\"",
    "sh -c \"$(printf '\\x72\\x6d -rf /')\"",
])
def test_b29_quoted_substitution_is_the_whole_payload(alice_session, people, command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "deny", command


def test_b29_quoted_substitution_in_a_real_turn_asks(alice_session, people, model):
    session, ws = alice_session
    (ws / "build").mkdir()
    model.plan = [terminal("bash -c \"$(printf 'rm -rf build')\"")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert ApprovalRequest.objects.get(session=session).risk_class == "destructive"
    assert (ws / "build").exists()


# --- finding 6: the most severe class, admin-only classes, the bypass toggle ----------

def test_finding_6_a_mixed_command_takes_its_most_severe_class(alice_session, people,
                                                                model):
    session, ws = alice_session
    (ws / "build").mkdir()
    model.plan = [terminal("chmod 777 run.sh; rm -rf build")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.risk_class == "destructive"
    assert {"destructive", "permissions"} <= set(approval.risk_classes)
    # the team's default: destructive needs an admin other than the requester
    with pytest.raises(ValidationError, match="admin other than the requester"):
        approval_decide(user=people["alice"], approval_id=approval.pk, choice="once")
    approval_decide(user=people["carol"], approval_id=approval.pk, choice="once")
    assert (ws / "build").exists()  # nothing ran before the admin's decision


def test_finding_6_admin_only_classes_survive_the_owners_bypass_toggle(alice_session,
                                                                       people, model):
    session, ws = alice_session
    (ws / "build").mkdir()
    session_bypass_set(user=people["alice"], session=session, enabled=True)
    model.plan = [terminal("rm -rf build")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert (ws / "build").exists() and tool_results(session) == []
    # a class the team did not reserve is still bypassed
    ctx = ctx_for(session, people["alice"])
    assert check("chmod 777 run.sh", replace(ctx, bypass=True)) == "allow"


def test_finding_6_team_admins_edit_the_policy_in_the_ui(people, login, alice_session):
    team = Team.objects.get(name="red")
    url = f"/settings/teams/{team.pk}/"
    assert login(people["alice"]).get(url).status_code == 404  # a member is not an admin
    client = login(people["carol"])
    page = client.get(url)
    assert page.status_code == 200 and b"destructive" in page.content
    response = client.post(url, {"admin_only_risk_classes": ["destructive", "privilege"]})
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.admin_only_risk_classes == ["destructive", "privilege"]
    entry = AuditEntry.objects.get(action="team.policy")
    assert entry.actor == people["carol"] and "git_history" in entry.detail["previous"]
    assert client.post(url, {"admin_only_risk_classes": ["nonsense"]}).status_code == 400


# --- finding 7: rules match exactly what was approved; deny rules match broadly -------

def test_finding_7_a_session_rule_never_widens_to_extra_operands(alice_session, people,
                                                                  model):
    session, ws = alice_session
    (ws / "build").mkdir()
    (ws / "src").mkdir()
    model.plan = [terminal("rm -rf build")]
    run_turn(session, people["alice"])
    approval = ApprovalRequest.objects.get(session=session)
    approval_decide(user=people["carol"], approval_id=approval.pk, choice="session")
    from sessions.tasks import turn_run_task

    turn_run_task.apply(args=[session.pk])
    assert not (ws / "build").exists()
    # same command again: the session rule allows it (and the unasked delete is audited)
    (ws / "build").mkdir()
    model.plan = [terminal("rm -rf build")]
    run_turn(session, people["alice"])
    assert not (ws / "build").exists()
    audit = AuditEntry.objects.get(action="command.unasked", session=session)
    assert audit.detail["rule"] == "session_rule" and "destructive" in audit.detail[
        "risk_classes"]
    # one extra operand or flag: asks again, nothing deleted
    (ws / "build").mkdir()
    model.plan = [terminal("rm -rf build src")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert (ws / "src").exists() and (ws / "build").exists()


def test_finding_7_deny_rules_are_not_evaded_by_a_flag_or_an_unknown_wrapper(
        alice_session, people):
    session, _ = alice_session
    Team.objects.filter(name="red").update(deny_rules=["rm -rf build", "git push --force"])
    ctx = ctx_for(Session.objects.get(pk=session.pk), people["alice"])
    for command in ("rm -rf build", "rm -rfv build", "rm -v -r -f build",
                    "mywrapper rm -rf build", "strace -f rm -rf build",
                    "git push --force origin main", "git -C . push -f"):
        assert check(command, ctx) == "deny", command
    assert check("rm -rf dist", ctx) == "ask"


# --- B32: export in the shell never turns approvals off; unasked deletes are audited ---

def test_b32_export_then_delete_is_still_gated(alice_session, people, model):
    session, ws = alice_session
    (ws / "build").mkdir()
    model.plan = [terminal("export APP_YOLO=1 HERMES_YOLO=1"),
                  # a scratch path that is nobody's checkout: CI clones into /tmp/x, and
                  # deleting the app's code is denied, not asked (this test failed there)
                  terminal("rm -rf ./build /tmp/hermes-b32-scratch")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert (ws / "build").exists()


def test_b32_a_bypassed_recursive_delete_gets_an_audit_entry(alice_session, people, model):
    session, ws = alice_session
    Team.objects.filter(name="red").update(admin_only_risk_classes=[])
    (ws / "build").mkdir()
    session_bypass_set(user=people["alice"], session=session, enabled=True)
    model.plan = [terminal("rm -rf build")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.COMPLETED and not (ws / "build").exists()
    entry = AuditEntry.objects.get(action="command.unasked", session=session)
    assert entry.detail["rule"] == "bypass" and entry.detail["command"] == "rm -f -r build"


def test_finding_3_git_config_and_hooks_written_by_a_tool_ask_every_time(alice_session,
                                                                        people):
    """A ``[alias] x = !rm -rf ~`` or a core.fsmonitor written into .git/config by
    write_file would run on a later, innocent-looking git command: such writes ask, one
    at a time, even under bypass."""
    from agents.messages import ToolCall
    from agents.policy import decide

    session, ws = alice_session
    ctx = replace(ctx_for(session, people["alice"]), bypass=True)
    for path in (".git/config", ".git/hooks/pre-commit", "sub/.git/hooks/post-checkout"):
        call = ToolCall(id="c1", name="write_file",
                        arguments=f'{{"path": "{path}", "content": "x"}}')
        assert decide(call, ctx).verdict == "ask", path
    assert check("echo '[alias] x = !sh' >> .git/config", ctx) == "ask"
    assert check("git -c alias.x='!rm -rf /' x", ctx) == "deny"


# --- finding 2 by another route: a server's Unix socket is out of Landlock's reach ---------

@pytest.mark.parametrize("command", [
    "psql -h /var/run/postgresql -U postgres -c 'UPDATE auth_user SET is_superuser = true'",
    "PGHOST=/run/postgresql psql -U postgres -c 'select 1'",
    "nc -U /var/run/postgresql/.s.PGSQL.5432",
    "socat - UNIX-CONNECT:/run/postgresql/.s.PGSQL.5432",
    "redis-cli -s /run/redis/redis.sock keys '*'",
])
def test_finding_2_database_clients_and_socket_connects_ask(alice_session, people, command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) == "ask", command


def test_finding_2_psql_over_the_socket_in_a_real_turn_asks_and_runs_nothing(
        alice_session, people, model):
    session, ws = alice_session
    model.plan = [terminal("psql -h /var/run/postgresql -U postgres -c "
                           "'UPDATE auth_user SET is_superuser = true' > out.txt")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert tool_results(session) == [] and not (ws / "out.txt").exists()


# --- second-user attack A1: a workspace wiped by a deferred or archiving command ---------

@pytest.mark.parametrize("command", [
    "trap 'rm -rf ./*' EXIT", "tar --remove-files -cf /dev/null .",
    "rsync -a --delete empty/ ./", "sort -o AGENTS.md notes.txt",
])
def test_attack_a1_a2_deferred_and_archiving_deletes_ask(alice_session, people, command):
    session, _ = alice_session
    assert check(command, ctx_for(session, people["alice"])) != "allow", command


def test_attack_a1_trap_in_a_real_turn_asks_and_deletes_nothing(alice_session, people, model):
    session, ws = alice_session
    (ws / "keep.txt").write_text("keep")
    model.plan = [terminal("trap 'rm -rf ./*' EXIT")]
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert (ws / "keep.txt").exists() and tool_results(session) == []


# --- a second user's report: "always" rules crossed teams ------------------------------

def test_an_always_rule_made_in_one_team_does_not_apply_in_another(people, model, layout):
    """A team admin cleared her own team's admin-only classes, approved her own `rm -rf` as
    "always", then worked in a team that reserves destructive commands for another admin:
    the rule let it run there unasked. Rules apply only in the team they were made in."""
    mallory = people["carol"]  # admin of red
    red = Team.objects.get(name="red")
    team_policy_set(user=mallory, team_id=red.pk, admin_only_risk_classes=[])
    own = session_create(user=mallory)
    (workspace_path(own) / "build").mkdir()
    model.plan = [terminal("rm -rf build")]
    run_turn(own, mallory)
    approval = ApprovalRequest.objects.get(session=own)
    approval_decide(user=mallory, approval_id=approval.pk, choice="always")
    assert ApprovalRule.objects.get().team_id == red.pk
    # now in a team that keeps destructive for another admin
    shared = Team.objects.create(name="shared")
    shared.memberships.create(user=mallory, role="member")
    other = session_create(user=mallory, team=shared)
    (workspace_path(other) / "build").mkdir()
    model.plan = [terminal("rm -rf build")]
    turn = run_turn(other, mallory)
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    assert (workspace_path(other) / "build").exists()
    # and an admin of a team the rule's owner is in, but not of the rule's team, cannot
    # see or revoke it
    shared.memberships.create(user=people["bob"], role="admin")
    with pytest.raises(Http404):
        approval_rule_revoke(user=people["bob"], rule_id=ApprovalRule.objects.get().pk)
