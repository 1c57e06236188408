"""The sentences the workspace (agents/tools/workspace.py) refuses a path with: one case per
sentence, so a person reading a refused download or a model reading a tool error learns
which thing was wrong (a link, or a file where a directory was needed)."""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable
from typing import Any

from agents.errors import ToolError

LINK_REFUSAL = ("is or goes through a symbolic link; tools do not follow links, which may "
                "point outside the session workspace")
NAME_MAX_BYTES = 255
"""The longest name (one path component) Linux file systems take, in bytes."""
SHOWN_MAX_CHARS = 80
"""A longer path is shortened in a refusal, so the reason stays readable."""


def shown_path(shown: str) -> str:
    """``shown`` as a refusal quotes it: whole when short, else its start and its length."""
    if len(shown) <= SHOWN_MAX_CHARS:
        return shown
    return f"{shown[:SHOWN_MAX_CHARS // 2]}… ({len(shown):,} characters)"


def os_refusal(exc: OSError, shown: str, *, doing: str = "open") -> ToolError:
    """The sentence for an OSError the kernel gave on a path (looking at it, opening it or
    writing it: ``doing``), so a caller never sees a bare OSError or its errno: a name too
    long, a loop of links, a file where a directory was needed, a permission refused.
    ``shown``: the path as the caller gave it."""
    quoted = shown_path(shown)
    if exc.errno == errno.ENAMETOOLONG:
        return ToolError(f"path '{quoted}' is too long: each name in a path can be at most "
                         f"{NAME_MAX_BYTES} bytes.")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return ToolError(f"path '{quoted}' {LINK_REFUSAL}.")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"path '{quoted}': a component is a file, not a directory.")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ToolError(f"path '{quoted}': permission denied.")
    return ToolError(f"cannot {doing} '{quoted}': {exc.strerror or type(exc).__name__}.")


def refusing(doing: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a Workspace method whose first argument is a path: an OSError that
    escapes it becomes ``os_refusal``'s ToolError (naming the path as given), so no caller,
    the files panel or a tool, ever gets a bare OSError for a path it typed."""
    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                path = args[0] if args else kwargs.get("path", ".")
                raise os_refusal(exc, os.fspath(path), doing=doing) from None
        return run
    return wrap


def dir_refusal(exc: OSError, shown: str, parent_fd: int, parts: tuple[str, ...],
                label: str) -> ToolError:
    """Why the directory ``parts`` (its last component under ``parent_fd``) would not open.
    The kernel says ELOOP/ENOTDIR for both a link and a file, so the component is looked at
    (without following it) to tell which. ``shown``: the path as the caller gave it;
    ``label``: how the tree is named ("session workspace")."""
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return os_refusal(exc, shown)
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
