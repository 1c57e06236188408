"""The workspace panel's file access: list, preview, download and upload (issue 14 item 6).

Every access goes through agents/tools/workspace.py Workspace, the same confinement the
agent's tools use: paths are resolved lexically under the session's workspace, opened with
O_NOFOLLOW component by component, and a symbolic link is listed as a link, never followed
(its target is not read, not even its name's target). Errors are ToolError messages turned
into ValidationError, so a view shows the reason and never a 500. Callers have already
checked access through sessions/selectors.py session_get (write=True for uploads).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.conf import settings
from django.core.exceptions import ValidationError

from agents.errors import ToolError
from agents.tools.workspace import Workspace
from sessions.events import event_append
from sessions.highlight import code_highlight
from sessions.models import Session
from sessions.services import workspace_path

TREE_MAX_ENTRIES = 500
"""Entries listed at most (the panel says when it stopped)."""
TREE_MAX_DEPTH = 6
"""Directory levels listed below the root."""
PREVIEW_MAX_BYTES = 200_000
"""Largest file previewed inline (bytes); larger ones are offered as a download."""
DOWNLOAD_MAX_BYTES = 50_000_000
"""Largest file served as a download (bytes)."""
UPLOAD_MAX_BYTES_DEFAULT = 10_000_000
"""The upload cap (bytes) unless HERMES["UPLOAD_MAX_BYTES"] says otherwise."""
HIDDEN = frozenset({".hermes"})
"""Top-level names the panel does not list (the harness's own spill files)."""
LANGUAGES = {".py": "python", ".js": "javascript", ".ts": "typescript", ".json": "json",
             ".md": "markdown", ".html": "html", ".css": "css", ".sh": "bash",
             ".yml": "yaml", ".yaml": "yaml", ".toml": "toml", ".rs": "rust", ".go": "go",
             ".c": "c", ".h": "c", ".cpp": "cpp", ".java": "java", ".sql": "sql",
             ".rb": "ruby", ".txt": "", ".csv": "", ".ini": "ini", ".xml": "xml"}
"""Pygments lexer names by suffix (sessions/highlight.py); unknown suffixes stay plain."""


def upload_max_bytes() -> int:
    """The upload cap in bytes (HERMES["UPLOAD_MAX_BYTES"], default 10 MB)."""
    return int(settings.HERMES.get("UPLOAD_MAX_BYTES") or UPLOAD_MAX_BYTES_DEFAULT)


def upload_limit_text(limit: int | None = None) -> str:
    """The upload cap as the files panel's label and the refusal both write it: decimal
    megabytes and the exact bytes, "10 MB (10,000,000 bytes)" (a cap under 1 MB: "2,000 bytes"). One wording in both places:
    the label once said "9.5 MB" (binary) beside an error in bytes, two numbers for one cap."""
    limit = upload_max_bytes() if limit is None else limit
    if limit < 1_000_000:  # "0.01 MB" would say less than the bytes beside it
        return f"{limit:,} bytes"
    megabytes = f"{limit / 1_000_000:.2f}".rstrip("0").rstrip(".")
    return f"{megabytes} MB ({limit:,} bytes)"


def upload_too_big_text(name: str, size: int) -> str:
    """The refusal of a file over the cap: "“big.bin” is 11,000,000 bytes, over the upload
    limit of 10 MB (10,000,000 bytes)."."""
    return f"“{name}” is {size:,} bytes, over the upload limit of {upload_limit_text()}."


@dataclass(frozen=True, slots=True)
class Entry:
    """One listed entry: ``path`` relative to the workspace root, ``depth`` (0 at the
    root), ``kind`` 'dir', 'file' or 'link' (or 'other'), ``size`` in bytes (files)."""

    path: str
    name: str
    depth: int
    kind: str
    size: int


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def workspace_for(session: Session) -> Workspace:
    """The session's workspace, confined (agents/tools/workspace.py)."""
    return Workspace(workspace_path(session))


def file_tree(*, session: Session) -> tuple[list[Entry], bool]:
    """The workspace as a depth-first list (directories first, then by name), at most
    TREE_MAX_ENTRIES entries and TREE_MAX_DEPTH levels. Returns (entries, truncated).
    Links are listed, never followed."""
    ws = workspace_for(session)
    out: list[Entry] = []
    truncated = False

    def walk(rel: PurePosixPath, depth: int) -> None:
        nonlocal truncated
        try:
            entries = ws.entries(str(rel))
        except ToolError:
            return
        entries.sort(key=lambda e: (_kind(e[1].st_mode) != "dir", e[0].lower()))
        for name, info in entries:
            if depth == 0 and name in HIDDEN:
                continue
            if len(out) >= TREE_MAX_ENTRIES:
                truncated = True
                return
            path = rel / name if str(rel) != "." else PurePosixPath(name)
            kind = _kind(info.st_mode)
            out.append(Entry(str(path), name, depth, kind, info.st_size if kind == "file" else 0))
            if kind == "dir" and depth + 1 < TREE_MAX_DEPTH:
                walk(path, depth + 1)

    walk(PurePosixPath("."), 0)
    return out, truncated


def _checked(ws: Workspace, path: str, limit: int, what: str) -> int:
    """The size of regular file ``path``; ValidationError when it is missing, not a regular
    file (a link, a directory), outside the workspace, or larger than ``limit`` bytes."""
    try:
        info = ws.lstat(path)
    except ToolError as exc:
        raise ValidationError(str(exc)) from None
    if info is None:
        raise ValidationError(f"No file “{path}” in the workspace.")
    if not stat.S_ISREG(info.st_mode):
        kind = _kind(info.st_mode)
        raise ValidationError(f"“{path}” is a {'symbolic link' if kind == 'link' else kind}; "
                              f"only regular files can be {what}.")
    if info.st_size > limit:
        raise ValidationError(f"“{path}” is {info.st_size:,} bytes; files up to {limit:,} "
                              f"bytes can be {what}.")
    return info.st_size


def file_read(*, session: Session, path: str, limit: int = DOWNLOAD_MAX_BYTES) -> bytes:
    """The bytes of workspace file ``path`` (at most ``limit`` bytes, else ValidationError)."""
    ws = workspace_for(session)
    _checked(ws, path, limit, "downloaded")
    try:
        return ws.read_bytes(path)
    except ToolError as exc:
        raise ValidationError(str(exc)) from None


def file_preview(*, session: Session, path: str) -> dict:
    """{"path", "size", "html" (highlighted, or None), "text" (plain, or None), "binary",
    "too_large"} for the preview pane. A file over PREVIEW_MAX_BYTES is not read."""
    ws = workspace_for(session)
    try:
        size = _checked(ws, path, PREVIEW_MAX_BYTES, "previewed")
    except ValidationError as exc:
        if "bytes can be previewed" in exc.messages[0]:
            return {"path": path, "too_large": True, "size": None, "html": None, "text": None,
                    "binary": False, "message": exc.messages[0]}
        raise
    data = file_read(session=session, path=path, limit=PREVIEW_MAX_BYTES)
    if b"\x00" in data[:8192]:
        return {"path": path, "size": size, "binary": True, "html": None, "text": None,
                "too_large": False}
    text = data.decode("utf-8", errors="replace")
    lang = LANGUAGES.get(PurePosixPath(path).suffix.lower(), "")
    html = code_highlight(text, lang, "") if lang else ""
    return {"path": path, "size": size, "binary": False, "too_large": False,
            "html": html or None, "text": None if html else text, "lang": lang}


def file_upload(*, session: Session, name: str, data: bytes) -> str:
    """Write an uploaded file into the workspace root under its base name (atomic, via
    Workspace.write_bytes). Returns the stored path. ValidationError for an empty or hidden
    name (".x": the harness keeps its own files there), a file over upload_max_bytes(), or
    a name the workspace refuses (a directory there, a link in the way)."""
    base = PurePosixPath((name or "").replace("\\", "/")).name.strip()
    if not base or base in (".", ".."):
        raise ValidationError("The file has no name.")
    if base.startswith("."):
        raise ValidationError(f"“{base}”: names starting with a dot are not accepted "
                              "(the harness keeps its own files under such names).")
    limit = upload_max_bytes()
    if len(data) > limit:
        raise ValidationError(upload_too_big_text(base, len(data)))
    try:
        replaced = workspace_for(session).write_bytes(base, data)
    except ToolError as exc:
        raise ValidationError(str(exc)) from None
    event_append(session_id=session.pk, type="workspace.changed",
                 payload={"path": base, "replaced": replaced, "by": "upload"})
    return base
