"""The sandbox backend: a command runs inside bubblewrap, able to write only its workspace.

hermes ships no OS sandbox on the default path (seed "What is not here: a sandbox"); this is
the gap it names. Inside: the system directories read-only, the session workspace read-write,
a fresh /tmp, new /proc and /dev, every namespace unshared (so no network), a new session
(no TIOCSTI into the caller's terminal), and death with the parent. Running bubblewrap as
root would keep every capability and map the sandbox user to host root (root-owned files
readable; issue 8 finding 9). A root worker therefore lets bubblewrap build the mounts
without a user namespace and starts the command through setpriv as a dedicated
unprivileged host uid (``HOST_UID``): no capabilities, no_new_privs, host permissions
apply. The workspace is handed over (chowned) to that uid. Directories that hold
other people's data (``hide``: other workspaces, /root, /home, the app's config) are
covered by empty tmpfs mounts when they lie under a mounted tree.

The policy treats this backend as isolated (agents/policy/__init__.py: only the deny list applies).
Process lifetime and output capture are agents/backends/local.py's ``run_process`` (the
subreaper supervisor); the PID namespace alone already ends every process of the command
when it exits (its init dies), measured in tests/security/test_command_lifetime.py.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Literal

from agents.backends import CommandResult
from agents.backends.local import DEFAULT_PATH, git_ceiling, minimal_env, run_process

SANDBOX_UID = 1000
SANDBOX_GID = 1000
"""The uid/gid commands see inside the sandbox's user namespace."""
HOST_UID = 61000
HOST_GID = 61000
"""The dedicated unprivileged host uid/gid sandboxed commands run as when the worker is root
(issue 8 finding 9): never host root, so host permissions apply to everything the sandbox
can see (/etc/shadow and /etc/shadow- are 0640 root:shadow: unreadable). It needs no passwd
entry. When the worker is not root, commands run as the worker's own user (mapped to
SANDBOX_UID in a user namespace)."""
DEFAULT_HIDE = ("/root", "/home")
"""Hidden by default: home directories hold keys and other users' files."""
_HIDDEN_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                 "/etc/sudoers")
"""Root-only files, also masked with an empty file (belt and braces: host permissions
already refuse them to the unprivileged uid)."""


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
"""Host directories visible (read-only) inside the sandbox; usrmerge symlinks are kept as
symlinks. Everything else on the host is absent, not merely read-only."""


def bwrap_path() -> str | None:
    """Absolute path of the bubblewrap binary, or None."""
    return shutil.which("bwrap", path=DEFAULT_PATH)


def _under_system_dir(path: str) -> bool:
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d + "/") for d in SYSTEM_DIRS
               if os.path.isdir(d) and not os.path.islink(d))


def setpriv_argv(uid: int, gid: int) -> list[str]:
    """The setpriv prefix that runs the next program as ``uid``/``gid`` with no
    supplementary groups, no capabilities (inheritable, ambient via clearing, bounding) and
    no_new_privs, so nothing it runs can regain privilege."""
    setpriv = shutil.which("setpriv", path=DEFAULT_PATH) or "/usr/bin/setpriv"
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def bwrap_argv(command: str, *, workspace: Path, cwd: Path, env: dict[str, str],
               hide: tuple[str, ...] = DEFAULT_HIDE, bwrap: str = "bwrap",
               run_as: tuple[int, int] | None = None) -> list[str]:
    """The bubblewrap argv that runs ``command`` with ``bash -c`` (order matters: later
    mounts go on top, so /tmp and the hidden trees are replaced before the workspace,
    which may live under one of them, is bound back).

    ``run_as`` (uid, gid): for a root worker. bubblewrap then sets the mounts up as root
    without a user namespace and the command is started through setpriv as that
    unprivileged host uid (a user namespace would map the sandbox user to host root, whose
    files are then readable: issue 8 finding 9). None: bubblewrap itself runs unprivileged
    and maps the caller to ``SANDBOX_UID`` in a new user namespace, all capabilities dropped.
    """
    argv = [bwrap]
    # A read-only root made of the system directories only: programs and libraries are
    # there, the host's data (/work, /srv, /home, /root, /var, other workspaces) is not.
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
             "--perms", "1777", "--tmpfs", "/var/tmp",
             "--tmpfs", "/run"]
    for path in hide:
        # Only a tree that would be visible needs covering; anything else is simply absent
        # (mounting a tmpfs there would create its parents inside: mount only what is needed).
        if os.path.isdir(path) and _under_system_dir(path):
            argv += ["--tmpfs", path]
    for path in _HIDDEN_FILES:
        if os.path.exists(path):
            argv += ["--ro-bind", "/dev/null", path]
    real = os.path.realpath(workspace)
    # bubblewrap (as root) would make the bind's missing parents 0700 root: the unprivileged
    # command could not reach its own workspace. Make them 0755 explicitly.
    mounted = {"/tmp", "/var/tmp", "/run", "/proc", "/dev"}
    for parent in reversed(Path(real).parents):
        text = str(parent)
        if text != "/" and text not in mounted and not _under_system_dir(text):
            argv += ["--perms", "0755", "--dir", text]
    argv += ["--bind", real, real]
    if str(workspace) != real:
        argv += ["--symlink", real, str(workspace)] if not os.path.lexists(workspace) else []
    if run_as is None:
        argv += ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid",
                 str(SANDBOX_GID), "--cap-drop", "ALL"]
    else:
        # No --cap-drop: setpriv needs CAP_SETUID to switch, then clears every set.
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                 "--unshare-cgroup-try"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    inner = setpriv_argv(*run_as) if run_as is not None else []
    argv += ["--chdir", os.path.realpath(cwd), "--", *inner, "bash", "-c", command]
    return argv


