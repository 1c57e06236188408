"""No process a tool call starts outlives the tool call, however it detaches.

On the local backend a command ran in its own process group and the group was killed at
the end, but ``setsid nohup sleep 1000 >/dev/null 2>&1 &`` (or a double fork) left the group
and kept running on the host, as the worker's user, after its tool call and its turn. Each
command now runs under a subreaper supervisor (agents/backends/reaper.py). The sandbox
(bubblewrap: own PID namespace, --die-with-parent) is checked the same way, bare and through
its backend.

Real processes only: every command is a real ``bash -c`` on the real backend, and "gone" is
read from /proc, by a marker argument (a unique sleep duration) no other process has.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agents.backends.local import LocalBackend, run_process, supervisor_argv
from agents.backends.sandbox import (SandboxBackend, bwrap_argv, bwrap_path, sandbox_available,
                                     workspace_hand_over)
from sessions.models import Turn
from simulator.script import Reply, Script
from tests.security.confinement_support import skip_unless_available
from tests.security.conftest import run_turn, terminal, tool_results
from tests.security.test_policy_findings import check, ctx_for

PR_GET_CHILD_SUBREAPER = 37


def marker() -> str:
    """A sleep duration no other process on the host is using."""
    return str(random.randrange(700_000, 900_000))


def alive(mark: str) -> list[str]:
    """Command lines of live (not zombie) processes whose argv holds ``mark``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2:].split()[0]
        if mark.encode() in argv and state != b"Z":
            found.append(f"{name}: {b' '.join(argv).decode(errors='replace')}")
    return found


def kill_leftovers(mark: str) -> None:
    """Never leave an escaped process on the host, even when the test fails."""
    for line in alive(mark):
        try:
            os.kill(int(line.split(":")[0]), 9)
        except OSError:
            pass


ESCAPES = {
    "setsid_nohup": "setsid nohup sleep {m} >/dev/null 2>&1 &",
    "double_fork": "setsid bash -c '(sleep {m} >/dev/null 2>&1 &)' &",
    "ignores_term_and_hup": ("setsid bash -c 'trap \"\" TERM HUP INT; exec sleep {m}' "
                             ">/dev/null 2>&1 & disown"),
    "daemon3": ("python3 -c 'import os; os.fork() and os._exit(0); os.setsid(); "
                "os.fork() and os._exit(0); os.execvp(\"sleep\", [\"sleep\", \"{m}\"])'"),
    "deep_chain": "setsid bash -c 'setsid bash -c \"setsid sleep {m} & wait\" & wait' &",
}
"""Ways out of the process group: setsid + nohup; a double fork; a process immune to
SIGTERM/SIGHUP; daemon(3) (fork, setsid, fork, the parents exit); a chain of sessions."""


@pytest.fixture(params=["local", "sandbox"])
def backend(request, tmp_path):
    """The real backend: the local one with Landlock (as production runs it where the
    kernel offers it), or bubblewrap."""
    skip_unless_available(request.param)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    if request.param == "local":
        return LocalBackend(workspace=workspace, confine="landlock"), workspace
    return SandboxBackend(workspace), workspace


class Watch:
    """Polls /proc from the test process (a confined command cannot read /proc/<pid>) every
    20 ms while a command runs: ``seen`` turns true once a process with the marker runs,
    proving the escape happened and the test is not passing on a process never started."""

    def __init__(self, mark: str):
        self.mark = mark
        self.seen = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._done.is_set():
            if alive(self.mark):
                self.seen.set()
            time.sleep(0.02)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        kill_leftovers(self.mark)  # never leave an escaped process, even when failing


@pytest.mark.parametrize("kind", sorted(ESCAPES))
def test_a_detached_process_dies_when_the_command_returns(backend, kind):
    runner, workspace = backend
    mark = marker()
    with Watch(mark) as watch:
        # The shell lingers a second so the watch sees the escapee run.
        result = runner.run(ESCAPES[kind].format(m=mark) + "\nsleep 1", cwd=workspace,
                            timeout=30)
        left = alive(mark)  # at once: the call has returned
        assert watch.seen.is_set(), result
        assert result.exit_code == 0 and not result.timed_out, result
        assert left == []


