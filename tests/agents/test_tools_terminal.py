"""The terminal tool and the local backend with real subprocesses (issue 2 item 7)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agents.backends.local import LocalBackend
from agents.errors import ToolError
from agents.tools import ToolContext
from agents.backends.local import OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES
from agents.tools.terminal import Terminal


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(workspace=ws, backend=LocalBackend())


def test_runs_in_the_workspace_and_reports_exit_code(ctx: ToolContext) -> None:
    out = Terminal().run({"command": "pwd; echo err >&2; exit 3"}, ctx)
    assert out.text.splitlines() == [str(ctx.workspace), "err", "[exit code 3]"]
    assert out.metadata == {"exit_code": 3, "timed_out": False}
    assert not out.is_error


def test_environment_is_minimal_and_home_is_the_workspace(ctx: ToolContext,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-value")
    out = Terminal().run({"command": "env"}, ctx)
    assert "sk-secret-value" not in out.text
    assert f"HOME={ctx.workspace}" in out.text.splitlines()


def test_timeout_kills_the_whole_process_group(ctx: ToolContext) -> None:
    marker = ctx.workspace / "child.pid"
    started = time.monotonic()
    out = Terminal().run({"command": f"(sleep 30 & echo $! > {marker}; wait) ; echo never",
                          "timeout": 1}, ctx)
    assert time.monotonic() - started < 10
    assert out.is_error and out.metadata["timed_out"] is True
    assert "[timed out after 1 s" in out.text and "never" not in out.text
    child = int(marker.read_text())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def test_background_job_does_not_outlive_the_command(ctx: ToolContext) -> None:
    marker = ctx.workspace / "bg.pid"
    started = time.monotonic()
    out = Terminal().run({"command": f"sleep 30 & echo $! > {marker}; echo done"}, ctx)
    assert time.monotonic() - started < 5
    assert out.text.splitlines()[0] == "done"
    child = int(marker.read_text())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_output_is_never_cut_by_the_tool(ctx: ToolContext) -> None:
    # B36: the spill layer relocates large output; the tool itself keeps every line.
    out = Terminal().run({"command": "seq 1 40000"}, ctx)
    lines = out.text.splitlines()
    assert lines[:-1] == [str(i) for i in range(1, 40001)] and lines[-1] == "[exit code 0]"


def test_huge_output_does_not_exhaust_memory(ctx: ToolContext) -> None:
    out = Terminal().run({"command": "yes | head -c 5000000"}, ctx)
    assert len(out.text) < OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES + 200
    assert out.metadata["exit_code"] == 0


def test_timeout_is_clamped(ctx: ToolContext) -> None:
    out = Terminal().run({"command": "true", "timeout": 5000}, ctx)
    assert "[timeout clamped to 600 s]" in out.text


def test_no_output_and_no_backend(ctx: ToolContext, tmp_path: Path) -> None:
    assert Terminal().run({"command": "true"}, ctx).text == "(no output)\n[exit code 0]"
    with pytest.raises(ToolError, match="no command backend"):
        Terminal().run({"command": "true"}, ToolContext(workspace=tmp_path))


def test_stdin_is_closed(ctx: ToolContext) -> None:
    started = time.monotonic()
    out = Terminal().run({"command": "cat; echo after", "timeout": 5}, ctx)
    assert time.monotonic() - started < 4 and out.text.startswith("after")


def test_backend_passes_extra_env(tmp_path: Path) -> None:
    result = LocalBackend().run("echo $FOO", cwd=tmp_path, timeout=5, env={"FOO": "bar"})
    assert result.output == "bar\n" and result.exit_code == 0 and not result.timed_out
    assert os.environ.get("FOO") != "bar"


def test_should_stop_kills_a_running_command_and_says_so(tmp_path):
    import time

    from agents.backends.local import LocalBackend
    from agents.tools import ToolContext
    from agents.tools.terminal import Terminal

    started = time.monotonic()
    ctx = ToolContext(workspace=tmp_path, backend=LocalBackend(),
                      extras={"should_stop": lambda: time.monotonic() - started > 0.5})
    output = Terminal().run({"command": "sleep 30; echo never > after.txt", "timeout": 60}, ctx)
    assert time.monotonic() - started < 5
    assert output.is_error and "stopped by the user" in output.text
    assert not (tmp_path / "after.txt").exists()
