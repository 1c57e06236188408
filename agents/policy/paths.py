"""Paths in the policy: resolving them, and what a command's paths put at risk.

Every operand and redirect of a command is resolved against the tracked working directory
(``cd`` included) and then on disk (realpath: symlinks and ``..``): the rules read the
resolved file, never the path as typed (failure cases B32, B33; issue 8 finding 2). On a
host backend: writes outside the workspace ask, writes into the app's data, code or another
workspace are denied, reads there ask. On every backend: deleting the workspace or most of
it asks (the workspace is a writable host mount; issue 8 item 3). Used by agents/policy/__init__.py.

"By any spelling" means more than modelled operands: every word of every wrapper layer,
git's global options, ``NAME=value`` prefixes, ``key=value`` and ``--opt=value`` values,
attached option values (``-C/dir``), every path-like substring of a word or of a heredoc
(code strings: ``python3 -c "open('/d/x')"``, with backslash escapes decoded and string
concatenation undone), brace expansions and globs that may expand into a private path,
and the lines of workspace files that become arguments (``xargs cat < list``) are
resolved; a private path named anywhere is at least a read (asks). A recursive program
rooted at ``/`` or another ancestor of a private path (``find / -exec``, ``grep -r x /``,
``tar -cf - /``) reads it (asks); a recursive change there (``find / -delete``,
``chmod -R``) writes it (denied). A plain listing (``find / -name x``, ``ls -R /``) reads
names only and is not counted. What cannot be seen without running the command (a path
computed at run time, read from a file outside the workspace, or built in code by
arithmetic) is the backend's confinement's half; where there is none (the local backend
with Landlock off or missing), a computed path asks (path_words.py ``unseen_path``).
"""

from __future__ import annotations

import os
import posixpath
import re
from fnmatch import fnmatchcase
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.policy.command_risk import expand_braces, home_config_file
from agents.policy.write_targets import write_targets
from agents.policy.command_scripts import read_workspace_file
from agents.policy.host_reach import host_reach, through_process
from agents.policy.path_words import (COMPUTED, GLOB, HOST_SECRETS, PROC_PRIVATE,
                                      QUIET_DEVICES, glob_ancestor, glob_literal_prefix,
                                      glob_reaches, mode_targets, paths_in, word_paths)
from agents.policy.command_tables import UNKNOWN_CWD
from agents.tools.steering import PROTECTED_NAMES

if TYPE_CHECKING:
    from agents.policy.command_model import ParsedCommand, SimpleCommand
    from agents.policy.context import PolicyContext



def resolve_path(path: str, ctx: PolicyContext, cwd: str | None = None) -> tuple[str, str]:
    """(lexical absolute path, realpath). ``~`` is the workspace (the command HOME and the
    file tools' meaning); relative paths start at ``cwd`` or the workspace. Never raises:
    a path that cannot be resolved on disk is returned as typed, twice."""
    base = ctx.workspace or "/"
    text = re.sub(r"^(\$HOME|\$\{HOME\})(?=/|$)", "~", path)
    if text == "~" or text.startswith("~/"):
        text = posixpath.join(base, text[2:])
    elif re.match(r"^~[\w.-]+(/|$)", text):
        text = os.path.expanduser(text)  # ``~user/...``: that user's home, as bash does
    elif cwd and not text.startswith("/"):
        text = posixpath.join(resolve_path(cwd, ctx)[0], text)
    lexical = posixpath.normpath(posixpath.join(base, text))
    try:
        return lexical, os.path.realpath(lexical)
    except OSError:
        # A component this process may not traverse (``/proc/1/root``: EACCES): a command of
        # the same uid cannot follow it either, so the rules judge the path as typed (which
        # still matches /proc/*/root, the private paths...). Raising here failed the turn.
        return lexical, lexical


def is_within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def is_sensitive(real: str, ctx: PolicyContext) -> bool:
    """Inside the app's own config or a credential location (both sides resolved: B33b)."""
    return any(is_within(real, os.path.realpath(p))
               for p in (*ctx.app_config_paths, *ctx.sensitive_paths))


