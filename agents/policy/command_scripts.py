"""Scripts a command runs, read safely and reduced to the commands they would run.

Issue 8 finding 3: a script written with write_file and then run with ``sh script``,
``bash script``, ``. script`` or ``python x.py`` was never inspected, so the floor never saw
what it did. Here such a script is read (only inside the workspace, every component opened
with O_NOFOLLOW from a directory fd, so a symlink planted by the agent's own command cannot
redirect the read; sandbox-notes.md "race-free opening") and turned into command text the
parser judges like a typed command:

- shell scripts: their text, parsed as is;
- Python scripts: ``ast``-level effects: ``os.system``/``subprocess.*`` with literal commands,
  ``shutil.rmtree``/``os.remove``/``os.chmod``/``open(..., "w")`` with literal paths become
  the equivalent shell commands; the same calls with computed arguments, ``exec``/``eval``
  of computed text and ``ctypes`` make the script *opaque* (the policy asks);
- other interpreters (perl, ruby, node, php, lua): literal ``system("...")``-style payloads
  are extracted; any other exec or delete hook makes the script opaque.

Pure: no Django, nothing runs. Reading is the one side effect (``read_workspace_file``).
"""

from __future__ import annotations

import ast
import errno
import os
import re
import shlex
import stat
from dataclasses import dataclass
from typing import Protocol

MAX_SCRIPT_BYTES = 256 * 1024
"""Scripts larger than this are not read (opaque: the policy asks)."""


def read_workspace_file(workspace: str, path: str, cwd: str | None = None) -> str | None:
    """The text of regular file ``path`` (relative to ``cwd``, itself relative to the
    workspace, or absolute) when it lies inside ``workspace``; else None.

    Every component is opened with O_NOFOLLOW | O_DIRECTORY from the workspace's fd and the
    file itself with O_NOFOLLOW, so a symlink anywhere on the way, ``..`` above the root, a
    FIFO, a device or a file over MAX_SCRIPT_BYTES gives None (the caller asks). ``~`` is
    the workspace (the command HOME). Never raises.
    """
    try:
        root = os.path.realpath(workspace)
        text = path
        if text == "~" or text.startswith("~/"):
            text = text[2:] or "."
        if not text.startswith("/") and cwd:
            base = cwd[2:] if cwd.startswith("~/") else "" if cwd == "~" else cwd
            text = os.path.join(base, text)
        if text.startswith("/"):
            if os.path.commonpath([os.path.normpath(text), root]) != root:
                return None
            text = os.path.relpath(os.path.normpath(text), root)
        parts = [p for p in os.path.normpath(text).split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            return None
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                              dir_fd=fd)
                os.close(fd)
                fd = nxt
            leaf = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                           dir_fd=fd)
        finally:
            os.close(fd)
        try:
            info = os.fstat(leaf)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SCRIPT_BYTES:
                return None
            data = os.read(leaf, MAX_SCRIPT_BYTES + 1)
        finally:
            os.close(leaf)
        return data.decode("utf-8", errors="replace")
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.EACCES):
            return None
        return None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ScriptEffects:
    """What a non-shell script does, as far as it can be seen.

    ``commands``: shell command lines equivalent to its visible effects (parsed and judged
    by the caller). ``opaque``: why its effects cannot be fully seen ("" when they can)."""

    commands: tuple[str, ...]
    opaque: str = ""


_SHELL_CALLS = {"os.system", "os.popen", "subprocess.run", "subprocess.call",
                "subprocess.Popen", "subprocess.check_call", "subprocess.check_output",
                "subprocess.getoutput", "subprocess.getstatusoutput", "pty.spawn",
                "asyncio.create_subprocess_shell", "asyncio.create_subprocess_exec"}
_PATH_CALLS = {"shutil.rmtree": "rm -rf", "os.remove": "rm -f", "os.unlink": "rm -f",
               "os.rmdir": "rmdir", "os.removedirs": "rmdir", "os.truncate": "truncate -s 0",
               "shutil.chown": "chown x", "os.chown": "chown x", "os.lchown": "chown x",
               "os.chmod": "chmod 777", "os.lchmod": "chmod 777"}
_PAIR_CALLS = {"shutil.move": "mv", "os.rename": "mv", "os.replace": "mv",
               "shutil.copy": "cp", "shutil.copy2": "cp", "shutil.copyfile": "cp",
               "shutil.copytree": "cp -r", "os.symlink": "ln -s", "os.link": "ln"}
_OPAQUE_CALLS = {"exec", "eval", "compile", "__import__", "importlib.import_module",
                 "ctypes.CDLL", "ctypes.cdll.LoadLibrary", "os.execv", "os.execve",
                 "os.execvp", "os.execl", "os.execlp", "os.spawnv", "os.spawnl",
                 "os.posix_spawn", "os.posix_spawnp", "os.fork", "runpy.run_path"}
_PATHLIB = {"unlink": "rm -f", "rmdir": "rmdir", "write_text": ": >", "write_bytes": ": >",
            "touch": "touch", "chmod": "chmod 777"}
_UNRESOLVED_HOOKS = {"system", "popen", "rmtree", "Popen", "check_output", "check_call",
                     "getoutput", "getstatusoutput", "execv", "execve", "execvp", "execvpe",
                     "execl", "execlp", "spawnv", "spawnl", "posix_spawn", "removedirs"}
"""Attribute calls that reach a command or a tree delete through a name the alias map
cannot resolve (``o = os; o.system(...)``): the script is opaque."""
_HOOK_NAMES = {"system", "popen", "rmtree", "remove", "unlink", "execv", "execve", "Popen",
               "check_output", "check_call", "spawn", "chmod", "chown"}


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return shlex.join(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str:
    if isinstance(node, ast.Call) and _dotted(node.func, aliases) in (
            "__import__", "importlib.import_module") and node.args:
        return _literal(node.args[0]) or ""  # __import__('os').system(...)
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value, aliases)}.{node.attr}"
    return ""


