"""The local backend: a command runs as a subprocess of the worker, confined by Landlock.

It exists for development and single-host installs. Where the kernel offers Landlock, each
command may write only its workspace and a private tmp and read only the system directories
and its workspace (agents/backends/confine.py); elsewhere only the policy stands between a
command and the host (``confinement`` says which). It also guarantees three things: the
command starts in its own process group and the whole group is killed on timeout (and when
the shell exits, so background jobs cannot outlive the tool call); the environment is a
minimal fixed one (the web process's API keys and database URL never reach the command);
output memory is bounded. Policy (what may run) lives in agents/policy/__init__.py, not here.

``run_process`` is the reusable core: the sandbox backend passes it a bubblewrap argv.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Literal

from agents.backends import CommandResult
from agents.backends.confine import LandlockRules, landlock_abi

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH given to commands. Fixed, not inherited: only hermes_web/settings.py reads the
environment, and an inherited PATH could point into the web app's virtualenv."""

OUTPUT_HEAD_BYTES = 1_000_000
OUTPUT_TAIL_BYTES = 1_000_000
"""Memory bound on captured output (bytes). The terminal tool caps far lower for the model;
this only stops ``yes`` from filling the worker's memory."""

DRAIN_GRACE_SECONDS = 2.0
"""How long to wait for the output pipe to reach EOF after the group was killed. A process
that escaped the group (setsid) can hold the pipe open forever; it is then abandoned."""


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


def run_process(argv: list[str], *, cwd: Path, timeout: float, env: dict[str, str],
                should_stop: Callable[[], bool] | None = None,
                preexec_fn: Callable[[], None] | None = None,
                pass_fds: tuple[int, ...] = ()) -> CommandResult:
    """Run ``argv`` in a new session (own process group) with stdin closed.

    ``timeout`` in seconds. On expiry the whole group gets SIGKILL and ``timed_out`` is set;
    when ``should_stop()`` turns true (polled every 0.25 s) likewise with ``interrupted``.
    After the leader exits, the group is killed too, so no job outlives the call. stdout and
    stderr share one pipe, so the output is interleaved as written. Raises OSError only if
    the process cannot be started. ``preexec_fn`` runs in the child before exec (the
    Landlock restriction); ``pass_fds`` stay open in the child (the sandbox's workspace fd).
    """
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=write_fd, stderr=write_fd, start_new_session=True,
                                close_fds=True, preexec_fn=preexec_fn, pass_fds=pass_fds)
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    os.close(write_fd)
    capture = _BoundedCapture(read_fd)
    timed_out = interrupted = False
    deadline = time.monotonic() + max(timeout, 0.001)
    try:
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
                _kill_group(proc.pid)
                exit_code = proc.wait()
                break
    finally:
        if proc.returncode is None:
            _kill_group(proc.pid)
            proc.wait()
    _kill_group(proc.pid)
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
                                   preexec_fn=rules.apply)
            finally:
                rules.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