def is_protected(lexical: str, real: str, ctx: PolicyContext) -> bool:
    """An instruction file by its given name or its resolved name, case-insensitively; or
    a repository's ``.git/config`` or ``.git/hooks/*``, which name programs git runs on
    later commands (aliases beginning with ``!``, core.fsmonitor, hooks): they steer
    future behaviour the same way."""
    names = PROTECTED_NAMES | {n.lower() for n in ctx.extra_protected_names}
    workspace = os.path.realpath(ctx.workspace) if ctx.workspace else "/"
    for p in (lexical, real):
        rel = os.path.relpath(p, workspace) if is_within(p, workspace) else p
        parts = [x.lower() for x in rel.split("/") if x]
        if parts and (parts[-1] in names or "skills" in parts[:-1]):
            return True
        if ".git" in parts[:-1]:
            after = parts[parts.index(".git") + 1:]
            if after in (["config"], ["config.worktree"]) or after[:1] == ["hooks"]:
                return True
    return False


@dataclass(frozen=True, slots=True)
class _PathFinding:
    """A finding from resolving a command's paths (same shape as command_risk.Finding)."""

    level: str
    rule: str
    risk_class: str
    reason: str
    command: int | None


def _app_config(real: str, command: int) -> _PathFinding:
    """The floor finding for a read or write of the app's own config, database or secret."""
    return _PathFinding("hardline", "app_config", "app_config", f"{real} is the application's "
                        "own configuration, database or a credential file", command)


def _glob_hits(lexical: str, roots: tuple[str, ...], workspace: str) -> bool:
    """A glob path that may expand into one of ``roots`` (none when the glob starts inside
    the session's own workspace: ``~/*.py``)."""
    if not GLOB.search(lexical) or is_within(glob_literal_prefix(lexical), workspace):
        return False
    return any(glob_reaches(lexical, r) or glob_reaches(lexical, os.path.realpath(r))
               for r in roots)


def _sensitive(real: str, lexical: str, ctx: PolicyContext, workspace: str) -> bool:
    """is_sensitive, also for a glob that may expand into a config or credential path."""
    return is_sensitive(real, ctx) or _glob_hits(
        lexical, (*ctx.app_config_paths, *ctx.sensitive_paths), workspace)


def _private(real: str, lexical: str, ctx: PolicyContext, workspace: str) -> bool:
    """Inside the app's data, code, other workspaces or HERMES home (and not inside this
    session's own workspace); a glob counts when it may expand into one of them."""
    if is_within(real, workspace) and not GLOB.search(lexical):
        return False
    return any(is_within(real, os.path.realpath(p)) or is_within(lexical, p)
               for p in ctx.private_paths) and not is_within(real, workspace) or _glob_hits(
        lexical, ctx.private_paths, workspace)


_HOME = re.compile(r"^(\$HOME|\$\{HOME\})(?=/|$)")
"""``$HOME`` at the start of an operand: resolved like ``~`` (resolve_path), not computed."""
_ALL_ENTRIES = re.compile(r"(^|/)(\*|\.\*|\.\[!.\]\*)$")
"""An operand naming every entry of a directory (``*``, ``./*``, ``.*``)."""


