"""Canonical forms of shell words: what a command means without running it.

Two jobs, both needed before any rule is matched (failure cases B29, B30):

- *Canonicalise*: executables reduced to their basename, long and combined flags to one
  sorted short form, wrappers (env, command, sudo, timeout, nice, xargs ...) peeled off.
- *Evaluate*: the static stdout of the producers and filters obfuscation uses (``echo <b64>
  | base64 -d``, ``printf '\\x72\\x6d'``, ``tr abc rmf``, ``xxd -r -p``, ``$'...'``), so a hidden
  payload can be parsed like any other command. Only side-effect-free commands with no
  environment dependence are evaluated; anything else is unknown (None), never guessed.

Parsing and walking is agents/policy/commands.py; judging is agents/policy/command_risk.py.
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
from typing import NamedTuple


class Word(NamedTuple):
    """A word after expansion. ``dyn``: 0 literal, 1 expansion resolved statically,
    2 expansion that cannot be known without running something."""

    text: str
    dyn: int = 0
    quoted: bool = False
    """Every expansion in the word sits inside double quotes: the shell does not
    word-split it (``bash -c "$(printf ...)"`` is ONE word, failure case B29)."""


# Flag tables: long → short aliases; True = short flags may be combined ("-rf").
_FLAG_TABLES: dict[str, tuple[dict[str, str], bool]] = {
    "rm": ({"--recursive": "-r", "-R": "-r", "--force": "-f", "--dir": "-d",
            "--verbose": "-v", "--interactive": "-i"}, True),
    "chmod": ({"--recursive": "-R", "-r": "-R"}, True),
    "chown": ({"--recursive": "-R"}, True),
    "chgrp": ({"--recursive": "-R"}, True),
    "cp": ({"--recursive": "-r", "-R": "-r", "--force": "-f"}, True),
    "mv": ({"--force": "-f"}, True),
    "git push": ({"--force": "-f", "--delete": "-d"}, True),
    "git clean": ({"--force": "-f"}, True),
    "git branch": ({"--delete": "-d", "--force": "-f"}, True),
    "wipefs": ({"--all": "-a", "--force": "-f"}, True),
}
_GIT_GLOBAL_WITH_ARG = {"-C", "-c", "--git-dir", "--work-tree", "--namespace"}


def normalize_argv(argv: tuple[str, ...]) -> tuple[str, ...]:
    """Canonical argv: basename of the executable; for commands in the flag table, long
    flags mapped to short, combined short flags split, flags sorted before operands
    (``rm --force -r x`` and ``rm -fr x`` both give ``rm -f -r x``); git global options
    (-C, -c, --no-pager ...) dropped so ``git -C d push --force`` reads ``git push -f``."""
    if not argv:
        return argv
    name = argv[0].rsplit("/", 1)[-1] if "/" in argv[0] and not argv[0].endswith("/") else argv[0]
    rest = list(argv[1:])
    key = name
    if name == "git":
        while rest and rest[0].startswith("-"):
            opt = rest.pop(0)
            if opt in _GIT_GLOBAL_WITH_ARG and rest:
                rest.pop(0)
        if rest:
            key = f"git {rest[0]}"
    table = _FLAG_TABLES.get(key)
    if table is None:
        return (name, *rest)
    aliases, combinable = table
    head: list[str] = [name] if key == name else [name, rest.pop(0)]
    flags: set[str] = set()
    operands: list[str] = []
    ended = False
    for arg in rest:
        if ended or not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif arg == "--":
            ended = True
        elif arg.startswith("--"):
            flags.add(aliases.get(arg.split("=", 1)[0], arg))
        elif combinable and arg[1:].isalpha():
            flags.update(aliases.get(f"-{c}", f"-{c}") for c in arg[1:])
        else:
            flags.add(aliases.get(arg, arg))
    return (*head, *sorted(flags), *operands)


def git_globals(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The global options before a git subcommand (``git -C d -c k=v push`` gives
    ("-C", "d", "-c", "k=v")), which normalize_argv drops: they change which repository and
    configuration the command acts on, so an exact rule must still see them."""
    if not argv or argv[0].rsplit("/", 1)[-1] != "git":
        return ()
    out: list[str] = []
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        out.append(opt)
        if opt in _GIT_GLOBAL_WITH_ARG and rest:
            out.append(rest.pop(0))
    return tuple(out)


def normalize_pattern(pattern: str) -> str:
    """A deny/always rule pattern in the same canonical form as commands (so the rule
    ``rm -rf *`` matches ``rm --force --recursive x``). Falls back to the stripped text."""
    try:
        argv = tuple(shlex.split(pattern))
    except ValueError:
        return pattern.strip()
    return " ".join(normalize_argv(argv))


_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
                   "v": "\v", "e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"',
                   "?": "?", "0": "\0"}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)",
                     re.DOTALL)


