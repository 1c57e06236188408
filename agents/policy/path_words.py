"""Where a command's words name paths: the path-like pieces inside any word (quoted code,
``key=value`` and ``--opt=value`` values, escapes decoded, string concatenation undone),
option arguments that are paths, and what a glob could reach. Used by
agents/policy/paths.py, which resolves and judges what these find. Pure text work: no file
is opened here.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from agents.policy.command_forms import decode_ansi_c
from agents.policy.command_model import SimpleCommand

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
