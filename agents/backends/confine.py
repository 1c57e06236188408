"""Landlock confinement for the local backend (issue 8 finding 2, build item 3).

A command on the local backend runs as the worker's own user, so without an OS boundary it
can read the app's database and secret key, write the app's code, read other workspaces.
Where the kernel offers Landlock, each command is confined in the child before exec (by the
supervisor, agents/backends/reaper.py, which applies the rulesets built here to the command
and not to itself):

- writes (and creating, removing, renaming): the session workspace and a private tmp only,
  plus writing /dev/null;
- reads and execution: the system directories (``SYSTEM_DIRS``) and the workspace, minus
  ``SECRET_FILES`` and any protected path (data dir, app code, workspaces root) that lies
  under a system directory: Landlock only allows by hierarchy, so an allowed directory that
  contains a protected path is replaced by rules on each of its other children;
- /proc: only its non-process entries (cpuinfo, meminfo, sys, ...). No /proc/<pid> dir is
  readable, not even the command's own (``self`` and ``thread-self`` are excluded too):
  measured on kernel 6.18, a confined root process could still read its parent's
  /proc/<ppid>/environ (the worker's secrets) through an allowed /proc. The cost:
  /dev/fd, /dev/stdin and bash's ``<(...)`` do not work on this backend.

- TCP (Landlock ABI 4 and later): a command may connect only to ``ALLOWED_TCP_PORTS``
  (HTTP and HTTPS, for package downloads) and bind no TCP port, so the app's PostgreSQL,
  Redis (the Celery broker), web server and simulator on this host are unreachable. The
  PyPI ``landlock`` binding exposes no network rules, so this second, network-only layer is
  created with the raw syscalls here (Landlock stacks layers; both apply).

- signals and abstract Unix sockets (ABI 6 and later): scoped to the command's own
  processes, so it cannot signal the worker or any other process of the host.
- no device nodes are created (mknod of a block or character device), anywhere.

Not covered by Landlock: connecting to a pathname Unix socket (e.g. PostgreSQL's
/var/run/postgresql socket: keep it on password or peer authentication, or use the sandbox
backend, which does not mount /run), UDP, abstract sockets and signals below ABI 6.
Where Landlock is missing (old kernel, disabled LSM, seccomp in a container) the local
backend falls back to the policy alone, and ``landlock_abi()`` says so (0).

Source of the rule shapes: /work/shared/reference/sandbox-notes.md ("Landlock"), the kernel's
Documentation/userspace-api/landlock.rst.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
from collections.abc import Callable, Iterable

from landlock import FSAccess, Ruleset, landlock_abi_version

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
               "/proc", "/dev")
"""Readable (and executable) for confined commands."""
SECRET_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private")
"""Never readable, even though /etc is: password hashes, sudo rules, host private keys."""
WRITABLE_DEVICES = ("/dev/null",)
ALLOWED_TCP_PORTS = (80, 443)
"""TCP ports a confined command may connect to (ABI >= 4); nothing may be bound."""

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_RULE_NET_PORT = 2
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _NetRulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr up to handled_access_net (uapi/linux/landlock.h)."""

    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64)]


class _ScopedRulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr up to ``scoped`` (ABI 6 and later)."""

    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _NetPortAttr(ctypes.Structure):
    """struct landlock_net_port_attr."""

    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _syscall(number: int, *args) -> int:
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def net_ruleset(ports: Iterable[int] = ALLOWED_TCP_PORTS) -> int | None:
    """A ruleset fd that handles TCP bind and connect and allows connecting to ``ports``
    only; None below ABI 4 (no network rules in the kernel). From ABI 6 it also scopes
    signals and abstract Unix sockets to the confined command's own processes: on the host
    a command ran as the worker's user, and a second user's ``kill -STOP`` froze the shared
    worker (every user's turns) with no approval. Raises OSError."""
    abi = landlock_abi()
    if abi < 4:
        return None
    attr = (_ScopedRulesetAttr(0, _NET_BIND_TCP | _NET_CONNECT_TCP,
                               _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX_SOCKET) if abi >= 6
            else _NetRulesetAttr(0, _NET_BIND_TCP | _NET_CONNECT_TCP))
    fd = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                  ctypes.c_uint32(0))
    try:
        for port in ports:
            rule = _NetPortAttr(_NET_CONNECT_TCP, port)
            _syscall(_SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_NET_PORT),
                     ctypes.byref(rule), ctypes.c_uint32(0))
    except OSError:
        os.close(fd)
        raise
    return fd


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable (no
    syscall, disabled at boot, or filtered by a container's seccomp). Detected with
    landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION), not from
    /sys/kernel/security (often unmounted; sandbox-notes)."""
    try:
        ctypes.set_errno(0)
        return int(landlock_abi_version())
    except Exception:  # SyscallError (an OSError), or LandlockError on a non-Linux host
        return 0


def read_rule_paths(roots: Iterable[str], excluded: Iterable[str], *,
                    listdir: Callable[[str], list[str]] = os.listdir,
                    is_dir: Callable[[str], bool] = os.path.isdir) -> list[str]:
    """The paths to grant read access to so that everything under ``roots`` is readable
    except ``excluded`` (and everything under them).

    Landlock allows by hierarchy only, so a root that contains an excluded path is split
    into its children, recursively; a root inside an excluded path is dropped. Pure given
    ``listdir``/``is_dir`` (tested with hypothesis). Sorted, no duplicates.
    """
    banned_set = {os.path.normpath(p) for p in excluded}
    banned = sorted(banned_set)
    out: set[str] = set()

    def visit(path: str, inside: list[str]) -> None:
        # ``inside``: the banned paths at or below ``path`` (string prefixes: fast).
        if _at_or_below(path, banned_set):
            return
        prefix = path.rstrip("/") + "/"
        below = [b for b in inside if b.startswith(prefix)]
        if not below:
            out.add(path)
            return
        try:
            children = listdir(path)
        except OSError:
            return
        for name in children:
            visit(prefix + name, below)

    for root in roots:
        visit(os.path.normpath(root), banned)
    return sorted(out)


def _at_or_below(path: str, banned: set[str]) -> bool:
    """True if ``path`` or one of its ancestors is in ``banned`` (O(depth) set lookups)."""
    while True:
        if path in banned:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def process_entries(proc: str = "/proc") -> list[str]:
    """The per-process entries of ``proc`` (every pid dir, ``self``, ``thread-self``): kept
    out of the readable tree so no command reads another process's environ or memory."""
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    return [f"{proc}/{n}" for n in names if n.isdigit() or n in ("self", "thread-self")]