@pytest.mark.parametrize("kind", ["setsid_nohup", "ignores_term_and_hup", "daemon3"])
def test_a_detached_process_dies_when_the_command_times_out(backend, kind):
    runner, workspace = backend
    mark = marker()
    with Watch(mark) as watch:
        result = runner.run(ESCAPES[kind].format(m=mark) + "\nsleep 60", cwd=workspace,
                            timeout=2)
        left = alive(mark)
        assert watch.seen.is_set(), result
        assert result.timed_out and result.exit_code == -9, result
        assert left == []


def test_a_detached_process_dies_when_the_user_stops_the_command(backend):
    runner, workspace = backend
    mark = marker()
    with Watch(mark) as watch:
        result = runner.run(ESCAPES["double_fork"].format(m=mark) + "\nsleep 60",
                            cwd=workspace, timeout=30, should_stop=watch.seen.is_set)
        left = alive(mark)
        assert result.interrupted and result.exit_code == -9, result
        assert left == []


def test_a_cancelled_worker_thread_leaves_nothing_behind(tmp_path):
    """The worker thread's wait is interrupted (an exception raised into it, as a task's
    soft time limit does): the supervisor is stopped on the way out, with everything below
    it."""
    skip_unless_available("local")
    mark = marker()

    class Cancelled(Exception):
        pass

    def should_stop() -> bool:
        if alive(mark):
            raise Cancelled()
        return False

    with Watch(mark):
        with pytest.raises(Cancelled):
            LocalBackend(confine="landlock").run(
                ESCAPES["setsid_nohup"].format(m=mark) + "\nsleep 60", cwd=tmp_path,
                timeout=30, should_stop=should_stop)
        assert alive(mark) == []


def test_a_killed_worker_takes_its_commands_processes_with_it(tmp_path):
    """The worker process itself dies (SIGKILL, OOM) mid-command: the supervisor's parent
    death signal makes it kill everything it adopted. A real second interpreter plays the
    worker."""
    skip_unless_available("local")
    mark = marker()
    script = ("import sys; from pathlib import Path; "
              "from agents.backends.local import LocalBackend; "
              "LocalBackend(confine='landlock').run(sys.argv[1], cwd=Path(sys.argv[2]), "
              "timeout=60)")
    command = ESCAPES["double_fork"].format(m=mark) + "\nsleep 60"
    root = Path(__file__).resolve().parents[2]
    with Watch(mark) as watch:
        worker = subprocess.Popen([sys.executable, "-c", script, command, str(tmp_path)],
                                  cwd=root)
        try:
            assert watch.seen.wait(20), "the background process never ran"
        finally:
            worker.kill()
            worker.wait()
        end = time.monotonic() + 5
        while alive(mark) and time.monotonic() < end:
            time.sleep(0.02)
        assert alive(mark) == []


