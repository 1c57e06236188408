"""The files that steer future sessions stay as they were around every command, unless the
policy saw the write and someone allowed it.

The policy asks before a command it can read writes an instruction file (agents/policy,
step 7). A command it cannot read — a script, ``python -c``, a build tool's recipe — can
write one anyway, and the next session's prompt would carry the text as "project context"
(seed, "The gate ..."; issue 8's residual: programs the policy does not model). So the
terminal and execute_code tools snapshot what actually steers a later session before the
command and compare after it; anything changed is put back and the model is told why.

What steers, here: the context files the prompt loads from the workspace root
(agents/prompt.py, any case: HERMES.md, .hermes.md, AGENTS.md, CLAUDE.md, .cursorrules,
SOUL.md, SKILL.md), every entry under ``.hermes/skills`` (the workspace's skills) and
``.git/hooks`` of an existing repository (programs git runs on later commands). Not
covered: ``.git/config`` (ordinary git commands rewrite it: remote add, branch tracking),
instruction files below the root (no prompt loads them) and files outside the workspace
(the confinement layer's business).

A change is kept when the call's policy decision allowed it knowing it touched an
instruction file (a human's approval of that card, an approved rule, the session's
bypass): ``sanctioned`` is then true. Every read and write goes through the confined
Workspace's directory fds; no link is followed. No Django.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from agents.errors import ToolError
from agents.tools.workspace import Workspace

T = TypeVar("T")

PROTECTED_NAMES = frozenset({"agents.md", "claude.md", "hermes.md", ".hermes.md", "soul.md",
                             ".cursorrules", "skill.md"})
"""Basenames (compared case-insensitively) of files that steer future sessions. The policy
asks before a write to one anywhere, or to any file under a ``skills`` directory
(agents/policy/paths.py; hermes-facts §10, seed "The gate ..."); this module guards the ones
a prompt loads."""

STEERING_TREES = (".hermes/skills", ".git/hooks")
"""Directories (relative to the workspace root) whose every entry is guarded."""
MAX_ENTRIES = 5_000
MAX_BYTES = 32 * 1024 * 1024
"""What one snapshot may hold; a tree beyond it is refused (fail closed: an unguarded
command could rewrite what was not recorded)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One guarded path: ``kind`` "file" (``data`` its bytes), "link" (``data`` the target),
    "dir" or "other" (FIFO, socket, device); ``mode``: permission bits."""

    kind: str
    data: bytes = b""
    mode: int = 0


Snapshot = dict[str, Entry]
"""Workspace-relative POSIX path -> Entry, for every guarded path that exists."""


class TooLarge(ToolError):
    """The guarded trees exceed MAX_ENTRIES / MAX_BYTES: the command is not run."""


def _entry_at(dir_fd: int, name: str) -> Entry | None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return Entry("link", os.fsencode(os.readlink(name, dir_fd=dir_fd)), mode)
    if stat.S_ISDIR(info.st_mode):
        return Entry("dir", b"", mode)
    if not stat.S_ISREG(info.st_mode):
        return Entry("other", b"", mode)
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                 dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        return Entry("file", handle.read(MAX_BYTES + 1), mode)


class _Recorder:
    """Entries recorded so far, with running totals against the caps."""

    def __init__(self) -> None:
        self.snap: Snapshot = {}
        self.entries = 0
        self.bytes = 0

    def add(self, path: str, entry: Entry | None) -> None:
        if entry is None:
            return
        self.snap[path] = entry
        self.entries += 1
        self.bytes += len(entry.data)
        if self.entries > MAX_ENTRIES or self.bytes > MAX_BYTES:
            raise TooLarge(f"the workspace's skills and git hooks exceed {MAX_ENTRIES} "
                           f"entries or {MAX_BYTES // 2**20} MiB; commands are not run until "
                           "they are smaller (they could not be guarded)")


def steering_snapshot(ws: Workspace, *, lenient: bool = False) -> Snapshot:
    """Every guarded path of ``ws`` that exists now (see the module docstring). Raises
    TooLarge past the caps; ToolError when the root cannot be opened. ``lenient`` (the
    look after a command): a tree past the caps is recorded as one "too-large" entry, so
    it differs from any earlier snapshot and is rebuilt whole: growth cannot hide a change."""
    rec = _Recorder()
    parents: dict[str, Entry | None] = {}
    with ws.dir(".") as root:
        for name in sorted(os.listdir(root)):
            if name.lower() in PROTECTED_NAMES:
                rec.add(name, _entry_at(root, name))
        for parent in (".hermes", ".git"):
            parents[parent] = entry = _entry_at(root, parent)
            # .git is recorded as is (steering_changes needs to know a repository was there);
            # .hermes only when it is not a plain directory: the harness makes it, a command
            # may too, and only a link or file there (redirecting skills) is a change.
            if parent == ".git" or (entry is not None and entry.kind != "dir"):
                rec.add(parent, entry)
    for tree in STEERING_TREES:
        entry = parents[tree.split("/", 1)[0]]
        if entry is None or entry.kind != "dir":
            continue  # absent, or a link recorded above: nothing below it to walk
        kept = dict(rec.snap)
        try:
            _walk_tree(ws, tree, rec.add)
        except TooLarge:
            if not lenient:
                raise
            rec.snap = {**kept, tree: Entry("too-large")}
    return rec.snap


def _walk_tree(ws: Workspace, tree: str, add: Callable[[str, Entry | None], None]) -> None:
    parent, name = tree.rsplit("/", 1)
    try:
        with ws.dir(parent) as parent_fd:
            top = _entry_at(parent_fd, name)
    except ToolError:
        return  # the parent went away or became a link between two looks
    add(tree, top)
    if top is None or top.kind != "dir":
        return
    with ws.dir(tree) as top_fd:
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top_fd,
                                                            follow_symlinks=False):
            base = tree if dirpath == "." else f"{tree}/{os.path.normpath(dirpath)}"
            dirnames.sort()
            for entry_name in sorted(dirnames + filenames):
                add(f"{base}/{entry_name}", _entry_at(dir_fd, entry_name))


def steering_changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Paths whose entry differs (created, removed, rewritten, re-linked), sorted. Paths in
    ``.git`` count only while a repository is there before and after: a new one
    (``git init``, ``git clone``) brings git's own sample hooks, and a removed one takes its
    hooks with it; neither steers anything."""
    git_kept = before.get(".git", Entry("")).kind == "dir" == after.get(".git", Entry("")).kind
    changed = []
    for path in sorted(set(before) | set(after)):
        if (path == ".git" or path.startswith(".git/")) and not git_kept:
            continue
        if before.get(path) != after.get(path):
            changed.append(path)
    return changed


