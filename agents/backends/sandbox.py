"""The sandbox backend: a command runs inside bubblewrap, able to write only its workspace.

hermes ships no OS sandbox on the default path (seed "What is not here: a sandbox"); this is
the gap it names. Inside: the host root read-only, the session workspace read-write, a fresh
/tmp, new /proc and /dev, every namespace unshared (so no network), a new session (no
TIOCSTI into the caller's terminal), and death with the parent. Running bubblewrap as root
would keep every capability and could remount / read-write, so the command runs in a new
user namespace as uid/gid 1000 with all capabilities dropped. Directories that hold other
people's data (``hide``: other workspaces, /root, /home, the app's config) are covered by
empty tmpfs mounts, because a read-only root is still a readable root.

The policy treats this backend as isolated (agents/policy.py: only the deny list applies).
Process lifetime and output capture are agents/backends/local.py's ``run_process``.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Literal

from agents.backends import CommandResult
from agents.backends.local import DEFAULT_PATH, minimal_env, run_process

SANDBOX_UID = 1000
SANDBOX_GID = 1000
DEFAULT_HIDE = ("/root", "/home")
"""Hidden by default: home directories hold keys and other users' files."""
_HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")
"""Root-only files. The namespace maps the sandbox uid to the caller's (root) uid, so file
owner checks would pass; an empty file is bound over each instead."""


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
"""Host directories visible (read-only) inside the sandbox; usrmerge symlinks are kept as
symlinks. Everything else on the host is absent, not merely read-only."""


def bwrap_path() -> str | None:
    """Absolute path of the bubblewrap binary, or None."""
    return shutil.which("bwrap", path=DEFAULT_PATH)


def bwrap_argv(command: str, *, workspace: Path, cwd: Path, env: dict[str, str],
               hide: tuple[str, ...] = DEFAULT_HIDE, bwrap: str = "bwrap") -> list[str]:
    """The bubblewrap argv that runs ``command`` with ``bash -c`` (order matters: later
    mounts go on top, so /tmp and the hidden trees are replaced before the workspace,
    which may live under one of them, is bound back)."""
    argv = [bwrap]
    # A read-only root made of the system directories only: programs and libraries are
    # there, the host's data (/work, /srv, /home, /root, /var, other workspaces) is not.
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp",
             "--tmpfs", "/run"]
    for path in hide:
        if os.path.isdir(path):
            argv += ["--tmpfs", path]
    for path in _HIDDEN_FILES:
        if os.path.exists(path):
            argv += ["--ro-bind", "/dev/null", path]
    real = os.path.realpath(workspace)
    argv += ["--bind", real, real]
    if str(workspace) != real:
        argv += ["--symlink", real, str(workspace)] if not os.path.lexists(workspace) else []
    argv += ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid",
             str(SANDBOX_GID), "--cap-drop", "ALL", "--die-with-parent", "--new-session",
             "--hostname", "sandbox", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", os.path.realpath(cwd), "--", "bash", "-c", command]
    return argv


class SandboxBackend:
    """Runs commands with ``bash -c`` inside bubblewrap (see the module docstring).

    ``workspace``: the only writable host directory (absolute). ``hide``: directories to
    mask with an empty tmpfs (default /root and /home; the composition root adds the
    workspaces root and the app directory). ``cwd`` given to ``run`` must be inside the
    workspace (ValueError otherwise). HOME is the workspace.
    """

    name: Literal["local", "sandbox"] = "sandbox"
    isolated: bool = True

    def __init__(self, workspace: Path, *, hide: tuple[str, ...] = DEFAULT_HIDE,
                 path: str = DEFAULT_PATH, bwrap: str | None = None):
        self.workspace = Path(workspace)
        self.hide = hide
        self.path = path
        self.bwrap = bwrap or bwrap_path() or "bwrap"

    def run(self, command: str, *, cwd: Path, timeout: float,
            env: dict[str, str] | None = None,
            should_stop: Callable[[], bool] | None = None) -> CommandResult:
        """See agents.backends.Backend.run. ``timeout`` in seconds; on expiry the whole
        tree dies (bubblewrap is the group leader and PID 1's parent: killing it tears down
        the pid namespace)."""
        root = os.path.realpath(self.workspace)
        real_cwd = os.path.realpath(cwd)
        if os.path.commonpath([root, real_cwd]) != root:
            raise ValueError(f"cwd {cwd} is outside the sandbox workspace {self.workspace}")
        inner_env = minimal_env(Path(root), env, path=self.path)
        argv = bwrap_argv(command, workspace=self.workspace, cwd=Path(real_cwd),
                          env=inner_env, hide=self.hide, bwrap=self.bwrap)
        return run_process(argv, cwd=Path(real_cwd), timeout=timeout, env=inner_env,
                           should_stop=should_stop)


@functools.cache
def sandbox_available() -> bool:
    """True when bubblewrap is installed and a trivial sandboxed command works on this host
    (probed once per process: user namespaces can be disabled by the kernel or a container
    runtime even where the binary exists)."""
    if bwrap_path() is None:
        return False
    with tempfile.TemporaryDirectory(prefix="hermes-sandbox-probe-") as tmp:
        try:
            result = SandboxBackend(Path(tmp)).run("touch probe && id -u", cwd=Path(tmp),
                                                   timeout=10)
        except OSError:
            return False
        return (result.exit_code == 0 and result.output.strip() == str(SANDBOX_UID)
                and os.path.exists(os.path.join(tmp, "probe")))
