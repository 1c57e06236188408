"""The per-command supervisor: no process a command starts outlives the command.

A process group does not bound a command's processes: ``setsid``, a double fork, ``nohup``,
``disown`` or daemon(3) each leave the group, and an orphan is adopted by init, so it kept
running on the host after its tool call and its turn. ``run_process`` (agents/backends/local.py)
therefore starts every command under this small program, run as a separate interpreter
(``python -I -S reaper.py ...``: stdlib only, no site, no environment variables honoured):

1. it makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so every orphaned
   descendant, however it detached, is reparented to it instead of to init;
2. it forks the command in a new session, applies the Landlock rulesets it was handed (fds
   built by agents/backends/confine.py) in that child only, and execs it with the command's
   environment. The supervisor itself stays unconfined: it must read /proc to find its
   children, and it runs only this file; the command (and everything it starts) is confined
   exactly as before, and Landlock keeps it from ptracing or (ABI >= 6) signalling the
   supervisor;
3. when the command's shell exits, or the supervisor gets SIGTERM/SIGHUP/SIGINT (the worker's
   timeout or stop; its parent thread dying, via PR_SET_PDEATHSIG), it SIGKILLs its children
   and reaps them, round after round, until it has none left: a killed child's own children
   are reparented to it, so the rounds walk down the whole tree. Only unreaped children of
   its own are signalled, so a recycled pid can never be hit;
4. it exits with the shell's status (re-raising the signal that killed the shell, core dumps
   off), so the exit codes the terminal tool reports are unchanged.

Start failures (the program cannot be executed, Landlock cannot be applied: fail closed) are
written to ``--status-fd`` as ``errno:message`` and the command never runs; a clean start
closes the fd with nothing written. Usage::

    reaper.py --status-fd N --parent PID [--landlock-fd N]... [--env KEY=VALUE]... -- ARGV...

The worker must not be a subreaper itself: several turns share one worker process.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
SYS_LANDLOCK_RESTRICT_SELF = 446
"""The same number on every architecture (the syscall table was unified before Landlock)."""

KILL_DEADLINE_SECONDS = 10.0
"""How long the supervisor keeps killing before it gives up: only a process it may not
signal (a setuid program on an unconfined host) or one stuck in the kernel lasts that long.
It then says so on the command's output and exits; the worker does not wait forever."""

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
"""Signals that make the supervisor kill the command and all its descendants, then exit."""


class _Stop(Exception):
    """Raised by the stop-signal handler to leave whatever wait is in progress."""


_interruptible = False
"""True while a stop signal may raise ``_Stop`` (inside ``main``'s try). The handler clears
it before raising, so at most one ``_Stop`` is ever raised: a second signal (a timeout, then
the worker's death) can never escape the handler and skip the cleanup."""


def _on_stop(signum, frame):
    global _interruptible
    if _interruptible:
        _interruptible = False
        raise _Stop()


def parse(argv: list[str]) -> tuple[int, int, list[int], dict[str, str], list[str]]:
    """(status fd, parent pid, Landlock ruleset fds, environment, command argv) from the
    supervisor's arguments (see the module docstring). Raises ValueError when malformed:
    a programming error in the worker, never input from a command."""
    status_fd = parent = None
    fds: list[int] = []
    env: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] != "--":
        flag, value = argv[i], argv[i + 1]
        if flag == "--status-fd":
            status_fd = int(value)
        elif flag == "--parent":
            parent = int(value)
        elif flag == "--landlock-fd":
            fds.append(int(value))
        elif flag == "--env":
            key, sep, val = value.partition("=")
            if not sep:
                raise ValueError(f"--env {value!r}: expected KEY=VALUE")
            env[key] = val
        else:
            raise ValueError(f"unknown option {flag!r}")
        i += 2
    command = argv[i + 1:]
    if status_fd is None or parent is None or not command:
        raise ValueError("--status-fd, --parent and a command after -- are required")
    return status_fd, parent, fds, env, command


def children(me: int) -> list[int]:
    """Pids whose parent is ``me`` (zombies included). Read from
    /proc/<me>/task/*/children where the kernel has it (CONFIG_PROC_CHILDREN), else from the
    ppid field of every /proc/<pid>/stat. Race-free for the caller's own children: none can
    be reaped, so none can be recycled, except by the caller."""
    try:
        found: list[int] = []
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as handle:
                found += [int(pid) for pid in handle.read().split()]
        return found
    except FileNotFoundError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # exited meanwhile
        # The command name may hold spaces and ')': the fields start after the last ')'.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


