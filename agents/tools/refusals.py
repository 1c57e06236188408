"""The sentences the workspace (agents/tools/workspace.py) refuses a path with: one case per
sentence, so a person reading a refused download or a model reading a tool error learns
which thing was wrong (a link, or a file where a directory was needed)."""

from __future__ import annotations

import errno
import os
import stat

from agents.errors import ToolError

LINK_REFUSAL = ("is or goes through a symbolic link; tools do not follow links, which may "
                "point outside the session workspace")


def dir_refusal(exc: OSError, shown: str, parent_fd: int, parts: tuple[str, ...],
                label: str) -> ToolError:
    """Why the directory ``parts`` (its last component under ``parent_fd``) would not open.
    The kernel says ELOOP/ENOTDIR for both a link and a file, so the component is looked at
    (without following it) to tell which. ``shown``: the path as the caller gave it;
    ``label``: how the tree is named ("session workspace")."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return ToolError(f"cannot open '{shown}': {exc.strerror}")
    component = "/".join(parts)
    try:
        mode = os.stat(parts[-1], dir_fd=parent_fd, follow_symlinks=False).st_mode
    except OSError:  # gone meanwhile: say both, as before
        return ToolError(f"path '{shown}' {LINK_REFUSAL}, or is not a directory.")
    if stat.S_ISLNK(mode):
        where = (f"'{shown}' is a symbolic link" if component == shown.strip("/")
                 else f"'{shown}' goes through a symbolic link ('{component}')")
        return ToolError(f"path {where}; tools do not follow links, which may point "
                         f"outside the {label}.")
    return ToolError(f"path '{shown}': '{component}' is a file, not a directory.")