def _remove(ws: Workspace, path: str) -> None:
    parent, _, name = path.rpartition("/")
    try:
        with ws.dir(parent or ".") as dir_fd:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                _rmtree_at(dir_fd, name)
            else:
                os.unlink(name, dir_fd=dir_fd)
    except (FileNotFoundError, ToolError):
        return  # already gone, or its parent is: restoring the parent rebuilds it


def _rmtree_at(dir_fd: int, name: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                 dir_fd=dir_fd)
    try:
        for child in os.listdir(fd):
            info = os.stat(child, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                _rmtree_at(fd, child)
            else:
                os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def steering_restore(ws: Workspace, before: Snapshot, after: Snapshot, changed: list[str]
                     ) -> None:
    """Put every ``changed`` path back as ``before`` had it (removed when it did not exist),
    parents before children; a directory that is still one keeps its other entries (each
    changed child is listed itself) unless ``after`` could not list it ("too-large"), when
    it is rebuilt whole. Raises ToolError or OSError when a path cannot be restored."""
    for path in sorted(changed, key=lambda p: (p.count("/"), p)):
        old = before.get(path)
        listed = after.get(path, Entry("")).kind == "dir"
        if old is not None and old.kind == "dir" and listed and _lstat_kind(ws, path) == "dir":
            with ws.dir(path) as fd:
                os.chmod(fd, old.mode)
            continue
        _remove(ws, path)
        if old is None or old.kind == "other":
            continue
        parent, _, name = path.rpartition("/")
        with ws.dir(parent or ".", create=True) as dir_fd:
            if old.kind == "dir":
                os.mkdir(name, old.mode, dir_fd=dir_fd)
            elif old.kind == "link":
                os.symlink(os.fsdecode(old.data), name, dir_fd=dir_fd)
        if old.kind == "file":
            ws.write_bytes(path, old.data)
            with ws.dir(parent or ".") as dir_fd:
                os.chmod(name, old.mode, dir_fd=dir_fd, follow_symlinks=False)


def _lstat_kind(ws: Workspace, path: str) -> str | None:
    try:
        info = ws.lstat(path)
    except ToolError:
        return None
    if info is None:
        return None
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "link" if stat.S_ISLNK(info.st_mode) else "file"


def run_guarded(ws: Workspace, run: Callable[[], T], *, sanctioned: bool
                ) -> tuple[T, list[str]]:
    """``run()`` (one command on the backend, or a script with its tool calls) with the
    steering files guarded: returns what it returned and the paths that were changed and put back (empty when none were, or when
    ``sanctioned``). Raises TooLarge before running when the trees cannot be recorded, and
    ToolError when a change cannot be undone (the model and the user must know)."""
    before = steering_snapshot(ws)
    result = run()
    if sanctioned:
        return result, []
    after = steering_snapshot(ws, lenient=True)
    changed = steering_changes(before, after)
    if changed:
        try:
            steering_restore(ws, before, after, changed)
        except OSError as exc:
            raise ToolError(f"the command changed {', '.join(changed[:8])} (files that steer "
                            f"future sessions) and undoing it failed: {exc}") from None
    return result, changed


def steering_notice(changed: list[str]) -> str:
    """The line appended to the tool result when files were put back."""
    shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8
                                      else "")
    return (f"[the command changed {shown}: files that steer future sessions; the change was "
            "undone. To change them, use write_file or patch, which ask the user first]")
