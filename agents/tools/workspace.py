"""The confined workspace: the one object through which a tool path becomes a file.

Every file-touching tool (read_file, write_file, patch, search_files, the skills, spill,
context-file discovery) opens, lists and writes through ``Workspace``. The agent's own
commands can create anything inside the workspace (symlinks to host files, hard links,
FIFOs, sockets, devices where permitted) and can swap a component for a link at any moment,
so "resolve the path, check the prefix, then open" is a race (issue 8 finding 1;
sandbox-notes, "Opening files under a root"). Instead every open walks the path one
component at a time from a directory file descriptor:

- each directory component is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to the
  previous one (``dir_fd``), so a symlink anywhere on the way fails with ELOOP/ENOTDIR;
- the last component is opened with ``O_NOFOLLOW | O_NONBLOCK`` and then ``fstat``-ed: only
  regular files are read (a FIFO would block the worker, a device or socket is no file);
- a regular file with more than one hard link is refused for reading: it may be a second
  name of a file outside the workspace (``ln /host/secret ws/x`` needs no symlink), and the
  inode alone cannot say which name is the original;
- writes go to a fresh temp file created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in the
  already-opened parent directory and are renamed over the name, so a link at the last
  component is replaced, never written through.

Paths are interpreted lexically first: relative to the root, ``~`` meaning the root, an
absolute path only when it lies under the root, ``..`` only while it stays inside. Because
no symlink is ever followed, the lexical reading is what the kernel opens.

Whether an inside path is protected (instruction files, config) is the policy's business
(agents/policy/__init__.py), not this module's. No Django here. No bare OSError leaves a
method: the kernel's word on a path (too long, a loop…) is a ToolError (refusals.py).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from agents.errors import ToolError
from agents.tools.refusals import LINK_REFUSAL, dir_refusal, os_refusal, refusing

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class MissingPath(ToolError):
    """A component of the path does not exist."""


class Workspace:
    """A directory tree opened without following links (see the module docstring).

    ``root``: the directory (its own path is trusted: the application chose it; it is
    canonicalised once). ``label``: how errors name the tree ("session workspace" for the
    session's, "skills directory" for the deployment's). Methods take tool paths (str) and
    raise ToolError with a message the model can read; nothing here follows a symlink.
    """

    def __init__(self, root: Path | str, *, label: str = "session workspace"):
        self.root = Path(os.path.realpath(root))
        self._roots = tuple(dict.fromkeys((PurePosixPath(self.root),
                                           PurePosixPath(os.path.abspath(root)))))
        self.label = label

    # -- paths ---------------------------------------------------------------------------

    def relative(self, path: str | os.PathLike[str]) -> PurePosixPath:
        """The lexical path of ``path`` below the root ("." for the root itself).

        Raises ToolError when ``path`` is empty, holds a NUL, or lies outside the root:
        "path '../x' is outside the session workspace".
        """
        text = os.fspath(path)
        if not isinstance(text, str) or not text.strip():
            raise ToolError("path is empty")
        if "\x00" in text:
            raise ToolError("path contains a NUL character")
        if text == "~" or text.startswith("~/"):
            text = text[2:] or "."
        if text.startswith("/"):
            # An absolute path counts when it spells the root as given or canonically.
            absolute = PurePosixPath(os.path.normpath(text))
            for root in self._roots:
                if absolute == root or root in absolute.parents:
                    text = str(absolute.relative_to(root)) if absolute != root else "."
                    break
            else:
                raise ToolError(f"path '{os.fspath(path)}' is outside the {self.label}")
        parts: list[str] = []
        for part in PurePosixPath(text).parts:
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise ToolError(f"path '{os.fspath(path)}' is outside the {self.label}")
                parts.pop()
            else:
                parts.append(part)
        return PurePosixPath(*parts) if parts else PurePosixPath(".")

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The absolute Path ``path`` names under the root, for scheduling scopes and display.

        Also refuses early (ToolError) when a component that exists now is a symlink, so the
        model gets a clear message; the refusal that matters happens again at open time.
        """
        rel = self.relative(path)
        here = self.root
        for part in rel.parts:
            here = here / part
            try:
                info = os.lstat(here)
            except OSError:
                break
            if stat.S_ISLNK(info.st_mode):
                raise ToolError(f"path '{os.fspath(path)}' {LINK_REFUSAL}")
        return self.root / rel

    def display(self, real: Path) -> str:
        """``real`` relative to the root, for tool results; "." for the root."""
        try:
            rel = Path(real).relative_to(self.root)
        except ValueError:
            return str(real)
        return str(rel) if str(rel) != "." else "."

    # -- opening -------------------------------------------------------------------------

    def _root_fd(self) -> int:
        try:
            return os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise ToolError(f"the {self.label} cannot be opened: {exc.strerror}") from None

    def _walk_dirs(self, parts: tuple[str, ...], shown: str, *, create: bool = False) -> int:
        """An fd of the directory ``parts`` below the root, every component opened with
        O_NOFOLLOW|O_DIRECTORY from its parent's fd; missing ones made when ``create``."""
        fd = self._root_fd()
        try:
            for depth, part in enumerate(parts, 1):
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise MissingPath(f"'{shown}' does not exist") from None
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                        self._own(part, fd)
                    except FileExistsError:
                        pass
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
            return fd
        except OSError as exc:
            try:
                refusal = dir_refusal(exc, shown, fd, parts[:depth], self.label)
            finally:
                os.close(fd)
            raise refusal from None
        except BaseException:
            os.close(fd)
            raise

    def open_dir(self, path: str | os.PathLike[str], *, create: bool = False) -> int:
        """A directory fd for ``path`` (O_CLOEXEC; the caller closes it). ``create`` makes
        missing directories. Raises ToolError for links, non-directories, missing paths."""
        rel = self.relative(path)
        parts = () if str(rel) == "." else rel.parts
        return self._walk_dirs(parts, os.fspath(path), create=create)

    @contextmanager
    def dir(self, path: str | os.PathLike[str], *, create: bool = False) -> Iterator[int]:
        """``with ws.dir(path) as fd``: ``open_dir`` that closes the fd afterwards."""
        fd = self.open_dir(path, create=create)
        try:
            yield fd
        finally:
            os.close(fd)

    def _split(self, path: str | os.PathLike[str]) -> tuple[tuple[str, ...], str]:
        rel = self.relative(path)
        if str(rel) == ".":
            raise ToolError(f"'{os.fspath(path)}' is a directory")
        return rel.parts[:-1], rel.parts[-1]

    def open_file(self, path: str | os.PathLike[str]) -> int:
        """A read-only fd of the regular file ``path`` (the caller closes it).

        Raises ToolError when any component is a symlink, the file is missing, a directory,
        a FIFO, socket or device ("not a regular file"), or has more than one hard link.
        """
        shown = os.fspath(path)
        parents, name = self._split(path)
        dir_fd = self._walk_dirs(parents, shown)
        try:
            return open_regular_at(dir_fd, name, shown)
        finally:
            os.close(dir_fd)

    def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """The whole content of the regular file ``path`` (see ``open_file``)."""
        with os.fdopen(self.open_file(path), "rb") as handle:
            return handle.read()

    @refusing("look at")
    def lstat(self, path: str | os.PathLike[str]) -> os.stat_result | None:
        """The entry's own stat (a link is reported as a link), None when it or a parent is
        missing. Raises ToolError when a parent component is a link."""
        parents, name = self._split(path)
        try:
            dir_fd = self._walk_dirs(parents, os.fspath(path))
        except MissingPath:
            return None
        try:
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(dir_fd)

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> bool:
        """Create or replace ``path`` atomically (temp file + rename in the opened parent);
        parents are created. Returns True when a file was replaced. A link or hard link at
        the name is replaced, not written through; a directory there is refused."""
        shown = os.fspath(path)
        parents, name = self._split(path)
        dir_fd = self._walk_dirs(parents, shown, create=True)
        try:
            try:
                old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and stat.S_ISDIR(old.st_mode):
                raise ToolError(f"'{shown}' is a directory")
            tmp, fd = self._create_temp(dir_fd, name)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    if old is not None and stat.S_ISREG(old.st_mode):
                        os.fchmod(handle.fileno(), stat.S_IMODE(old.st_mode))
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dir_fd)
                except OSError:
                    pass
                raise
            return old is not None
        except OSError as exc:
            raise os_refusal(exc, shown, doing="write") from None
        finally:
            os.close(dir_fd)

    def _create_temp(self, dir_fd: int, name: str) -> tuple[str, int]:
        """A fresh temp file next to ``name``: (its name, an fd open for writing)."""
        for attempt in range(100):
            tmp = f".{name[:200]}.{os.getpid()}.{attempt}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                continue
            try:
                self._fown(fd)
            except BaseException:
                os.close(fd)
                raise
            return tmp, fd
        raise ToolError(f"no free temporary name next to '{name}'")

    def create_exclusive(self, directory: str | os.PathLike[str], name: str,
                         data: bytes) -> bool:
        """Create ``directory/name`` (parents made) only if the name is free; False when it
        is taken (by anything, links included). Raises ToolError for a linked parent."""
        with self.dir(directory, create=True) as dir_fd:
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                return False
            except OSError as exc:
                raise os_refusal(exc, f"{os.fspath(directory)}/{name}", doing="write") from None
            self._fown(fd)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return True

    def _owner(self) -> tuple[int, int] | None:
        """The root directory's owner when files the worker makes must be handed to it (the
        sandbox runs commands as an unprivileged uid that owns the workspace)."""
        if os.geteuid() != 0:
            return None
        info = os.stat(self.root)
        return None if info.st_uid == 0 else (info.st_uid, info.st_gid)

    def _fown(self, fd: int) -> None:
        owner = self._owner()
        if owner is not None:
            os.fchown(fd, *owner)

    def _own(self, name: str, dir_fd: int) -> None:
        owner = self._owner()
        if owner is not None:
            os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)

    # -- listing -------------------------------------------------------------------------

    @refusing("list")
    def entries(self, path: str | os.PathLike[str] = ".") -> list[tuple[str, os.stat_result]]:
        """(name, own stat) of each entry of directory ``path``, sorted by name; links are
        reported as links, never followed."""
        with self.dir(path) as fd:
            out = []
            for name in sorted(os.listdir(fd)):
                try:
                    out.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
                except OSError:  # gone meanwhile, or not ours to look at: not listed
                    continue
            return out

    def walk_files(self, path: str | os.PathLike[str] = ".", *,
                   skip: frozenset[str] = frozenset()) -> Iterator[tuple[PurePosixPath, int]]:
        """Yield (path relative to the root, open read fd) for every readable regular file
        under directory ``path`` in sorted order; the caller must not keep the fd past the
        next iteration (it is closed then). Symlinked dirs and files, hard-linked files,
        FIFOs, sockets and devices are skipped; so are directories named in ``skip``
        (relative paths from the root, e.g. ".git", ".hermes/spill")."""
        base = self.relative(path)
        with self.dir(path) as top:
            for dirpath, dirnames, filenames, dir_fd in os.fwalk(
                    ".", dir_fd=top, follow_symlinks=False):
                here = base / dirpath if dirpath != "." else base
                here = PurePosixPath(os.path.normpath(here))
                dirnames[:] = sorted(d for d in dirnames
                                     if d not in skip and str(here / d) not in skip)
                for name in sorted(filenames):
                    try:
                        fd = open_regular_at(dir_fd, name, name)
                    except ToolError:
                        continue
                    try:
                        yield here / name, fd
                    finally:
                        os.close(fd)


