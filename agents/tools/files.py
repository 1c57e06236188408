"""File tools: read_file (paged, numbered), write_file, patch (search and replace).

Each tool opens and writes through the confined Workspace (agents/tools/workspace.py: no
symlink is followed, FIFOs and hard-linked files are refused) and reports the
paths it touches so the scheduler can order a read behind the write it depends on.
read_file caps its own output by lines and chars and tells the model how to page on; it is
also how the model pages back a spilled result (agents/tools/spill.py), which is why its
footer and the spill instruction speak the same offset/limit language (failure case B36).
Searching lives in search.py; commands in terminal.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agents.errors import ToolError
from agents.messages import ToolSpec
from agents.tools import Access, PathScope, ToolContext, ToolOutput
from agents.tools.workspace import Workspace
from agents.wording import plural

READ_DEFAULT_LIMIT = 500
"""Lines per read_file call when the model gives no limit."""
READ_MAX_LIMIT = 2_000
"""Most lines one call may ask for."""
READ_MAX_CHARS = 100_000
"""read_file's own output cap in chars (hermes-facts §9: the tool registers 100,000; the
per-result spill layer exempts it, so it must stop itself)."""
READ_MAX_LINE_CHARS = 2_000
"""Longer lines are cut with a marker, so a minified file cannot fill the window."""
BINARY_SNIFF_BYTES = 8_192


def is_binary(sample: bytes) -> bool:
    """True if ``sample`` (a file's first bytes) looks binary: a NUL byte."""
    return b"\x00" in sample


def read_text(ws: Workspace, path: str, shown: str) -> str:
    """Whole-file text for patch: UTF-8 strictly, binary refused. Opened through the
    confined workspace (no link followed, regular single-link files only). Raises ToolError."""
    data = ws.read_bytes(path)
    if is_binary(data[:BINARY_SNIFF_BYTES]):
        raise ToolError(f"'{shown}' is a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"'{shown}' is not valid UTF-8 text") from None


def _path_arg(args: dict[str, Any], key: str = "path") -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"'{key}' must be a string")
    return value


def _resolved(targets: list[tuple[str, Access]], ctx: ToolContext) -> PathScope:
    """A call's declared targets resolved in the workspace (the scheduler's scope)."""
    ws = Workspace(ctx.workspace)
    return [(ws.resolve(path), access) for path, access in targets]


class ReadFile:
    """read_file {path, offset=1, limit=500} → numbered lines ("     1\\tline") and a footer
    telling how to continue when more remain. Binary files are refused."""

    spec = ToolSpec(
        name="read_file",
        description=(
            "Read a text file from the workspace. Returns numbered lines. Use offset "
            "(1-based first line) and limit (number of lines) to page through large files."),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "offset": {"type": "integer", "minimum": 1,
                           "description": "First line to read, 1-based. Default 1."},
                "limit": {"type": "integer", "minimum": 1,
                          "description": "Number of lines to read. Default 500, max 2000."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    )
    read_only = True
    interactive = False

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return [(_path_arg(args), "read")]

    def command(self, args: dict[str, Any]) -> str | None:
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return _resolved(self.targets(args), ctx)

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        ws = Workspace(ctx.workspace)
        path = _path_arg(args)
        real = ws.resolve(path)
        offset = int(args.get("offset", 1))
        limit = min(int(args.get("limit", READ_DEFAULT_LIMIT)), READ_MAX_LIMIT)
        if offset < 1 or limit < 1:
            raise ToolError("offset and limit must be at least 1")
        shown = ws.display(real)
        with os.fdopen(ws.open_file(path), "rb") as handle:
            if is_binary(handle.read(BINARY_SNIFF_BYTES)):
                size = os.fstat(handle.fileno()).st_size
                raise ToolError(f"'{shown}' is a binary file ({size} bytes); read_file "
                                "reads text only")
            handle.seek(0)
            return self._page(handle, shown, offset, limit)

    def _page(self, handle: Any, shown: str, offset: int, limit: int) -> ToolOutput:
        out: list[str] = []
        chars = 0
        total = 0
        last_shown = offset - 1
        for number, raw in enumerate(handle, start=1):
            total = number
            if number < offset or number >= offset + limit or chars >= READ_MAX_CHARS:
                continue
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(line) > READ_MAX_LINE_CHARS:
                line = (f"{line[:READ_MAX_LINE_CHARS]}… [line cut: {len(line)} chars; "
                        "use terminal to see all of it]")
            entry = f"{number:6d}\t{line}"
            out.append(entry)
            chars += len(entry) + 1
            last_shown = number
        if total == 0:
            return ToolOutput(text=f"[{shown} is empty: 0 lines]")
        if offset > total:
            raise ToolError(f"offset {offset} is past the end of '{shown}' "
                            f"({plural(total, 'line')})")
        if last_shown < total:
            out.append(f"[showing lines {offset}-{last_shown} of {total} in {shown}; "
                       f"continue with read_file(path=\"{shown}\", offset={last_shown + 1})]")
        return ToolOutput(text="\n".join(out), metadata={"total_lines": total})


class WriteFile:
    """write_file {path, content}: create or replace a text file; parent dirs are created."""

    spec = ToolSpec(
        name="write_file",
        description=(
            "Create or overwrite a text file in the workspace with the given content. "
            "Parent directories are created. Prefer patch for small edits."),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "content": {"type": "string", "description": "The complete new file content."},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    )
    read_only = False
    interactive = False

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return [(_path_arg(args), "write")]

    def command(self, args: dict[str, Any]) -> str | None:
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return _resolved(self.targets(args), ctx)

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        ws = Workspace(ctx.workspace)
        path = _path_arg(args)
        real = ws.resolve(path)
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("'content' must be a string")
        shown = ws.display(real)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("'content' is not valid Unicode text (lone surrogate)") from None
        existed = ws.write_bytes(path, data)
        lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        verb = "replaced" if existed else "created"
        return ToolOutput(text=f"{verb} {shown} ({plural(len(content), 'char')}, "
                               f"{plural(lines, 'line')})",
                          metadata={"created": not existed, "chars": len(content),
                                    "lines": lines})


class Patch:
    """patch: exact search and replace in one file ({path, old_string, new_string,
    replace_all=false}) or several ({edits: [{path, old_string, new_string, replace_all?}]}),
    applied all or nothing. A missing or ambiguous old_string is an error naming the edit."""

    spec = ToolSpec(
        name="patch",
        description=(
            "Replace exact text in a file: old_string must occur exactly once unless "
            "replace_all is true. For several edits at once pass edits=[{path, old_string, "
            "new_string}, ...]; they are applied all or nothing."),
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "old_string": {"type": "string", "description": "Exact text to find."},
                "new_string": {"type": "string", "description": "Replacement text."},
                "replace_all": {"type": "boolean",
                                "description": "Replace every occurrence. Default false."},
                "edits": {
                    "type": "array",
                    "description": "Several edits, applied atomically (all or nothing).",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "old_string": {"type": "string"},
                            "new_string": {"type": "string"},
                            "replace_all": {"type": "boolean"},
                        },
                        "required": ["path", "old_string", "new_string"],
                    },
                },
            },
            "additionalProperties": False,
        },
    )
    read_only = False
    interactive = False

    @staticmethod
    def _edits(args: dict[str, Any]) -> list[dict[str, Any]]:
        if "edits" in args:
            if any(k in args for k in ("path", "old_string", "new_string")):
                raise ToolError("pass either edits or path/old_string/new_string, not both")
            edits = args["edits"]
            if not isinstance(edits, list) or not edits:
                raise ToolError("'edits' must be a non-empty list")
            return [e if isinstance(e, dict) else {} for e in edits]
        return [args]

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return [(_path_arg(e), "write") for e in self._edits(args)]

    def command(self, args: dict[str, Any]) -> str | None:
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return _resolved(self.targets(args), ctx)

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        ws = Workspace(ctx.workspace)
        edits = self._edits(args)
        originals: dict[Path, str] = {}
        updated: dict[Path, str] = {}
        counts: dict[Path, int] = {}
        for number, edit in enumerate(edits, start=1):
            label = f"edit {number}: " if len(edits) > 1 else ""
            real = ws.resolve(_path_arg(edit))
            shown = ws.display(real)
            old, new = edit.get("old_string"), edit.get("new_string")
            if not isinstance(old, str) or not isinstance(new, str):
                raise ToolError(f"{label}old_string and new_string must be strings")
            if old == "":
                raise ToolError(f"{label}old_string is empty; use write_file to create files")
            if real not in updated:
                originals[real] = read_text(ws, str(real), shown)
                updated[real] = originals[real]
            found = updated[real].count(old)
            if found == 0:
                raise ToolError(f"{label}old_string not found in {shown}; nothing was changed")
            if found > 1 and not edit.get("replace_all", False):
                raise ToolError(
                    f"{label}old_string occurs {found} times in {shown}; add surrounding "
                    "context to make it unique or set replace_all; nothing was changed")
            updated[real] = updated[real].replace(old, new)
            counts[real] = counts.get(real, 0) + found
        self._write_all(ws, updated, originals)
        lines = [f"patched {ws.display(p)} ({plural(n, 'replacement')})"
                 for p, n in counts.items()]
        return ToolOutput(text="\n".join(lines),
                          metadata={"replacements": sum(counts.values()), "files": len(counts)})

    @staticmethod
    def _write_all(ws: Workspace, updated: dict[Path, str], originals: dict[Path, str]) -> None:
        """Write every file; on a failure restore the ones already written."""
        written: list[Path] = []
        try:
            for real, text in updated.items():
                ws.write_bytes(str(real), text.encode("utf-8"))
                written.append(real)
        except (OSError, ToolError) as exc:
            for real in written:
                ws.write_bytes(str(real), originals[real].encode("utf-8"))
            raise ToolError(f"patch failed while writing ({exc}); no file was changed") from None