def path_findings(parsed: ParsedCommand, ctx: PolicyContext, workspace: str,
                   host: bool) -> list[_PathFinding]:
    """Findings from every operand and redirect, resolved (cwd tracked, symlinks resolved:
    the rule reads the resolved file, not the path as typed; B33). ``host``: commands
    run on the host (local backend), so reads of private paths ask and writes outside the
    workspace ask; in the sandbox only workspace-destroying deletes are judged here."""
    out: list[_PathFinding] = []
    for i, cmd in enumerate(parsed.commands):
        unknown = cmd.cwd == UNKNOWN_CWD
        cwd = None if unknown else cmd.cwd
        if cmd.name == "rm" and "-r" in cmd.argv or cmd.name in ("find",) and (
                "-delete" in cmd.argv or "rm" in cmd.argv) or cmd.name == "shred" and (
                "-r" in cmd.argv):
            ops = [a for a in cmd.argv[1:] if not a.startswith("-")]
            if cmd.name == "find":
                ops = ops[:1] or ["."]
            if not ops or any(COMPUTED.search(_HOME.sub("~", t)) for t in ops):
                # ``rm -rf "$PWD"``, ``rm -rf `pwd```, ``rm -rf $(ls)``, ``ls | xargs rm
                # -rf``: the target is computed at run time, so it may be the workspace
                # (a second user's attack wiped a sandboxed workspace this way).
                out.append(_PathFinding("ask", "workspace_destructive",
                                        "workspace_destructive", "deletes a directory tree "
                                        "the policy cannot see before it runs", i))
                ops = []
            for t in ops:
                if unknown and not t.startswith(("/", "~")):
                    continue
                lexical, real = resolve_path(t.rstrip("*").rstrip("/") or t, ctx, cwd)
                if real == workspace or lexical == workspace.rstrip("/") or (
                        re.search(r"(^|/)(\*|\.\*|\.\[!.\]\*)$", t)
                        and resolve_path(posixpath.dirname(t) or ".", ctx, cwd)[1] == workspace):
                    out.append(_PathFinding("ask", "workspace_destructive",
                                            "workspace_destructive", "deletes the whole "
                                            "workspace or most of it", i))
                    break
        if cmd.name == "mv" and any(_ALL_ENTRIES.search(a) or COMPUTED.search(_HOME.sub("~", a))
                                    for a in cmd.argv[1:-1] if not a.startswith("-")):
            # ``mv * /tmp/``: every entry leaves the workspace, as gone as deleted.
            out.append(_PathFinding("ask", "workspace_destructive", "workspace_destructive",
                                    "moves every entry of a directory, or entries the "
                                    "policy cannot see, elsewhere", i))
        if not host:
            continue
        out += [_PathFinding("ask", rule, risk, why, i)
                for rule, risk, why in host_reach(cmd, confined=ctx.host_confined,
                                                  cwd_known=not unknown)]
        writes = [b for t in (*write_targets(cmd), *mode_targets(cmd))
                  for b in expand_braces(t)]
        for t in writes:
            if QUIET_DEVICES.match(t):
                continue
            if unknown and not t.startswith(("/", "~")):
                out.append(_PathFinding("ask", "unknown_cwd", "host_write", f"writes {t} "
                                        "from a working directory that cannot be known", i))
                continue
            lexical, real = resolve_path(t, ctx, cwd)
            if _sensitive(real, lexical, ctx, workspace):
                out.append(_app_config(real, i))
            elif _private(real, lexical, ctx, workspace):
                out.append(_PathFinding("hardline", "private_write", "app_config",
                                        f"writes {real}: the application's own data, code "
                                        "or another user's workspace", i))
            elif not is_within(real, workspace) and not any(
                    is_within(real, os.path.realpath(p)) for p in ctx.scratch_paths) \
                    and not QUIET_DEVICES.match(real):
                out.append(_PathFinding("ask", "outside_workspace", "host_write",
                                        f"writes {real}, outside the session workspace", i))
            elif is_within(real, workspace) and home_config_file(
                    "~/" + os.path.relpath(real, workspace)):
                out.append(_PathFinding("ask", "home_config", "home_config",
                                        f"writes {real}, a shell or agent config file in the "
                                        "home directory", i))
        # Every word the command line hands any program, wrappers and their options
        # included (``git -C d``, ``env X=/p sh -c 'cat $X'``, ``dd if=/p``), the text a
        # program reads as code (a heredoc, a here-string, static stdin): a private path
        # named anywhere is at least a read (issue 8 finding 2 "by any spelling").
        words = [w for layer in cmd.layers for w in layer[1:]]
        words += [*cmd.options, *cmd.assigns, *(t for _, t in cmd.redirects)]
        if cmd.stdin_text:
            words += paths_in(cmd.stdin_text)
        for text in _argument_files(cmd, parsed.commands[i - 1] if i else None, workspace):
            words += paths_in(text)
        seen: set[str] = set()
        for w in dict.fromkeys(words):
            for path in (b for p in word_paths(w) for b in expand_braces(p)):
                if path in seen or unknown and not path.startswith(("/", "~")):
                    continue
                seen.add(path)
                lexical, real = resolve_path(path, ctx, cwd)
                if _sensitive(real, lexical, ctx, workspace):
                    out.append(_app_config(real, i))
                elif _private(real, lexical, ctx, workspace):
                    out.append(_PathFinding("ask", "private_read", "host_read",
                                            f"reads {real}: the application's own data or code"
                                            " or another user's workspace", i))
                elif PROC_PRIVATE.match(lexical) or PROC_PRIVATE.match(real) or any(
                        is_within(real, p) for p in HOST_SECRETS) or through_process(path):
                    out.append(_PathFinding("ask", "host_secret", "host_read",
                                            f"reads {path}: another process's environment, "
                                            "files or view of the filesystem, or a host "
                                            "secret", i))
        out += _recursive_findings(cmd, i, ctx, workspace,
                                   parsed.commands[i - 1] if i else None)
    return out


