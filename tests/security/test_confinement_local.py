"""Issue 8 finding 2 (critical), the confinement part: on the local backend a member ran
sqlite3 on the app's database (by a relative path, or after ``cd``) and made themselves
superuser; read /proc/<parent>/environ; wrote into the app's code; read other users'
workspaces and the secret key. Each attack is a real terminal call, run here past the
policy (straight to the backend, as if the approval had been given), on both backends: the
OS boundary alone must stop it (Landlock on the local backend, bubblewrap in the sandbox)."""

from __future__ import annotations

import os
import uuid

import pytest

from agents.tools import ToolContext
from agents.tools.terminal import Terminal
from sessions import toolbox
from sessions.services import session_create, workspace_path
from tests.security.confinement_support import (SECRET, backend_kind, host,  # noqa: F401
                                                superuser_flag)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ctx(make_user, backend_kind, host):  # noqa: F811
    ws = workspace_path(session_create(user=make_user("mallory"))).resolve()
    backend = toolbox.backend_for(ws)
    if backend_kind == "local":
        assert backend.confinement == "landlock"
    return ToolContext(workspace=ws, backend=backend)


def term(ctx: ToolContext, command: str) -> str:
    return Terminal().run({"command": command}, ctx).text


UPDATE = "update auth_user set is_superuser=1"


@pytest.mark.parametrize("command", [
    f"sqlite3 ../../hermes.sqlite3 '{UPDATE}'",
    f"cd ../.. && sqlite3 hermes.sqlite3 '{UPDATE}'",
    f"cd .. && cd .. && python3 -c \"import sqlite3; c=sqlite3.connect('hermes.sqlite3'); "
    f"c.execute('{UPDATE}'); c.commit()\"",
    f"cp ../../hermes.sqlite3 mine.db && sqlite3 mine.db '{UPDATE}' && "
    "cp mine.db ../../hermes.sqlite3",
])
def test_the_app_database_cannot_be_read_or_changed(ctx, host, command):  # noqa: F811
    out = term(ctx, command)
    assert "[exit code 0]" not in out
    assert superuser_flag(host.db) == "0"


def test_the_workers_environment_is_unreadable(ctx, monkeypatch):
    monkeypatch.setenv("HERMES_TEST_WORKER_SECRET", SECRET + "-env")
    out = term(ctx, "cat /proc/$PPID/environ; cat /proc/$PPID/cmdline; "
                    f"cat /proc/{os.getpid()}/environ; tr '\\0' '\\n' < /proc/1/environ")
    assert SECRET not in out


def test_the_apps_code_cannot_be_written(ctx, host):  # noqa: F811
    marker = host.base / f"pwned-{uuid.uuid4().hex}.py"
    settings_file = host.base / "hermes_web" / "settings.py"
    before = settings_file.read_bytes()
    out = term(ctx, f"echo x > {marker}; touch {host.base}/hermes_web/pwned.py; "
                    f"echo 'DEBUG=True' >> {settings_file}; "
                    f"cd {host.base} && git status 2>&1 | head -1")
    created = marker.exists()
    if created:
        marker.unlink()  # never leave it in the checkout, then fail
    assert not created
    assert "pwned" not in " ".join(os.listdir(host.base))
    assert settings_file.read_bytes() == before
    assert not (host.base / "hermes_web" / "pwned.py").exists()
    assert "On branch" not in out


@pytest.mark.parametrize("target", ["other", "secret_key", "secret_file"])
def test_other_workspaces_and_host_secrets_are_unreadable(ctx, host, target):  # noqa: F811
    path = {"other": host.other / "private.txt", "secret_key": host.secret_key,
            "secret_file": host.secret_file}[target]
    rel = os.path.relpath(path, ctx.workspace)
    out = term(ctx, f"cat {path}; cat {rel}; cd .. && ls; grep -r HOST-SECRET .. 2>/dev/null "
                    "| head -3")
    assert SECRET not in out


def test_writes_outside_the_workspace_fail_and_inside_succeed(ctx, host):  # noqa: F811
    out = term(ctx, "echo ok > inside.txt && cat inside.txt; "
                    f"echo x > {host.workspaces}/planted; echo x > {host.other}/planted; "
                    "echo x > /etc/planted; echo x > $TMPDIR/scratch && echo tmp-ok")
    assert "ok" in out and (ctx.workspace / "inside.txt").read_text() == "ok\n"
    assert "tmp-ok" in out
    for path in (host.workspaces / "planted", host.other / "planted"):
        assert not path.exists()
    assert not os.path.exists("/etc/planted")


def test_the_apps_services_on_this_host_are_unreachable_over_tcp(ctx, settings):
    """PostgreSQL (trust auth on this host: a connection is superuser), Redis (the Celery
    broker: a forged task runs in the worker) and the simulator: no TCP connect succeeds
    from a command (Landlock ABI >= 4 on the local backend; no network in the sandbox)."""
    from agents.backends.confine import landlock_abi

    if ctx.backend.name == "local" and landlock_abi() < 4:  # kernel capability, not a stub
        pytest.skip("Landlock below ABI 4 has no network rules")
    out = term(ctx, "psql -h 127.0.0.1 -U postgres -tc 'select 4242' 2>&1; "
                    "redis-cli -h 127.0.0.1 ping 2>&1; "
                    "(exec 3<>/dev/tcp/127.0.0.1/6379) 2>&1 && echo CONNECTED")
    assert "4242" not in out and "PONG" not in out and "CONNECTED" not in out


def test_a_command_cannot_signal_a_process_outside_it(ctx):
    """A second user froze the shared worker with ``kill -STOP`` from the local backend (the
    command runs as the worker's user). Landlock ABI >= 6 scopes signals to the command's
    own processes; the sandbox has its own PID namespace. Past the policy, straight to the
    backend: the OS boundary alone must refuse it. The target is a process of this test
    (the worker's user), stopped with SIGSTOP if the signal got through."""
    import signal
    import subprocess

    from agents.backends.confine import landlock_abi

    if ctx.backend.name == "local" and landlock_abi() < 6:  # kernel capability, not a stub
        pytest.skip("Landlock below ABI 6 cannot scope signals")
    victim = subprocess.Popen(["sleep", "30"])
    try:
        out = term(ctx, f"kill -STOP {victim.pid} 2>&1 && echo SIGNALLED; "
                        f"kill -0 {os.getppid()} 2>&1 && echo PARENT_REACHABLE; "
                        "kill -0 $PPID 2>&1 && echo PPID_REACHABLE; echo done")
        assert "SIGNALLED" not in out and "PARENT_REACHABLE" not in out, out
        state = open(f"/proc/{victim.pid}/stat").read().split(")")[1].split()[0]
        assert state != "T", "the process was stopped"
    finally:
        victim.send_signal(signal.SIGCONT)
        victim.kill()
        victim.wait()
    # Its own children it may still signal: kill is not broken inside the command.
    assert "OWN_OK" in term(ctx, "sleep 30 & kill $! && echo OWN_OK")


def test_a_command_cannot_make_a_device_node(ctx):
    """mknod of a block device in the workspace (the host's disk, read raw) is refused."""
    out = term(ctx, "mknod disk b 7 0 2>&1; ls -l disk 2>&1; echo done")
    assert not (ctx.workspace / "disk").exists(), out
