"""Issue 8 finding 9 (medium): the sandbox's uid mapped to host root and only three files
were masked, so /etc/shadow- and every root-owned file bound in were readable. Now the
command runs as a dedicated unprivileged host uid (host permissions apply), with no
capabilities, and sees only the system directories and its own workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.backends.sandbox import sandbox_available
from agents.tools import ToolContext
from agents.tools.terminal import Terminal
from agents.tools.workspace import Workspace
from sessions import toolbox
from sessions.services import session_create, workspace_path
from tests.security.confinement_support import SECRET, host  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not sandbox_available(), reason="bubblewrap unusable here")]


@pytest.fixture
def sandbox_ctx(make_user, hermes_settings, host):  # noqa: F811
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "sandbox"}
    toolbox.backend_kind.cache_clear()
    ws = workspace_path(session_create(user=make_user("mallory"))).resolve()
    yield ToolContext(workspace=ws, backend=toolbox.backend_for(ws))
    toolbox.backend_kind.cache_clear()


def term(ctx: ToolContext, command: str) -> str:
    return Terminal().run({"command": command}, ctx).text


def test_shadow_files_are_unreadable_and_the_uid_is_not_root(sandbox_ctx):
    out = term(sandbox_ctx, "id -u; for f in /etc/shadow /etc/shadow- /etc/gshadow; do "
                            "cat $f >/dev/null 2>&1 && echo READ $f; done; "
                            "grep CapEff /proc/self/status; touch made-inside")
    lines = out.splitlines()
    assert lines[0] != "0" and "READ" not in out
    assert "CapEff:\t0000000000000000" in out
    made = os.stat(sandbox_ctx.workspace / "made-inside")
    assert made.st_uid != 0, "a file the sandbox makes must not be owned by host root"


def test_host_permissions_apply_to_root_owned_files_in_the_workspace(sandbox_ctx):
    term(sandbox_ctx, "true")  # first use hands the workspace over to the sandbox uid
    private = sandbox_ctx.workspace / "root-only.txt"
    private.write_text(SECRET + "\n")
    os.chown(private, 0, 0)
    private.chmod(0o600)
    out = term(sandbox_ctx, "cat root-only.txt; echo rc=$?")
    assert SECRET not in out and "Permission denied" in out


def test_only_the_system_dirs_and_the_workspace_are_mounted(sandbox_ctx, host):  # noqa: F811
    out = term(sandbox_ctx, f"ls /; cat {host.secret_key} {host.db} {host.other}/private.txt "
                            f"{host.secret_file} 2>&1; ls {host.base} 2>&1; "
                            "ls /root /home 2>&1 | wc -l; "
                            "echo x > /etc/pwned 2>&1; echo x > /usr/pwned 2>&1; true")
    assert SECRET not in out
    top = out.split("\n")[:out.split("\n").index("usr") + 1]
    assert set(top) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "opt", "proc",
                        "run", "sbin", "tmp", "usr", "var"}, top
    assert not os.path.exists("/etc/pwned") and not os.path.exists("/usr/pwned")


def test_files_the_worker_writes_stay_writable_for_the_sandbox(sandbox_ctx):
    term(sandbox_ctx, "true")
    Workspace(sandbox_ctx.workspace).write_bytes("notes/todo.txt", b"one\n")
    out = term(sandbox_ctx, "echo two >> notes/todo.txt && cat notes/todo.txt")
    assert "one\ntwo" in out
    assert Path(sandbox_ctx.workspace / "notes/todo.txt").read_text() == "one\ntwo\n"