@functools.lru_cache(maxsize=8)
def _read_plan(protected: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
    """(path, is a directory) of every read rule, computed once per process and protected
    set: the system trees change rarely, and per-process /proc entries are never allowed,
    so a pid started later is not readable either."""
    excluded = [*SECRET_FILES, *protected, *process_entries()]
    roots = [p for p in SYSTEM_DIRS if os.path.isdir(p) and not os.path.islink(p)]
    plan = []
    for path in read_rule_paths(roots, excluded):
        try:
            plan.append((path, stat.S_ISDIR(os.stat(path).st_mode)))
        except OSError:
            continue
    return tuple(plan)


class LandlockRules:
    """A Landlock ruleset built in the worker and applied in the command's process before
    exec: ``restrict_fds`` are handed to the supervisor (agents/backends/reaper.py), which
    sets no_new_privs and calls landlock_restrict_self with each, in order, in its child.

    ``workspace`` and ``tmp``: full access. ``protected``: paths never readable even when
    under a system directory (data dir, app code, workspaces root, HERMES home). Raises
    OSError when the ruleset cannot be built. ``close()`` releases the ruleset fd.
    """

    def __init__(self, *, workspace: str, tmp: str, protected: Iterable[str] = ()):
        ctypes.set_errno(0)
        # No device nodes, even in the workspace (a second user found mknod allowed there:
        # a block device of the host's disk reads it raw).
        everything = FSAccess.all() & ~(FSAccess.MAKE_BLOCK | FSAccess.MAKE_CHAR)
        read_dir = FSAccess.READ_DIR | FSAccess.READ_FILE | FSAccess.EXECUTE
        read_file = FSAccess.READ_FILE | FSAccess.EXECUTE
        self._ruleset = Ruleset(restrict_rules=FSAccess.all())  # handled: device nodes too
        for path, is_dir in _read_plan(tuple(protected)):
            try:
                self._allow(path, read_dir if is_dir else read_file)
            except OSError:
                continue  # vanished since the plan was made: nothing to allow
        write_dev = FSAccess.READ_FILE | FSAccess.WRITE_FILE
        if landlock_abi() >= 3:
            write_dev |= FSAccess.TRUNCATE
        for path in WRITABLE_DEVICES:
            if os.path.exists(path):
                self._allow(path, write_dev)
        self._allow(workspace, everything)
        self._allow(tmp, everything)
        self._net_fd = net_ruleset()

    def _allow(self, path: str, rights) -> None:
        ctypes.set_errno(0)
        self._ruleset.allow(path, rules=rights)

    @property
    def restrict_fds(self) -> tuple[int, ...]:
        """The ruleset fds to restrict the command with, in order: the filesystem layer,
        then (ABI >= 4) the network and scope layer. Valid until ``close()``."""
        return (self._ruleset._fd, *(() if self._net_fd is None else (self._net_fd,)))

    def close(self) -> None:
        """Close the ruleset fds (after the command has started)."""
        for fd in (self._ruleset._fd, self._net_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


__all__ = ["LandlockRules", "SECRET_FILES", "SYSTEM_DIRS", "landlock_abi", "read_rule_paths"]
