"""Removing a session's workspace tree, the way agents/tools/workspace.py opens one: every
directory is opened with O_NOFOLLOW|O_DIRECTORY relative to its parent's descriptor, so no
symlink is ever followed out of the tree (issue 8 finding 1's race applies to deleting as
much as to reading: the agent's commands can plant a link anywhere in the workspace). No
Django here."""

from __future__ import annotations

import errno
import os
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How every directory is opened (as agents/tools/workspace.py opens them): a link fails."""


def tree_remove(parent: Path | str, name: str) -> bool:
    """Remove directory ``name`` of ``parent`` and everything below it, never following a
    link: each directory is opened with O_NOFOLLOW|O_DIRECTORY from its parent's fd and its
    entries are removed by name relative to that fd, so a symlink (to a file or a directory
    outside) is removed as a link and its target is untouched, and a component swapped for
    a link while this runs fails to open as a directory and is unlinked as a link. ``name``
    itself being a link: the link is removed, not what it points at. Iterative (an agent
    can nest directories deeper than Python's recursion limit). Returns False when ``name``
    did not exist; raises OSError when something could not be removed."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a single directory name: {name!r}")
    parent_fd = os.open(parent, _DIR_FLAGS)
    try:
        try:
            top = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            os.unlink(name, dir_fd=parent_fd)  # a link (or a file) where the tree was
            return True
        # One (fd, its entries not yet removed, its name in the parent) per open directory.
        stack: list[tuple[int, list[str], str]] = [(top, os.listdir(top), name)]
        try:
            while stack:
                fd, pending, own = stack[-1]
                if not pending:
                    stack.pop()
                    os.close(fd)
                    os.rmdir(own, dir_fd=stack[-1][0] if stack else parent_fd)
                    continue
                entry = pending.pop()
                try:
                    child = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    os.unlink(entry, dir_fd=fd)  # a file, a link, a FIFO, a socket
                    continue
                try:
                    stack.append((child, os.listdir(child), entry))
                except BaseException:
                    os.close(child)
                    raise
        finally:
            for fd, _, _ in stack:
                os.close(fd)
        return True
    finally:
        os.close(parent_fd)
