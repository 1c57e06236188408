"""Where a command's words name paths: the path-like pieces inside any word (quoted code,
``key=value`` and ``--opt=value`` values, escapes decoded, string concatenation undone),
option arguments that are paths, what a glob could reach, which words the shell computes,
and the host paths a read of asks (HOST_SECRETS, PROC_PRIVATE). Used by
agents/policy/paths.py, which resolves and judges what these find. Pure text work: no file
is opened here.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from agents.policy.command_forms import decode_ansi_c
from agents.policy.command_model import SimpleCommand

QUIET_DEVICES = re.compile(r"^/dev/(null|zero|full|stdout|stderr|stdin|tty|fd/\d+|"
                           r"pts/\d+)$|^/proc/self/fd/\d+$")
"""Devices a command may write without it counting as a write outside the workspace."""
PROC_PRIVATE = re.compile(r"^/proc/[^/]+/(task/[^/]+/)?(environ|mem|root|cwd|map_files|auxv)"
                           r"(/|$)")
"""Another process's environment, memory or view of the filesystem: also through each of
its threads (``/proc/<pid>/task/<tid>/environ`` is the same file)."""
HOST_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/root", "/var/lib/postgresql",
                "/etc/security/opasswd", "/run/postgresql", "/var/run/postgresql", "/run/mysqld",
                "/var/run/mysqld", "/run/redis", "/var/run/redis")
"""Host files a command reading asks about on a host backend (issue 8 finding 9 is the
sandbox's half), and the servers' socket directories (a connect() there is out of Landlock's
reach)."""

_PATH_LIKE = re.compile(r"(?<![\w.~/$%@+-])(?:~(?=/|$)|\.{1,2}(?=/|$)|/)"
                        r"[^\s'\"`;|&<>(){},:=!^$\\]*")
"""An absolute, ``~``-, ``.``- or ``..``-relative path inside a longer text (a code string, a
``key=value``, an option's attached value): starts where no path or name character is."""
_REL_WITH_DOTDOT = re.compile(r"(?<![\w.~/$%@+-])[\w.-]+/[^\s'\"`;|&<>(){},:=!^$\\]*")
"""A relative path inside a text; kept only when a ``..`` component climbs out of it."""


def paths_in(text: str) -> list[str]:
    """Path-like substrings of ``text``: absolute, ``~``/``.``/``..``-relative, and relative
    paths with a ``..`` component (``sub/../../3/x``)."""
    out = [m.group(0) for m in _PATH_LIKE.finditer(text)]
    out += [m.group(0) for m in _REL_WITH_DOTDOT.finditer(text)
            if ".." in m.group(0).split("/")]
    return out


_JOINS = re.compile(r"""(['"])\s*(?:\+|\.|\.\.)?\s*\1""")
_COMMA_JOINS = re.compile(r"""(['"])\s*,\s*\1""")


def word_paths(word: str) -> list[str]:
    """Every path a word may name (candidates; the caller resolves them): the word itself,
    the value of ``--opt=path`` / ``key=path`` (``if=``, ``--git-dir=``), an option's attached
    value (``-C/dir``), a ``file:`` URI, and every absolute / ``~`` / ``..`` path inside it
    (quoted code: ``open('/d/x')``), also after decoding backslash escapes (``'\x2fd'``) and
    undoing string concatenation (``'/d' + '/x'``, ``'/d' '/x'``, ``join('/d', 'x')``).
    Shapes: str -> list[str], in order, without duplicates. Source: the brief "by any
    spelling" of issue 8 finding 2 (paths.py module docstring)."""
    if not word:
        return []
    out: list[str] = []
    if word.startswith("-"):
        if "=" in word and word.split("=", 1)[1]:
            out.append(word.split("=", 1)[1])
        m = re.match(r"^-[A-Za-z](.+)$", word)
        if m and m.group(1).startswith(("/", "~", "..")):
            out.append(m.group(1))
    elif word.startswith("file:"):
        out.append(word[5:].split("?", 1)[0])
    else:
        out.append(word)
    out += [v for v in word.split("=")[1:] if v]
    texts = [word]
    if "\\" in word:
        texts.append(decode_ansi_c(word))
    for text in list(texts):
        joined = _JOINS.sub("", text)
        if joined != text:
            texts.append(joined)
        commas = _COMMA_JOINS.sub("/", text)
        if commas != text:
            texts.append(commas)
    for text in texts:
        out += paths_in(text)
    return list(dict.fromkeys(p for p in out if p))


def mode_targets(cmd: SimpleCommand) -> tuple[str, ...]:
    """Operands whose permissions or ownership ``cmd`` changes."""
    name, args = cmd.argv[0], cmd.argv[1:]
    ops = [a for a in args if not a.startswith("-")]
    if name in ("chmod", "chown", "chgrp") and len(ops) >= 2:
        return tuple(ops[1:])
    if name in ("chattr", "setfacl") and ops:
        return tuple(ops[1:] if name == "setfacl" else ops)
    return ()


GLOB = re.compile(r"[*?]|\[[^\]]*\]")


def glob_reaches(pattern: str, root: str) -> bool:
    """Could the glob ``pattern`` (absolute, normalised) name ``root`` or a path inside it?
    Component by component, as the shell matches (``/s?v/herm*/data/x`` reaches
    ``/srv/hermes/data``); a pattern with fewer components than ``root`` names an ancestor,
    not ``root`` (a recursive program on it is judged by _recursive_findings)."""
    pat = [c for c in pattern.split("/") if c]
    parts = [c for c in root.split("/") if c]
    return len(pat) >= len(parts) and all(fnmatchcase(r, p) for r, p in zip(parts, pat))


def glob_ancestor(pattern: str, root: str) -> bool:
    """Could the glob ``pattern`` name a proper ancestor of ``root`` (``/s*`` of /srv/app)?"""
    pat = [c for c in pattern.split("/") if c]
    parts = [c for c in root.split("/") if c]
    return len(pat) < len(parts) and all(fnmatchcase(r, p) for r, p in zip(parts, pat))


def glob_literal_prefix(pattern: str) -> str:
    """The directories of ``pattern`` before its first glob character (``/a/b*/c`` → /a)."""
    out: list[str] = []
    for c in pattern.split("/")[1:]:
        if GLOB.search(c):
            break
        out.append(c)
    return "/" + "/".join(out)


COMPUTED = re.compile(r"[$`]")
"""A word the shell computes when the command runs (a variable, a command substitution)."""
_KNOWN_PREFIX = re.compile(r"^(\$HOME|\$\{HOME\}|\$PWD|\$\{PWD\})(?=/|$)")
"""``$HOME`` (the workspace: resolve_path reads it as ``~``) and ``$PWD`` (the tracked
working directory) at the start of a word: known before the command runs."""
OUTPUT_ONLY = frozenset({"echo", "printf", "test", "[", "[[", "expr", "true", "false",
                         "sleep", "seq", "exit", "return", "shift", "let", "local",
                         "declare", "export", "set", "unset", "read"})
"""Commands whose operands are never file names: a computed operand there opens nothing
(their redirects still count)."""


def unseen_path(cmd: SimpleCommand, *, cwd_known: bool) -> str | None:
    """Why the files ``cmd`` touches cannot be known before it runs, or None when they can.

    For a host with no OS confinement (the local backend with Landlock off or missing),
    where the policy is the only guard: a word the shell computes (``"$(dirname
    $PWD)/../db"``, ``$F/x``, ```pwd`/..``; a bare ``$F`` as an operand or a redirect)
    can point anywhere, the app's database and other users' workspaces included (a second
    user read the database this way). So can a relative operand after a ``cd`` to a
    computed directory (``cwd_known`` False). ``$HOME`` and ``$PWD`` at a word's start are
    known. Operands of OUTPUT_ONLY commands are not paths."""
    operands = [] if cmd.name in OUTPUT_ONLY else [w for layer in cmd.layers for w in layer[1:]]
    kept = {*cmd.assigns, *(t for _, t in cmd.redirects)}  # never an output-only operand
    for word in cmd.computed:
        if cmd.name in OUTPUT_ONLY and word not in kept:
            continue
        rest = _KNOWN_PREFIX.sub("", word) if cwd_known else word
        if COMPUTED.search(rest):
            return f"names a path computed when it runs ({word})"
    if not cwd_known and any(not w.startswith(("/", "~", "-")) for w in operands):
        return "names files relative to a directory computed when it runs"
    return None