def workspace_hand_over(workspace: Path, uid: int, gid: int) -> None:
    """Make ``workspace`` writable for the sandbox's host uid: chown every entry not yet
    owned by it, never following links (lchown). Done once per workspace in practice: the
    root is checked first, and files the worker writes later are handed over by
    agents/tools/workspace.py. No-op unless the worker is root."""
    if os.geteuid() != 0:
        return
    root = os.path.realpath(workspace)
    info = os.lstat(root)
    if (info.st_uid, info.st_gid) == (uid, gid):
        return
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirnames, *filenames):
            try:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
    os.chown(root, uid, gid, follow_symlinks=False)


class SandboxBackend:
    """Runs commands with ``bash -c`` inside bubblewrap (see the module docstring).

    ``workspace``: the only writable host directory (absolute), handed over to the
    sandbox's host uid on first use. ``hide``: directories to mask with an empty tmpfs
    (default /root and /home; the composition root adds the workspaces root and the app
    directory). ``host_uid``/``host_gid``: who bubblewrap runs as when the worker is root.
    ``cwd`` given to ``run`` must be inside the workspace (ValueError otherwise). HOME is
    the workspace; git discovery stops at it.
    """

    name: Literal["local", "sandbox"] = "sandbox"
    isolated: bool = True
    confinement = "bubblewrap"

    def __init__(self, workspace: Path, *, hide: tuple[str, ...] = DEFAULT_HIDE,
                 path: str = DEFAULT_PATH, bwrap: str | None = None,
                 host_uid: int = HOST_UID, host_gid: int = HOST_GID):
        self.workspace = Path(workspace)
        self.hide = hide
        self.path = path
        self.bwrap = bwrap or bwrap_path() or "bwrap"
        self.host_uid = host_uid
        self.host_gid = host_gid

    def run(self, command: str, *, cwd: Path, timeout: float,
            env: dict[str, str] | None = None,
            should_stop: Callable[[], bool] | None = None) -> CommandResult:
        """See agents.backends.Backend.run. ``timeout`` in seconds; on expiry the whole
        tree dies (the supervisor kills bubblewrap, PID 1's parent: that tears down the pid
        namespace, and the supervisor kills whatever else it adopted)."""
        root = os.path.realpath(self.workspace)
        real_cwd = os.path.realpath(cwd)
        if os.path.commonpath([root, real_cwd]) != root:
            raise ValueError(f"cwd {cwd} is outside the sandbox workspace {self.workspace}")
        workspace_hand_over(Path(root), self.host_uid, self.host_gid)
        inner_env = minimal_env(Path(root), {**git_ceiling(Path(root)), "TMPDIR": "/tmp",
                                             **(env or {})},
                                path=self.path)
        run_as = (self.host_uid, self.host_gid) if os.geteuid() == 0 else None
        argv = bwrap_argv(command, workspace=self.workspace, cwd=Path(real_cwd),
                          env=inner_env, hide=self.hide, bwrap=self.bwrap, run_as=run_as)
        return run_process(argv, cwd=Path(real_cwd), timeout=timeout, env=inner_env,
                           should_stop=should_stop)

    def command_uid(self) -> int:
        """The uid commands see inside: the host uid for a root worker, else SANDBOX_UID."""
        return self.host_uid if os.geteuid() == 0 else SANDBOX_UID


@functools.cache
def sandbox_available() -> bool:
    """True when bubblewrap is installed and a trivial sandboxed command works on this host
    as the unprivileged host uid (probed once per process: user namespaces can be disabled
    by the kernel or a container runtime even where the binary exists)."""
    if bwrap_path() is None:
        return False
    with tempfile.TemporaryDirectory(prefix="hermes-sandbox-probe-") as tmp:
        try:
            result = SandboxBackend(Path(tmp)).run("touch probe && id -u", cwd=Path(tmp),
                                                   timeout=10)
        except OSError:
            return False
        return (result.exit_code == 0
                and result.output.strip() == str(SandboxBackend(Path(tmp)).command_uid())
                and os.path.exists(os.path.join(tmp, "probe")))