_LINE_CONSUMERS = frozenset({"xargs", "read", "mapfile", "readarray", ":"})
_FILE_SUBSTITUTION = re.compile(r"\$\(\s*(?:cat\s+|<\s*)([^\s()<>;|&$`]+)\s*\)"
                                r"|`\s*(?:cat\s+|<\s*)([^\s()<>;|&$`]+)\s*`")
_FILE_PRINTERS = frozenset({"cat", "head", "tail", "sort", "uniq", "tac", "grep", "cut"})


def _argument_files(cmd: SimpleCommand, previous: SimpleCommand | None, workspace: str
                    ) -> list[str]:
    """The text of workspace files whose contents become arguments of a command: the
    input of xargs / read / mapfile / a loop (``xargs cat < list``, ``while read f; do cat
    "$f"; done < list``, ``cat list | xargs cat``) and ``$(cat list)`` / ``$(< list)``
    substitutions. Read with O_NOFOLLOW inside the workspace only (command_scripts);
    an unreadable file gives nothing (its name was checked as a path already)."""
    names = {layer[0] for layer in cmd.layers}
    cwd = None if cmd.cwd == UNKNOWN_CWD else cmd.cwd
    files: list[str] = []
    if names & _LINE_CONSUMERS:
        files += [t for op, t in cmd.redirects if op == "<"]
        for layer in cmd.layers:
            if layer[0] == "xargs":
                files += [layer[k + 1] for k, a in enumerate(layer[:-1])
                          if a in ("-a", "--arg-file")]
                files += [a.split("=", 1)[1] for a in layer if a.startswith("--arg-file=")]
        if cmd.stdin == "pipe" and previous is not None and previous.name in _FILE_PRINTERS:
            files += [a for a in previous.argv[1:] if not a.startswith("-")]
    for w in (w for layer in cmd.layers for w in layer[1:]):
        files += [m.group(1) or m.group(2) for m in _FILE_SUBSTITUTION.finditer(w)]
    out = []
    for f in dict.fromkeys(files):
        text = read_workspace_file(workspace, f, cwd)
        if text:
            out.append(text)
    return out


_RECURSE_FLAGS = {"grep": {"-r", "-R", "--recursive", "--dereference-recursive"},
                  "egrep": {"-r", "-R"}, "fgrep": {"-r", "-R"},
                  "cp": {"-r", "-R", "-a", "--recursive", "--archive"},
                  "rsync": {"-r", "-a", "--recursive", "--archive"},
                  "scp": {"-r"}, "zip": {"-r", "--recurse-paths"},
                  "chmod": {"-R", "--recursive"}, "chown": {"-R", "--recursive"},
                  "chgrp": {"-R", "--recursive"}, "rm": {"-r", "-R", "--recursive"},
                  "shred": {"-r"}}
_ALWAYS_RECURSE = frozenset({"rg", "ag", "ack", "tar", "bsdtar", "7z", "fd", "fdfind"})
_RECURSIVE_WRITERS = frozenset({"chmod", "chown", "chgrp", "rm", "shred"})
_FIND_READ_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _recursive_roots(cmd: SimpleCommand) -> list[str]:
    """The starting points of a ``find`` (``.`` when none is given)."""
    args = cmd.argv[1:]
    end = next((k for k, a in enumerate(args) if a.startswith(("-", "(", "!"))), len(args))
    return list(args[:end]) or ["."]