def python_effects(source: str) -> ScriptEffects:
    """Effects of a Python script (module docstring). Opaque when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ScriptEffects((), "the Python script does not parse")
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else \
                    a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    commands: list[str] = []
    opaque = ""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    hooks = _SHELL_CALLS | set(_PATH_CALLS) | set(_PAIR_CALLS) | _OPAQUE_CALLS
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in called and \
                isinstance(getattr(node, "ctx", None), ast.Load) and \
                _dotted(node, aliases) in hooks - {"exec", "eval", "compile"}:
            # ``f = os.system; f(...)``: a hook passed around cannot be followed
            opaque = opaque or f"{_dotted(node, aliases)} is referenced, not called"
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func, aliases)
        args = node.args
        if name in _SHELL_CALLS or name.startswith(("os.exec", "os.spawn")):
            text = _literal(args[0]) if args else None
            if text is None:
                opaque = opaque or f"{name}() with a computed command"
            else:
                commands.append(text)
        elif name in _PATH_CALLS:
            path = _literal(args[0]) if args else None
            if path is None:
                opaque = opaque or f"{name}() on a computed path"
            else:
                op = _PATH_CALLS[name]
                commands.append(f"{op} {shlex.quote(path)}")
        elif name in _PAIR_CALLS:
            a = _literal(args[0]) if len(args) > 0 else None
            b = _literal(args[1]) if len(args) > 1 else None
            if a is None or b is None:
                if b is None:
                    opaque = opaque or f"{name}() to a computed path"
            else:
                commands.append(f"{_PAIR_CALLS[name]} {shlex.quote(a)} {shlex.quote(b)}")
        elif name in ("open", "io.open", "os.open") and args:
            path = _literal(args[0])
            mode = _literal(args[1]) if len(args) > 1 else None
            mode = mode or next((_literal(k.value) for k in node.keywords
                                 if k.arg == "mode"), None) or ""
            if path is not None and (set(mode) & set("wax+") or name == "os.open"):
                commands.append(f": > {shlex.quote(path)}")
        elif name in _OPAQUE_CALLS or name.startswith("ctypes."):
            if not (name in ("__import__", "importlib.import_module") and args
                    and _literal(args[0]) is not None):
                opaque = opaque or f"{name}() runs code that cannot be read"
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _PATHLIB and \
                isinstance(node.func.value, ast.Call) and _dotted(
                node.func.value.func, aliases) in ("Path", "pathlib.Path", "PurePath"):
            target = _literal(node.func.value.args[0]) if node.func.value.args else None
            if target is not None:
                commands.append(f"{_PATHLIB[node.func.attr]} {shlex.quote(target)}")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _UNRESOLVED_HOOKS:
            opaque = opaque or f"{name or node.func.attr}() may run a command"
        elif name == "getattr" and len(args) > 1:
            attr = _literal(args[1])
            if attr is None or attr in _HOOK_NAMES:
                opaque = opaque or "getattr() reaches a function by a computed name"
    return ScriptEffects(tuple(commands), opaque)


_OTHER_HOOK = re.compile(
    r"\b(system|exec|spawn|spawnSync|execSync|execFile|execFileSync|popen|child_process|"
    r"unlink|unlinkSync|rmSync|rmdirSync|rmtree|rm_rf|rm_r|remove_dir|File\.delete|"
    r"FileUtils|shell_exec|passthru|proc_open|eval|os\.execute|io\.popen|chmod|chown)\b|`")
_OTHER_SYSTEM = re.compile(r"\b(?:system|exec|execSync|shell_exec|os\.execute|passthru)"
                           r"\s*\(?\s*(['\"])((?:(?!\1).)*)\1\s*\)?")


def other_script_effects(source: str) -> ScriptEffects:
    """Effects of a perl / ruby / node / php / lua script: literal ``system("...")``-style
    payloads become commands; any other exec or delete hook makes it opaque."""
    commands = [m.group(2) for m in _OTHER_SYSTEM.finditer(source)]
    rest = _OTHER_SYSTEM.sub("", source)
    hook = _OTHER_HOOK.search(rest)
    return ScriptEffects(tuple(commands),
                         f"the script uses {hook.group(0)!r}" if hook else "")


def shebang_interpreter(source: str) -> str:
    """The interpreter named by a ``#!`` line (basename; ``env X`` gives X); "" when
    there is none (then a shell runs the file)."""
    first = source.split("\n", 1)[0]
    if not first.startswith("#!"):
        return ""
    words = first[2:].split()
    if not words:
        return ""
    name = words[0].rsplit("/", 1)[-1]
    if name == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        name = rest[0].rsplit("/", 1)[-1] if rest else ""
    return name


class ScriptReader(Protocol):
    """Reads scripts a command runs (agents/policy/command_scripts.py). ``read``: the text, or
    None when it cannot be read safely; ``inside``: whether a path is in the workspace."""

    def read(self, path: str, cwd: str | None) -> str | None: ...

    def inside(self, path: str, cwd: str | None) -> bool: ...


@dataclass(frozen=True, slots=True)
class WorkspaceReader:
    """The ScriptReader of one workspace: O_NOFOLLOW reads below ``workspace`` only."""

    workspace: str

    def read(self, path: str, cwd: str | None) -> str | None:
        return read_workspace_file(self.workspace, path, cwd)

    def inside(self, path: str, cwd: str | None) -> bool:
        root = os.path.realpath(self.workspace)
        return os.path.commonpath([os.path.realpath(path), root]) == root \
            if path.startswith("/") else True
