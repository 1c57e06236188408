"""The bubblewrap sandbox backend: only the workspace is writable, no network, no
capabilities, the whole tree dies on timeout (agents/backends/sandbox.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agents.backends.sandbox import SandboxBackend, bwrap_argv, sandbox_available

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap unusable here")


@pytest.fixture
def backend(tmp_path) -> SandboxBackend:
    ws = tmp_path / "ws"
    ws.mkdir()
    return SandboxBackend(ws, hide=("/root", "/home", str(tmp_path / "secret")))


def run(backend: SandboxBackend, command: str, timeout: float = 20):
    return backend.run(command, cwd=backend.workspace, timeout=timeout)


def test_workspace_write_succeeds_and_is_visible_outside(backend):
    result = run(backend, "echo hello > note.txt && cat note.txt")
    assert result.exit_code == 0 and result.output == "hello\n"
    assert (backend.workspace / "note.txt").read_text() == "hello\n"


def test_write_outside_the_workspace_fails(backend, tmp_path):
    outside = tmp_path / "outside.txt"  # under /tmp: lands in the sandbox's own tmpfs
    result = run(backend, f"echo x > {outside}; echo x > /etc/hermes-sandbox-test; "
                          "touch /usr/hermes-sandbox-test")
    assert result.exit_code != 0
    assert result.output.count("Read-only file system") == 2
    assert not outside.exists() and not os.path.exists("/etc/hermes-sandbox-test")
    assert not os.path.exists("/usr/hermes-sandbox-test")


def test_no_privileges_to_undo_the_read_only_root(backend):
    result = run(backend, "id -u; grep CapEff /proc/self/status; mount -o remount,rw / 2>&1;"
                          " echo rc=$?")
    lines = result.output.splitlines()
    assert lines[0] == str(backend.command_uid()) and lines[0] != "0"
    assert lines[1].split()[1] == "0000000000000000"
    assert "rc=0" not in result.output


def test_network_is_unreachable(backend):
    result = run(backend, "ip -o link 2>/dev/null | grep -v ' lo:' | wc -l; "
                          "(exec 3<>/dev/tcp/1.1.1.1/53) 2>&1; echo rc=$?")
    assert result.output.splitlines()[0].strip() == "0"
    assert "rc=1" in result.output


def test_fresh_tmp_hidden_trees_and_clean_environment(backend, tmp_path, monkeypatch):
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("s3cr3t")
    monkeypatch.setenv("HERMES_SECRET_TOKEN", "leak")
    host_tmp = Path(f"/tmp/hermes-host-{os.getpid()}")
    host_tmp.write_text("host")
    try:
        result = run(backend, f"ls {host_tmp} 2>&1 | wc -l; cat {host_tmp} {tmp_path}/secret/key"
                              " 2>&1; env")
    finally:
        host_tmp.unlink()
    assert "No such file" in result.output and "host\n" not in result.output
    assert "s3cr3t" not in result.output and "leak" not in result.output
    assert f"HOME={os.path.realpath(backend.workspace)}" in result.output


def test_timeout_kills_the_whole_tree(backend):
    marker = f"hermes-sbx-{os.getpid()}-{time.monotonic_ns()}"
    start = time.monotonic()
    result = run(backend, f"(exec -a {marker} sleep 30) & setsid bash -c 'exec -a {marker} "
                          f"sleep 30' & sleep 30", timeout=1)
    assert result.timed_out and time.monotonic() - start < 10
    time.sleep(0.3)
    alive = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith(marker)]
    assert alive == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_cwd_outside_the_workspace_is_refused(backend, tmp_path):
    with pytest.raises(ValueError):
        backend.run("ls", cwd=tmp_path, timeout=5)


def test_argv_drops_privileges_and_unshares_everything(tmp_path):
    argv = bwrap_argv("true", workspace=tmp_path, cwd=tmp_path, env={"A": "1"})
    joined = " ".join(argv)
    for piece in ("--ro-bind /usr /usr", "--unshare-all", "--unshare-user", "--uid 1000",
                  "--cap-drop ALL", "--die-with-parent", "--new-session", "--clearenv",
                  "--tmpfs /tmp"):
        assert piece in joined
    assert argv.index("--tmpfs") < argv.index("--bind")  # workspace mounted after /tmp
    assert backend_is_isolated()


def backend_is_isolated() -> bool:
    return SandboxBackend.isolated is True and SandboxBackend.name == "sandbox"


def test_host_data_outside_the_system_dirs_is_not_visible(tmp_path):
    """Only the system directories are mounted: the application's own tree, other
    workspaces and /work-like data directories do not exist inside the sandbox."""
    from agents.backends.sandbox import SandboxBackend

    here = Path(__file__).resolve()
    backend = SandboxBackend(tmp_path)
    result = backend.run(f"ls {here.parent} 2>&1; test -e {here} && echo VISIBLE || echo ABSENT;"
                         " python3 -c 'print(6*7)'", cwd=tmp_path, timeout=30)
    assert "ABSENT" in result.output and "VISIBLE" not in result.output
    assert "42" in result.output  # programs still run