def decode_ansi_c(body: str) -> str:
    """Decode the body of a bash ``$'...'`` string (``\\x72\\x6d`` → ``rm``)."""
    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc[0] in "xuU" and len(esc) > 1:
            return chr(int(esc[1:], 16))
        if esc[0] in "01234567":
            return chr(int(esc, 8) & 0xFF)
        return _SIMPLE_ESCAPES.get(esc, "\\" + esc)
    return _ESCAPE.sub(one, body)


def _printf(argv: tuple[str, ...]) -> str | None:
    """printf with %s / %b / %c / %% only; other directives are unknown."""
    if len(argv) < 2:
        return None
    fmt, args = argv[1], list(argv[2:])
    if re.search(r"%[^sbc%]", fmt):
        return None
    out: list[str] = []
    while True:
        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "%%":
                return "%"
            value = args.pop(0) if args else ""
            return decode_ansi_c(value) if m.group(0) == "%b" else value
        out.append(decode_ansi_c(re.sub(r"%[sbc%]", sub, fmt)))
        if not args or "%" not in fmt:
            return "".join(out)


def _tr_set(spec: str) -> str | None:
    """Expand a tr SET (ranges and escapes; character classes are unknown)."""
    if "[:" in spec or "[=" in spec:
        return None
    spec = decode_ansi_c(spec)
    out: list[str] = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            lo, hi = ord(spec[i]), ord(spec[i + 2])
            if lo > hi:
                return None
            out.extend(chr(c) for c in range(lo, hi + 1))
            i += 3
        else:
            out.append(spec[i])
            i += 1
    return "".join(out)


def _tr(argv: tuple[str, ...], data: str) -> str | None:
    flags = [a for a in argv[1:] if a.startswith("-") and len(a) > 1]
    sets = [a for a in argv[1:] if not (a.startswith("-") and len(a) > 1)]
    if flags == ["-d"] and len(sets) == 1:
        gone = _tr_set(sets[0])
        return None if gone is None else "".join(c for c in data if c not in gone)
    if flags or len(sets) != 2:
        return None
    src, dst = _tr_set(sets[0]), _tr_set(sets[1])
    if not src or dst is None or not dst:
        return None
    dst = dst + dst[-1] * (len(src) - len(dst))
    return data.translate({ord(a): b for a, b in zip(src, dst)})


def _bytes_text(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def static_output(argv: tuple[str, ...], stdin: str | None) -> str | None:
    """The stdout of ``argv`` fed ``stdin`` (None = unknown), when it can be known
    without running anything; else None. Understood: echo, printf, cat (stdin only),
    base64 -d, base32 -d, xxd -r -p, tr, rev, and ``true``/``:`` (empty)."""
    if not argv:
        return None
    name, args = argv[0], argv[1:]
    if name in ("true", ":", "export", "cd", "set", "unset", "alias"):
        return ""
    if name == "echo":
        flags = set()
        while args and re.fullmatch(r"-[neE]+", args[0]):
            flags.update(args[0][1:])
            args = args[1:]
        text = " ".join(args)
        if "e" in flags:
            text = decode_ansi_c(text)
        return text + ("" if "n" in flags else "\n")
    if name == "printf":
        return _printf(argv)
    if stdin is None:
        return None
    if name == "cat" and all(a == "-" for a in args):
        return stdin
    if name == "rev" and not args:
        return "\n".join(line[::-1] for line in stdin.split("\n"))
    if name == "tr":
        return _tr(argv, stdin)
    flags = "".join(a.lstrip("-") for a in args if a.startswith("-"))
    try:
        if name in ("base64", "base32") and ("d" in flags or "D" in flags or "decode" in flags):
            blob = re.sub(r"\s+", "", stdin)
            if name == "base64":
                raw = base64.b64decode(blob + "=" * (-len(blob) % 4))
            else:
                raw = base64.b32decode(blob + "=" * (-len(blob) % 8))
            return _bytes_text(raw)
        if name == "xxd" and "r" in flags and "p" in flags:
            return _bytes_text(bytes.fromhex(re.sub(r"\s+", "", stdin)))
    except (binascii.Error, ValueError):
        return None
    return None


# Wrapper options that consume the next argument, per wrapper.
_WITH_ARG = {
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group",
             "--prompt", "--chdir", "--host", "--role", "--type", "--other-user",
             "--command-timeout", "--close-from"},
    "doas": {"-u", "-C"}, "pkexec": {"--user"}, "exec": {"-a"}, "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "--class", "--classdata"}, "stdbuf": {"-i", "-o", "-e"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "xargs": {"-I", "-n", "-P", "-d", "-L", "-s", "-E", "-a", "--arg-file", "--delimiter",
              "--max-args", "--max-procs", "--max-lines", "--max-chars", "--eof",
              "--replace"},
    "setsid": set(), "nohup": set(), "builtin": set(), "command": set(), "busybox": set(),
    "chrt": set(), "unbuffer": set(), "time": set(), "caffeinate": set(),
}