def open_regular_at(dir_fd: int, name: str, shown: str) -> int:
    """Open ``name`` in ``dir_fd`` for reading without following a link or blocking on a
    FIFO; return the fd only for a regular file with one link. Raises ToolError."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ToolError(f"file '{shown}' does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise ToolError(f"path '{shown}' {LINK_REFUSAL}") from None
        if exc.errno == errno.ENXIO:  # a socket
            raise ToolError(f"'{shown}' is not a regular file") from None
        raise os_refusal(exc, shown) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"'{shown}' is a directory; use search_files or terminal ls")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"'{shown}' is not a regular file")
        if info.st_nlink > 1:
            raise ToolError(f"'{shown}' has {info.st_nlink} hard links; tools do not read "
                            "hard-linked files (one of the names may be outside the "
                            "workspace); use terminal to copy it")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def resolve_in_workspace(workspace: Path, path: str | os.PathLike[str]) -> Path:
    """``Workspace(workspace).resolve(path)``: the absolute path for scopes and display.
    Raises ToolError for an empty path, a NUL, a path outside, or a symlinked component."""
    return Workspace(workspace).resolve(path)


def display_path(workspace: Path, real: Path) -> str:
    """``real`` relative to the (canonical) workspace, for tool results; "." for the root."""
    return Workspace(workspace).display(real)


def is_within(root: Path, path: Path) -> bool:
    """True if canonical ``path`` equals canonical ``root`` or lies below it."""
    return path == root or root in path.parents


def overlaps(a: Path, b: Path) -> bool:
    """True if two canonical paths overlap: equal, or one is a directory above the other
    (hermes-facts §8: compared by path parts, a directory overlaps everything under it)."""
    a = Path(os.path.normcase(a))
    b = Path(os.path.normcase(b))
    return a == b or a in b.parents or b in a.parents