def kill_descendants(shell: int, status: int | None, *,
                     deadline_seconds: float = KILL_DEADLINE_SECONDS) -> tuple[int | None, int]:
    """SIGKILL and reap every child until none is left; as a subreaper that means every
    descendant. ``shell``: the command's pid, whose wait status is returned if it is reaped
    here (else ``status`` is passed through). Returns (shell status, processes left alive
    when the deadline passed: 0 on success)."""
    me = os.getpid()
    deadline = time.monotonic() + deadline_seconds
    delay = 0.001
    while True:
        progressed = False
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return status, 0  # no child left: no descendant left
            if pid == 0:
                break
            progressed = True
            if pid == shell:
                status = wait_status
        alive = children(me)
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # a setuid child we may not signal; the deadline bounds the wait
        if time.monotonic() > deadline:
            return status, len(alive)
        # Reparenting follows a kill within microseconds; back off only while nothing moves.
        delay = 0.001 if progressed else min(delay * 2, 0.05)
        time.sleep(delay)


class _Libc:
    """prctl and syscall through ctypes, resolved before fork (the child only calls)."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long

    def prctl(self, option: int, arg: int) -> None:
        if self.libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                           ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl({option}): {os.strerror(err)}")

    def restrict_self(self, fd: int) -> None:
        if self.libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(fd),
                             ctypes.c_uint32(0)) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")


def resolve(name: str, path: str) -> str:
    """``name`` looked up in ``path`` (the command's PATH, colon-separated) as execvp would:
    the first executable regular file; a name with a slash is returned as is. Raises
    FileNotFoundError when there is none."""
    if "/" in name:
        return name
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(2, f"{name}: command not found")


def _exec_command(libc: _Libc, fds: list[int], env: dict[str, str], command: list[str],
                  error_fd: int) -> None:
    """In the forked child: default signals, a new session, Landlock, exec. Never returns."""
    try:
        for signum in (*STOP_SIGNALS, signal.SIGPIPE, signal.SIGXFSZ):
            # Python ignores SIGPIPE and SIGXFSZ; an ignored signal stays ignored across exec.
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.setsid()
        # Resolve before Landlock: after it the interpreter may not read its own stdlib
        # (execvpe imports lazily), and nothing but the exec may happen there.
        program = resolve(command[0], env.get("PATH", ""))
        if fds:
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1)  # landlock_restrict_self requires it
            for fd in fds:
                libc.restrict_self(fd)
        os.execve(program, command, env)
    except BaseException as exc:  # report, never fall through into the supervisor's code
        code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        try:
            os.write(error_fd, f"{code}:{exc}".encode(errors="replace"))
        finally:
            os._exit(127)


def _exit_like(status: int | None) -> None:
    """Exit the way the shell did: its exit code, or death by the same signal."""
    if status is None:
        status = signal.SIGKILL  # killed before it could report: as if by the timeout
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else signal.SIGKILL
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # re-raising SIGSEGV must not dump
    if signum != signal.SIGKILL:  # SIGKILL has no handler to reset
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)


def main(argv: list[str]) -> None:
    """Supervise one command (see the module docstring). Never returns: exits like the
    command's shell."""
    global _interruptible
    status_fd, parent, fds, env, command = parse(argv)
    libc = _Libc()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    for fd in (status_fd, *fds):
        os.set_inheritable(fd, False)  # the command gets neither the status pipe nor rulesets
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_stop)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    shell, status = 0, None
    _interruptible = True  # signals are still blocked: nothing is raised before the try
    try:
        if os.getppid() != parent:
            raise _Stop()  # the worker died before PDEATHSIG was armed
        error_r, error_w = os.pipe2(os.O_CLOEXEC)
        shell = os.fork()
        if shell == 0:
            os.close(error_r)
            _exec_command(libc, fds, env, command, error_w)
        os.close(error_w)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(STOP_SIGNALS))
        with os.fdopen(error_r, "rb") as errors:
            failure = errors.read()  # EOF at the child's exec (close-on-exec)
        if failure:
            os.write(status_fd, failure)
        os.close(status_fd)
        while True:
            pid, wait_status = os.waitpid(-1, 0)  # orphans are reaped as they die
            if pid == shell:
                status = wait_status
                _interruptible = False  # from here on a stop signal changes nothing
                break
    except _Stop:
        if shell and status is None:
            try:
                os.kill(shell, signal.SIGKILL)
            except OSError:
                pass
    _interruptible = False
    status, left = kill_descendants(shell, status)
    if left:
        os.write(2, f"\n[hermes: {left} process(es) of this command could not be killed]\n"
                 .encode())
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
