"""search_files: a regex search over the session workspace, "path:line: text" per hit.

Pure Python over the resolved search root (no ripgrep dependency), in sorted order so the
same workspace gives the same bytes. It skips .git, the spill directory (spilled copies of
earlier results would echo every hit back), binary files, and (through the confined
Workspace) every symlink, hard-linked file, FIFO and socket. It reserves its root as a reader, so a search batched after a
write into the same tree runs behind it (seed, "Dispatch").
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from typing import Any

from agents.errors import ToolError
from agents.messages import ToolSpec
from agents.tools import Access, PathScope, ToolContext, ToolOutput
from agents.tools.files import BINARY_SNIFF_BYTES, is_binary
from agents.tools.workspace import LINK_REFUSAL, Workspace

MAX_HITS = 200
"""Hits returned before the search stops and says so."""
MAX_HIT_CHARS = 300
"""Longest line text shown per hit."""
MAX_FILE_BYTES = 5_000_000
"""Larger files are skipped (logs and dumps belong to terminal tools like grep)."""
SKIP_DIRS = frozenset({".git"})


class SearchFiles:
    """search_files {pattern (regex), path=".", glob?} over the workspace."""

    spec = ToolSpec(
        name="search_files",
        description=(
            "Search file contents in the workspace with a regular expression (Python re "
            "syntax). Returns matches as path:line: text. Narrow with path (a file or "
            "directory) and glob (e.g. '*.py')."),
        input_schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to find."},
                "path": {"type": "string",
                         "description": "File or directory to search, default '.'."},
                "glob": {"type": "string",
                         "description": "Only files whose name (or relative path) matches."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    )
    read_only = True
    interactive = False

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        path = args.get("path") or "."
        if not isinstance(path, str):
            raise ToolError("'path' must be a string")
        return [(path, "read")]

    def command(self, args: dict[str, Any]) -> str | None:
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        ws = Workspace(ctx.workspace)
        return [(ws.resolve(path), access) for path, access in self.targets(args)]

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("'pattern' must be a non-empty string")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        ws = Workspace(ctx.workspace)
        path = args.get("path") or "."
        root = ws.resolve(path)
        info = ws.lstat(path) if root != ws.root else os.stat(ws.root)
        if info is None:
            raise ToolError(f"'{ws.display(root)}' does not exist")
        glob = args.get("glob") or None
        hits: list[str] = []
        files = 0
        for shown, fd in _files(ws, path, info, _skips(ws, ctx)):
            if glob and not _glob_match(glob, shown):
                continue
            files += 1
            if _search_file(fd, shown, regex, hits):
                note = (f"[stopped at {MAX_HITS} matches; narrow the pattern, path or glob "
                        "to see the rest]")
                return ToolOutput(text="\n".join([*hits, note]),
                                  metadata={"hits": len(hits), "truncated": True})
        if not hits:
            return ToolOutput(text=f"no matches for {pattern!r} in {files} file(s) under "
                                   f"{ws.display(root)}",
                              metadata={"hits": 0, "truncated": False})
        return ToolOutput(text="\n".join(hits), metadata={"hits": len(hits), "truncated": False})


def _glob_match(glob: str, shown: str) -> bool:
    """A glob with a "/" matches the relative path, otherwise the file name."""
    target = shown if "/" in glob else os.path.basename(shown)
    return fnmatch.fnmatchcase(target, glob)


def _skips(ws: Workspace, ctx: ToolContext) -> frozenset[str]:
    """Directory names and root-relative paths the walk never enters."""
    skip = set(SKIP_DIRS)
    if ctx.spill_dir is not None:
        try:
            skip.add(str(ws.relative(str(ctx.spill_dir))))
        except ToolError:
            pass
    return frozenset(skip)


def _files(ws: Workspace, path: str, info: os.stat_result,
           skip: frozenset[str]) -> Iterator[tuple[str, int]]:
    """(shown path, open fd) of every searchable file under ``path``, sorted, through the
    confined workspace: links, hard-linked files, FIFOs and sockets are never opened."""
    if stat.S_ISLNK(info.st_mode):
        raise ToolError(f"path '{path}' {LINK_REFUSAL}")
    if not stat.S_ISDIR(info.st_mode):
        fd = ws.open_file(path)
        try:
            yield ws.display(ws.resolve(path)), fd
        finally:
            os.close(fd)
        return
    for rel, fd in ws.walk_files(path, skip=skip):
        yield str(rel), fd


def _search_file(fd: int, shown: str, regex: re.Pattern[str], hits: list[str]) -> bool:
    """Append hits from one open file; True once MAX_HITS is reached. The fd stays open
    (its owner closes it)."""
    try:
        if os.fstat(fd).st_size > MAX_FILE_BYTES:
            return False
        with os.fdopen(os.dup(fd), "rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                return False
            handle.seek(0)
            for number, raw in enumerate(handle, start=1):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if regex.search(line):
                    if len(line) > MAX_HIT_CHARS:
                        line = line[:MAX_HIT_CHARS] + "…"
                    hits.append(f"{shown}:{number}: {line}")
                    if len(hits) >= MAX_HITS:
                        return True
    except OSError:
        return False
    return False