def _recursive(cmd: SimpleCommand) -> tuple[list[str], str] | None:
    """(the trees ``cmd`` walks, "read" / "write"), when it reads file contents or changes
    files below its operands; None otherwise. A plain ``find`` (or ``ls -R``, ``du``) only
    lists names and metadata: not a read of the files (decided: ``find / -name x`` stays
    allowed; ``ls ..`` asks because ``..`` itself is private)."""
    name, args = cmd.name, cmd.argv[1:]
    if name == "find":
        end = next((k for k, a in enumerate(args) if a.startswith(("-", "(", "!"))), len(args))
        roots = _recursive_roots(cmd)
        runs = [a for a in args if a in _FIND_READ_ACTIONS]
        if "-delete" in args or runs and "rm" in args[end:]:
            return roots, "write"
        return (roots, "read") if runs else None
    flags = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    flags |= {f"-{c}" for a in args if a.startswith("-") and not a.startswith("--")
              for c in a[1:]}
    if name in _ALWAYS_RECURSE or flags & _RECURSE_FLAGS.get(name, set()):
        ops = [a for a in args if not a.startswith("-")]
        if name in ("chmod", "chown", "chgrp"):
            ops = ops[1:]
        return ops, "write" if name in _RECURSIVE_WRITERS else "read"
    return None


def _find_hunts(cmd: SimpleCommand, ctx: PolicyContext) -> bool:
    """A ``find`` whose name test matches a private or secret file's name (``find / -name
    secret_key``): its output leads a later command (``| xargs cat``, ``$(...)``) there."""
    args = cmd.argv[1:]
    names = {os.path.basename(p.rstrip("/")) for p in (*ctx.app_config_paths,
                                                        *ctx.sensitive_paths)}
    tests = [args[k + 1] for k, a in enumerate(args[:-1])
             if a in ("-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename")]
    return any(fnmatchcase(n.lower() if t.islower() else n, t.rsplit("/", 1)[-1] or t)
               for t in tests for n in names)


def _recursive_findings(cmd: SimpleCommand, index: int, ctx: PolicyContext, workspace: str,
                        previous: SimpleCommand | None = None) -> list[_PathFinding]:
    """A recursive read or write rooted at ``/`` or at any other ancestor of a private path
    (``find / -exec cat {} +``, ``grep -r x /``, ``chmod -R 777 /srv``) reaches that private
    path: a read asks, a write is denied, naming the private paths below the root. A find
    that only lists counts as a read when its names feed xargs (``find / | xargs cat``) or
    its name test hunts a secret file (``cat $(find / -name secret_key)``)."""
    found = _recursive(cmd)
    if found is None and cmd.name == "find" and _find_hunts(cmd, ctx):
        found = _recursive_roots(cmd), "read"
    if found is None and previous is not None and previous.name == "find" and \
            cmd.stdin == "pipe" and any(layer[0] == "xargs" for layer in cmd.layers):
        cmd, found = previous, (_recursive_roots(previous), "read")
    if found is None or cmd.cwd == UNKNOWN_CWD and not all(
            r.startswith(("/", "~")) for r in found[0]):
        return []
    roots, mode = found
    private = [os.path.realpath(p) for p in (*ctx.private_paths, *ctx.app_config_paths,
                                             *ctx.sensitive_paths)]
    out: list[_PathFinding] = []
    for root in (b for r in roots for b in expand_braces(r)):
        lexical, real = resolve_path(root.rstrip("*") or root, ctx,
                                     None if cmd.cwd == UNKNOWN_CWD else cmd.cwd)
        globbed = bool(GLOB.search(lexical)) and not is_within(
            glob_literal_prefix(lexical), workspace)
        if is_within(real, workspace) and not globbed:
            continue  # ``rm -rf *``, ``find . -exec``: the session's own files
        below = list(dict.fromkeys(p for p in private if not is_within(p, workspace) and (
            p != real and is_within(p, real) or globbed and glob_ancestor(lexical, p))))
        if mode == "write" and not below and any(
                is_within(real, p) or globbed and glob_reaches(lexical, p) for p in private):
            below = [real]  # ``find <private dir> -delete``: the tree itself is private
        if not below:
            continue
        shown = ", ".join(below[:3])
        if mode == "write":
            out.append(_PathFinding("hardline", "private_write", "app_config",
                                    f"{cmd.name} changes everything under {real}, which "
                                    f"holds {shown}: the application's own data, code or "
                                    "other users' workspaces", index))
        else:
            out.append(_PathFinding("ask", "private_read", "host_read",
                                    f"{cmd.name} reads everything under {real}, which holds "
                                    f"{shown}: the application's own data or code or other "
                                    "users' workspaces", index))
        break
    return out
