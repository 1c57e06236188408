"""Programs that run a command given in one of their options or in their script text (a
second user's attack: ``sed -n '1e rm -rf x' f``, ``script -qc 'kill -9 -1'``, ``man -P CMD``,
``rsync -e CMD``, ``zip -TT CMD``, ``sqlite3 db '.shell CMD'``, ``psql -c '\\! CMD'``,
``python3 -m pdb -c '!code'`` were all allowed as "no risky pattern": the policy knew these
programs as ones that run nothing).

``option_commands(name, args, stdin)`` names what such a program would run: ``("command",
text)`` for a command line the caller parses like any other (so the hardline floor, the deny
list and the ask classes judge it), or ``(finding, detail)`` for code it cannot see (GNU sed's
``e`` without a command runs the pattern space; pdb's ``!`` runs Python): the caller records
the finding, which asks. Pure: no Django, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

COMMAND_OPTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "script": (("c",), ("--command",)),
    "man": (("P",), ("--pager",)),
    "rsync": (("e",), ("--rsh", "--rsync-path")),
    "zip": (("TT",), ("--unzip-command",)),
    "flock": (("c",), ("--command",)),
    "runuser": (("c",), ("--command",)),
    "watch": ((), ()),
}
"""Program → (short option letters, long options) whose value is a command line. A short
letter may close a bundle (``-qc CMD``) or carry its value (``-cCMD``); a long option its
value after ``=``."""

_SHELL_ESCAPES: dict[str, re.Pattern[str]] = {
    "sqlite3": re.compile(r"(?m)^\s*\.(?:shell|system)\s+(.+)$"),
    "duckdb": re.compile(r"(?m)^\s*\.(?:shell|system)\s+(.+)$"),
    "psql": re.compile(r"\\!\s*(.+)$", re.M),
    "mysql": re.compile(r"(?im)(?:^|;)\s*(?:\\!|system)\s+(.+)$"),
    "mariadb": re.compile(r"(?im)(?:^|;)\s*(?:\\!|system)\s+(.+)$"),
}
"""Database shells whose dot- or backslash-commands run a shell command, found in their
arguments and in their stdin."""


def option_commands(name: str, args: list[str], stdin: str | None = None
                    ) -> Iterator[tuple[str, str]]:
    """What ``name`` (a basename) run with ``args`` (its argv after the name) would run
    besides itself: ("command", command line) or (finding, detail) pairs, in argv order;
    nothing for programs that run nothing. ``stdin``: the text piped or here-doc'd to it
    when known."""
    if name in COMMAND_OPTIONS:
        yield from _option_values(name, args)
    if name == "sed":
        yield from _sed(args)
    elif name in _SHELL_ESCAPES:
        for text in [*args, stdin or ""]:
            for match in _SHELL_ESCAPES[name].finditer(text):
                yield "command", match.group(1)
    elif name == "make" and any(a == "-E" or a.startswith("--eval") for a in args):
        yield "eval_dynamic", "make --eval runs recipe text"
    elif re.fullmatch(r"python[0-9.]*|pypy3?", name) and _module(args) == "pdb" and any(
            a.startswith("-c") for a in args):
        yield "inline_code", "pdb -c runs debugger commands (! runs Python)"


def _module(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "-m" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("-m") and len(a) > 2:
            return a[2:]
    return None


def _option_values(name: str, args: list[str]) -> Iterator[tuple[str, str]]:
    shorts, longs = COMMAND_OPTIONS[name]
    if name == "watch":  # its operands are the command (eval-like; commands.py parses it)
        return
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        long = next((o for o in longs if arg == o or arg.startswith(o + "=")), None)
        if long is not None:
            if arg == long and i + 1 < len(args):
                yield "command", args[i + 1]
                i += 2
                continue
            if "=" in arg:
                yield "command", arg.split("=", 1)[1]
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            for letter in shorts:
                at = arg.find(letter, 1)
                if at < 0:
                    continue
                value = arg[at + len(letter):]
                if value:
                    yield "command", value
                elif i + 1 < len(args):
                    yield "command", args[i + 1]
                    i += 1
                break
        i += 1


_SED_ADDRESS = r"(?:\d+|\$|/(?:[^/\\]|\\.)*/[IM]*|\\(.)(?:(?!\1).)*\1)"


def _sed(args: list[str]) -> Iterator[tuple[str, str]]:
    """GNU sed's ``e command`` runs ``command``; a bare ``e`` or an ``s///e`` flag runs the
    pattern space (text the policy cannot see). Scripts come from ``-e``/``--expression``
    or the first operand; a ``-f`` script file is not read (it asks)."""
    scripts: list[str] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-e", "--expression") and i + 1 < len(args):
            scripts.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
        elif arg in ("-f", "--file") or arg.startswith(("--file=", "-f")) and arg != "-f":
            yield "script_opaque", "sed runs a script file the policy does not read"
        elif arg.startswith("-e") and len(arg) > 2:
            scripts.append(arg[2:])
        elif not arg.startswith("-") or arg == "-":
            operands.append(arg)
        i += 1
    if not scripts and operands:
        scripts.append(operands[0])
    for script in scripts:
        yield from _sed_script(script)


def _sed_script(script: str) -> Iterator[tuple[str, str]]:
    """Walk one sed script's commands (split on ``;`` and newlines outside ``s`` commands
    and regexes, as far as this reader can tell); anything it cannot read asks."""
    rest = script
    while rest:
        rest = rest.lstrip(" \t;\n{}!")
        if not rest:
            return
        head = re.match(rf"{_SED_ADDRESS}?(?:\s*,\s*{_SED_ADDRESS})?\s*!?\s*", rest)
        rest = rest[head.end():] if head else rest
        if not rest:
            return
        command = rest[0]
        if command == "e":
            line, _, rest = rest[1:].partition("\n")
            line = line.strip()
            if line:
                yield "command", line
            else:
                yield "eval_dynamic", "sed e runs the pattern space as a command"
            continue
        if command in "sy":
            if len(rest) < 2:
                return
            delim = rest[1]
            parts = re.match(rf"{command}{re.escape(delim)}((?:[^\\{re.escape(delim)}]|\\.)*)"
                             rf"{re.escape(delim)}((?:[^\\{re.escape(delim)}]|\\.)*)"
                             rf"{re.escape(delim)}([^;\n}}]*)", rest, re.S)
            if parts is None:
                yield "eval_dynamic", "a sed script the policy cannot read"
                return
            if command == "s" and "e" in re.sub(r"w.*", "", parts.group(3)):
                yield "eval_dynamic", "sed s///e runs the result as a command"
            rest = rest[parts.end():]
            continue
        if command in "aic":  # text to the end of the line
            _, _, rest = rest.partition("\n")
            continue
        if command in "rRwWbtT:":  # a file name or label to the end of the line
            _, _, rest = rest.partition("\n")
            continue
        rest = rest[1:]