def test_repeated_stop_signals_still_end_in_a_full_cleanup(tmp_path):
    """A timeout's SIGTERM followed at once by another (the worker dying): the second must
    not interrupt the supervisor's cleanup."""
    mark = marker()
    status_r, status_w = os.pipe()
    argv = supervisor_argv(["bash", "-c", ESCAPES["setsid_nohup"].format(m=mark) + "\nsleep 60"],
                           env={"PATH": "/usr/bin:/bin"}, status_fd=status_w)
    with Watch(mark) as watch:
        proc = subprocess.Popen(argv, env={}, pass_fds=(status_w,), start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(status_w)
        try:
            assert os.read(status_r, 100) == b""  # started
            assert watch.seen.wait(20)
            for _ in range(5):
                proc.send_signal(signal.SIGTERM)
                proc.send_signal(signal.SIGHUP)
            assert proc.wait(timeout=20) == -signal.SIGKILL
        finally:
            os.close(status_r)
            if proc.poll() is None:
                proc.kill()
        assert alive(mark) == []


def test_exit_codes_and_output_are_the_shells():
    runner = LocalBackend(confine="none")
    workspace = Path(os.path.realpath("/tmp"))
    assert runner.run("echo out; echo err >&2; exit 7", cwd=workspace, timeout=10).exit_code == 7
    result = runner.run("echo out; echo err >&2; exit 7", cwd=workspace, timeout=10)
    assert result.output == "out\nerr\n"
    assert runner.run("kill -TERM $$", cwd=workspace, timeout=10).exit_code == -15
    assert runner.run("kill -SEGV $$", cwd=workspace, timeout=10).exit_code == -11
    assert runner.run("no-such-program-xyz", cwd=workspace, timeout=10).exit_code == 127


def test_the_worker_never_becomes_a_subreaper(tmp_path):
    """Several turns share one worker process: only the per-command supervisor adopts."""
    LocalBackend(confine="none").run("setsid true &", cwd=tmp_path, timeout=10)
    libc = ctypes.CDLL(None, use_errno=True)
    flag = ctypes.c_int(-1)
    assert libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    assert flag.value == 0


def test_a_ruleset_that_cannot_be_applied_means_the_command_never_runs(tmp_path):
    """Fail closed: the supervisor must not run the command unconfined (here the "ruleset"
    is not a Landlock fd, so landlock_restrict_self fails)."""
    with open(os.devnull) as not_a_ruleset:
        with pytest.raises(OSError, match="landlock_restrict_self"):
            run_process(["touch", str(tmp_path / "ran")], cwd=tmp_path, timeout=10,
                        env={"PATH": "/usr/bin:/bin"}, landlock_fds=(not_a_ruleset.fileno(),))
    assert not (tmp_path / "ran").exists()


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap not installed")
def test_bare_bubblewrap_already_takes_a_detached_process_down(tmp_path):
    """The finding for the sandbox: bubblewrap alone (no supervisor), in its own PID
    namespace, ends every process of the command when the command exits: the namespace's
    init dies and the kernel kills the rest. The backend runs it under the supervisor
    anyway (one mechanism for both backends)."""
    if not sandbox_available():
        pytest.skip("bubblewrap unusable here")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    run_as = (61000, 61000) if os.geteuid() == 0 else None
    if run_as:
        workspace_hand_over(workspace, *run_as)
    mark = marker()
    with Watch(mark) as watch:
        argv = bwrap_argv(ESCAPES["setsid_nohup"].format(m=mark) + "\n"
                          + ESCAPES["double_fork"].format(m=mark) + "\nsleep 1",
                          workspace=workspace, cwd=workspace, env={"PATH": "/usr/bin:/bin"},
                          bwrap=bwrap_path(), run_as=run_as)
        subprocess.run(argv, check=True, timeout=30, capture_output=True)
        # The kernel's kill of the namespace is delivered as bwrap's init exits, but a
        # process still being torn down can show in /proc for a moment on a loaded host
        # (one CI run saw it): give the kill a bounded moment, never a pass without it.
        deadline = time.monotonic() + 2.0
        while (left := alive(mark)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watch.seen.is_set()
        assert left == []


# --- through a real turn: the terminal tool on the local backend, policy and all ----------

@pytest.mark.django_db(transaction=True)
def test_a_turns_detached_background_process_is_gone_when_its_tool_call_returns(
        alice_session, people, simulator):
    """A real turn (runner, policy, dispatcher, terminal tool, local backend with Landlock,
    the Celery task run eagerly): the model's terminal call starts ``setsid nohup sleep``
    in the background, which the policy allows without asking. When the model is asked for
    its next step, the tool call has returned: /proc is read at that moment."""
    session, _ = alice_session
    skip_unless_available("local")
    mark = marker()
    escape = f"setsid nohup sleep {mark} >/dev/null 2>&1 &"
    assert check(escape, ctx_for(session, people["alice"])) == "allow"
    after_call: list[list[str]] = []

    def model(request) -> Reply:
        if not request.tool_results:
            return Reply(text="starting it", tool_calls=(terminal(f"{escape} sleep 1"),))
        after_call.append(alive(mark))
        return Reply(text="done")

    simulator.state.script = Script(model)
    with Watch(mark) as watch:
        turn = run_turn(session, people["alice"])
        assert turn.status == Turn.Status.COMPLETED, turn.error
        (result,) = tool_results(session)
        assert "[exit code 0]" in result.content, result.content
        assert watch.seen.is_set(), "the background process never ran"
        assert after_call == [[]]
        assert alive(mark) == []
