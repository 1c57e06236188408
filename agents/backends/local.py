"""The local backend: a command runs as a subprocess of the worker, confined by Landlock.

It exists for development and single-host installs. Where the kernel offers Landlock, each
command may write only its workspace and a private tmp and read only the system directories
and its workspace (agents/backends/confine.py); elsewhere only the policy stands between a
command and the host (``confinement`` says which). It also guarantees three things: no
process the command starts outlives the call, however it detaches (setsid, a double fork,
nohup, disown, daemon(3)), whether the shell exits, times out or is stopped: the command
runs under a subreaper supervisor (agents/backends/reaper.py) that kills every descendant
before it returns; the environment is a minimal fixed one (the web process's API keys and
database URL never reach the command); output memory is bounded. Policy (what may run)
lives in agents/policy/__init__.py, not here.

``run_process`` is the reusable core: the sandbox backend passes it a bubblewrap argv.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Literal

from agents.backends import CommandResult, reaper
from agents.backends.confine import LandlockRules, landlock_abi

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH given to commands. Fixed, not inherited: only hermes_web/settings.py reads the
environment, and an inherited PATH could point into the web app's virtualenv."""

OUTPUT_HEAD_BYTES = 1_000_000
OUTPUT_TAIL_BYTES = 1_000_000
"""Memory bound on captured output (bytes). The terminal tool caps far lower for the model;
this only stops ``yes`` from filling the worker's memory."""

DRAIN_GRACE_SECONDS = 2.0
"""How long to wait for the output pipe to reach EOF after the supervisor exited. Its
descendants are dead by then; only a process it could not kill (see
agents/backends/reaper.py, KILL_DEADLINE_SECONDS) can still hold the pipe: it is abandoned."""


def minimal_env(home: Path, extra: dict[str, str] | None = None,
                *, path: str = DEFAULT_PATH) -> dict[str, str]:
    """The environment a command sees: PATH, HOME (the workspace), LANG, TERM, plus
    ``extra``. Nothing is inherited from the worker (failure case B32: agent shells get a
    cleaned environment)."""
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
    if extra:
        env.update(extra)
    return env


class _BoundedCapture:
    """Reads a pipe to EOF in a thread, keeping the first and last megabyte."""

    def __init__(self, fd: int):
        self.fd = fd
        self.head = bytearray()
        self.tail = bytearray()
        self.omitted = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            self._drain()
        finally:
            # The reader owns the fd: closing it from another thread while a read blocks
            # could hand the number to an unrelated file.
            os.close(self.fd)

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            room = OUTPUT_HEAD_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                excess = len(self.tail) - OUTPUT_TAIL_BYTES
                if excess > 0:
                    del self.tail[:excess]
                    self.omitted += excess

    def text(self) -> str:
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        if self.omitted:
            return f"{head}\n[... {self.omitted} bytes of output omitted ...]\n{tail}"
        return head + tail


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


STOP_POLL_SECONDS = 0.25
"""How often ``should_stop`` is asked while a command runs."""

REAP_GRACE_SECONDS = 15.0
"""How long a stopped supervisor may take to kill the command's processes before the worker
kills it outright (longer than its own give-up deadline, agents/backends/reaper.py)."""


def supervisor_argv(argv: list[str], *, env: dict[str, str], status_fd: int,
                    landlock_fds: tuple[int, ...] = ()) -> list[str]:
    """The argv that runs ``argv`` under the supervisor (agents/backends/reaper.py) with
    ``env`` as the command's environment. The supervisor is this interpreter in isolated
    mode without site (``-I -S``): stdlib only, no PYTHON* variable or .pth file honoured.
    Raises OSError when the worker has no interpreter path to start it with."""
    if not sys.executable:
        raise OSError("no Python interpreter path to start the command supervisor with")
    out = [sys.executable, "-I", "-S", reaper.__file__, "--status-fd", str(status_fd),
           "--parent", str(os.getpid())]
    for fd in landlock_fds:
        out += ["--landlock-fd", str(fd)]
    for key, value in env.items():
        out += ["--env", f"{key}={value}"]
    return [*out, "--", *argv]


