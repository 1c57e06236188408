"""Path resolution inside a session workspace: the one place a tool path becomes a file.

Every path a tool touches goes through ``resolve_in_workspace``: relative or absolute,
``..``, and symlinks (realpath, including dangling ones and those in parent directories) are
resolved first, then anything outside the workspace is refused (failure case B33: check the
resolved file, never the string). Whether an inside path is protected (instruction files,
config) is the policy's business (agents/policy.py), not this module's.
"""

from __future__ import annotations

import os
from pathlib import Path

from agents.errors import ToolError


def resolve_in_workspace(workspace: Path, path: str | os.PathLike[str]) -> Path:
    """Return the canonical absolute Path of ``path`` inside ``workspace``.

    Relative paths are taken from the workspace; ``~`` means the workspace (it is the
    command HOME). Raises ToolError when ``path`` is empty, holds a NUL, or resolves outside
    the workspace: "path '../x' is outside the session workspace".
    """
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise ToolError("path is empty")
    if "\x00" in text:
        raise ToolError("path contains a NUL character")
    root = Path(os.path.realpath(workspace))
    if text == "~" or text.startswith("~/"):
        candidate = root / text[2:]
    else:
        candidate = root / text  # an absolute ``text`` replaces ``root`` here
    real = Path(os.path.realpath(candidate))
    if not is_within(root, real):
        raise ToolError(f"path '{text}' is outside the session workspace")
    return real


def is_within(root: Path, path: Path) -> bool:
    """True if canonical ``path`` equals canonical ``root`` or lies below it."""
    return path == root or root in path.parents


def display_path(workspace: Path, real: Path) -> str:
    """``real`` relative to the (canonical) workspace, for tool results; "." for the root."""
    root = Path(os.path.realpath(workspace))
    try:
        rel = real.relative_to(root)
    except ValueError:
        return str(real)
    return str(rel) if str(rel) != "." else "."


def overlaps(a: Path, b: Path) -> bool:
    """True if two canonical paths overlap: equal, or one is a directory above the other
    (hermes-facts §8: compared by path parts, a directory overlaps everything under it)."""
    a = Path(os.path.normcase(a))
    b = Path(os.path.normcase(b))
    return a == b or a in b.parents or b in a.parents