def _env_split_string(arg: str) -> str | None:
    """The command text of env's split-string option written in one word (``-S'cmd'``, a
    bundle ``-iS'cmd'``, ``--split-string=cmd``; "" when its value is the next word), else
    None. A letter taking a value (``-u``, ``-C``) before ``S`` owns the rest of the word."""
    if arg.startswith("--split-string="):
        return arg.split("=", 1)[1]
    if not arg.startswith("-") or arg.startswith("--") or arg == "-S":
        return None
    for at, letter in enumerate(arg[1:], 1):
        if letter in "uC":
            return None
        if letter == "S":
            return arg[at + 1:]
    return None


def unwrap(words: list[Word]) -> list[Word] | None:
    """The command a wrapper runs (``env X=1 sudo -u r id`` → ``sudo -u r id``), or None
    when ``words`` is not a wrapper or runs nothing (``command -v x``, ``sudo -l``)."""
    name = normalize_argv((words[0].text,))[0]
    if name not in _WITH_ARG:
        return None
    takes = _WITH_ARG[name]
    rest = words[1:]
    i = 0
    while i < len(rest):
        arg = rest[i].text
        if name == "env" and "=" in arg and not arg.startswith("-"):
            i += 1
            continue
        if name == "env" and arg in ("-S", "--split-string") and i + 1 < len(rest):
            return [Word(t, rest[i + 1].dyn) for t in rest[i + 1].text.split()] + rest[i + 2:]
        split = _env_split_string(arg) if name == "env" else None
        if split is not None:  # ``-S"cmd"``, ``-iS'cmd'``, ``--split-string=cmd`` (attack)
            if split:
                return [Word(t, rest[i].dyn) for t in split.split()] + rest[i + 1:]
            if i + 1 < len(rest):
                return [Word(t, rest[i + 1].dyn) for t in rest[i + 1].text.split()] + rest[i + 2:]
        if name in ("command", "sudo") and arg in ("-v", "-V", "-l", "-k", "-K", "--list"):
            return None
        if name == "ionice" and arg == "-p" or name == "chrt" and arg in ("-p", "--pid"):
            return None
        if name == "nice" and re.fullmatch(r"-\d+", arg):
            i += 1
            continue
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        i += 2 if arg in takes else 1
    rest = rest[i:]
    if name == "timeout" and rest:
        rest = rest[1:]  # the duration
    if name == "chrt" and rest and rest[0].text.isdigit():
        rest = rest[1:]  # the priority
    if name == "xargs" and not rest:
        return [Word("echo")]
    return rest or None


def prepare_for_parsing(text: str) -> str:
    """Rewrite forms bashlex cannot read into equivalents with the same meaning for
    analysis: ANSI-C quotes decoded, ``$IFS`` → space, ``[[ ]]`` → ``[ ]``, arithmetic
    without substitutions → 0, quoted heredoc delimiters unquoted, ``time`` dropped."""
    text = text.replace("\\\n", "")
    text = _unquote_ansi_c(text)
    text = re.sub(r"\$\{IFS[^}]*\}|\$IFS(?![A-Za-z0-9_])", " ", text)
    text = re.sub(r"(?<!\S)\[\[(?=\s)", "[", text)
    text = re.sub(r"(?<=\s)\]\](?=\s|;|$|&|\|)", "]", text)
    text = re.sub(r"\$\(\(([^()$`]*)\)\)", "0", text)
    text = re.sub(r"<<(-?)\s*(['\"])(\w+)\2", r"<<\1\3", text)
    return re.sub(r"(^|[;&|(\n]\s*)time\s+(-p\s+)?", r"\1", text)


_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")


def _unquote_ansi_c(text: str) -> str:
    """Rewrite ``$'...'`` (outside other quotes only) as a plain single-quoted string with
    the escapes decoded, and ``$"..."`` as ``"..."``."""
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "'":
            out.append(text[i:i + 2])
            i += 2
            continue
        if quote is None and text.startswith("$'", i) and (m := _ANSI_C.match(text, i)):
            out.append("'" + decode_ansi_c(m.group(1)).replace("'", "'\\''") + "'")
            i = m.end()
            continue
        if quote is None and text.startswith('$"', i):
            i += 1
            continue
        if c in "'\"" and quote in (None, c):
            quote = None if quote else c
        out.append(c)
        i += 1
    return "".join(out)


def in_double_quotes(template: str, marker: str) -> bool:
    """Is ``marker`` inside double quotes in shell word ``template``?"""
    quote: str | None = None
    i = 0
    while i < len(template):
        if template.startswith(marker, i):
            return quote == '"'
        c = template[i]
        if c == "\\" and quote != "'":
            i += 2
            continue
        if c in "'\"" and quote in (None, c):
            quote = None if quote else c
        i += 1
    return False