def _read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _stop(proc: subprocess.Popen) -> int:
    """Ask the supervisor to kill the command and every descendant (SIGTERM; SIGCONT in case
    an unconfined command stopped it), then wait; kill it outright past the grace."""
    for signum in (signal.SIGTERM, signal.SIGCONT):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass
    try:
        return proc.wait(timeout=REAP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        return proc.wait()


def run_process(argv: list[str], *, cwd: Path, timeout: float, env: dict[str, str],
                should_stop: Callable[[], bool] | None = None,
                landlock_fds: tuple[int, ...] = ()) -> CommandResult:
    """Run ``argv`` under the supervisor (agents/backends/reaper.py), in a new session with
    stdin closed, and return when it and every process it started are gone.

    The supervisor is a child subreaper: whatever a process of the command does to detach
    (setsid, double fork, nohup, disown, daemon(3)), it stays a descendant of the
    supervisor, which SIGKILLs every descendant when the shell exits and exits with the
    shell's status. ``timeout`` in seconds: on expiry the supervisor is told to kill
    everything (SIGTERM to it) and ``timed_out`` is set (exit code -9, as the shell is
    SIGKILLed); when ``should_stop()`` turns true (polled every 0.25 s) likewise with
    ``interrupted``. stdout and stderr share one pipe, so the output is interleaved as
    written. ``landlock_fds``: rulesets (agents/backends/confine.py) applied to the command
    in the supervisor's child before exec, never to the supervisor. Raises OSError only if
    the command cannot be started (including a ruleset that cannot be applied: it never
    runs unconfined).
    """
    read_fd, write_fd = os.pipe()
    status_r, status_w = os.pipe()
    try:
        proc = subprocess.Popen(
            supervisor_argv(argv, env=env, status_fd=status_w, landlock_fds=landlock_fds),
            cwd=cwd, env={}, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd,
            start_new_session=True, close_fds=True, pass_fds=(status_w, *landlock_fds))
    except BaseException:
        for fd in (read_fd, write_fd, status_r, status_w):
            os.close(fd)
        raise
    os.close(write_fd)
    os.close(status_w)
    capture = _BoundedCapture(read_fd)
    timed_out = interrupted = False
    deadline = time.monotonic() + max(timeout, 0.001)
    try:
        # EOF once the command was exec'd (or the supervisor is gone): milliseconds.
        failure = _read_all(status_r)
        if failure:
            proc.wait()
            capture.thread.join(DRAIN_GRACE_SECONDS)
            code, _, message = failure.decode(errors="replace").partition(":")
            raise OSError(int(code) if code.isdigit() else 0,
                          f"cannot start {argv[0]!r}: {message}")
        while True:
            left = deadline - time.monotonic()
            try:
                exit_code = proc.wait(timeout=max(0.001, min(left, STOP_POLL_SECONDS)))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    timed_out = True
                elif should_stop is not None and should_stop():
                    interrupted = True
                else:
                    continue
                exit_code = _stop(proc)
                break
    finally:
        if proc.returncode is None:
            _stop(proc)  # the worker thread was cancelled: the command must not outlive it
    capture.thread.join(DRAIN_GRACE_SECONDS)
    return CommandResult(exit_code=exit_code, output=capture.text(), timed_out=timed_out,
                         interrupted=interrupted)


def git_ceiling(workspace: Path) -> dict[str, str]:
    """Environment that stops git's repository discovery at the workspace (issue 8 finding
    5): a command in a workspace that sits inside another repository (the app's checkout)
    must never operate on that repository. The workspace may still be its own repo."""
    parent = os.path.dirname(os.path.realpath(workspace)) or "/"
    return {"GIT_CEILING_DIRECTORIES": parent}


Confinement = Literal["landlock", "none"]


class LocalBackend:
    """Runs commands with ``bash -c`` as the worker's own user, confined by Landlock where
    the kernel offers it (agents/backends/confine.py), else by the policy alone.

    ``workspace``: the only writable directory (default: each call's ``cwd``).
    ``protected``: paths never readable even under a system directory (data dir, app code,
    workspaces root). ``confine``: "auto" (Landlock when available), "landlock" (raise
    OSError at run when unavailable: fail closed), "none". ``path``: the PATH commands see.
    ``confinement`` says what is in force: "landlock" or "none".
    """

    name: Literal["local", "sandbox"] = "local"
    isolated: bool = False

    def __init__(self, *, workspace: Path | None = None, protected: tuple[str, ...] = (),
                 confine: Literal["auto", "landlock", "none"] = "auto",
                 path: str = DEFAULT_PATH):
        self.workspace = Path(workspace) if workspace is not None else None
        self.protected = protected
        self.path = path
        if confine == "none":
            self.confinement: Confinement = "none"
        elif landlock_abi() > 0:
            self.confinement = "landlock"
        elif confine == "landlock":
            raise OSError("Landlock confinement was demanded but this kernel does not offer it")
        else:
            self.confinement = "none"

    def run(self, command: str, *, cwd: Path, timeout: float,
            env: dict[str, str] | None = None,
            should_stop: Callable[[], bool] | None = None) -> CommandResult:
        """See agents.backends.Backend.run. HOME is the workspace; TMPDIR a private tmp
        directory removed afterwards; git discovery stops at the workspace."""
        workspace = Path(os.path.realpath(self.workspace or cwd))
        tmp = tempfile.mkdtemp(prefix="hermes-cmd-")
        try:
            extra = {**git_ceiling(workspace), "TMPDIR": tmp, **(env or {})}
            command_env = minimal_env(workspace, extra, path=self.path)
            if self.confinement != "landlock":
                return run_process(["bash", "-c", command], cwd=cwd, timeout=timeout,
                                   env=command_env, should_stop=should_stop)
            rules = LandlockRules(workspace=str(workspace), tmp=tmp, protected=self.protected)
            try:
                return run_process(["bash", "-c", command], cwd=cwd, timeout=timeout,
                                   env=command_env, should_stop=should_stop,
                                   landlock_fds=rules.restrict_fds)
            finally:
                rules.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
