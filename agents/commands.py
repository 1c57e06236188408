"""Shell commands reduced to their meaning: the simple commands a shell would really run.

A deny list run over the raw string is defeated by the shell itself: quotes, escapes,
``${IFS}``, ``$(...)``, ``eval``, ``sh -c``, decode pipes and wrappers all change the text
without changing the effect (failure cases B29, B30; seed "The fourth fault"). This module
parses with bashlex, walks every place a command can hide, statically evaluates the few
producers and filters obfuscation uses (echo, printf, base64 -d, xxd -r -p, tr, rev), strips
wrappers and canonicalises executables and flags. Judging what a command means (hardline,
ask) is agents/command_risk.py; deciding is agents/policy.py. Nothing here runs a command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import bashlex

from agents.command_forms import Word, decode_ansi_c, normalize_argv, static_output, unwrap

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "rbash"})
MAX_DEPTH = 8  # nested sh -c / eval / decode levels before giving up (then: unparseable)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleCommand:
    """One command the shell would execute.

    ``layers``: outermost → innermost normalised argv, e.g. ``env FOO=1 sudo id`` gives
    (("env","FOO=1","sudo","id"), ("sudo","id"), ("id",)); executables are basenames.
    ``redirects``: (operator, target) pairs. ``stdin``: "pipe", "heredoc", "file" or "".
    ``cwd``: a literal directory set by an earlier ``cd`` in the same command line, else None.
    """

    layers: tuple[tuple[str, ...], ...]
    redirects: tuple[tuple[str, str], ...] = ()
    stdin: str = ""
    stdin_text: str | None = None
    cwd: str | None = None

    @property
    def argv(self) -> tuple[str, ...]:
        return self.layers[-1]

    @property
    def name(self) -> str:
        return self.argv[0] if self.argv else ""

    def text(self, layer: int = -1) -> str:
        return " ".join(self.layers[layer])

    def display(self) -> str:
        """The outermost layer plus redirections, for people (``sudo -n id > out``)."""
        return " ".join((*self.layers[0], *(f"{op} {t}" for op, t in self.redirects)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedCommand:
    """A command line after parsing. ``findings``: (rule, detail) pairs the parser itself
    raised: "unparseable", "dynamic_name", "eval_dynamic", "pipe_to_shell", "fork_bomb",
    "exec_process_substitution", "inline_code". ``normalized``: each command's display
    form, joined by " ; "."""

    source: str
    commands: tuple[SimpleCommand, ...]
    findings: tuple[tuple[str, str], ...]

    @property
    def normalized(self) -> str:
        return " ; ".join(c.display() for c in self.commands)

    @property
    def parseable(self) -> bool:
        return not any(rule == "unparseable" for rule, _ in self.findings)


def parse_command(text: str) -> ParsedCommand:
    """Parse ``text`` into simple commands. Never raises: what bashlex cannot parse gives a
    ParsedCommand with an "unparseable" finding (the policy asks; B29)."""
    walker = _Walker(text)
    walker.parse(text, 0)
    return ParsedCommand(source=text, commands=tuple(walker.commands),
                         findings=tuple(dict.fromkeys(walker.findings)))


_FORK_BOMB = re.compile(r"([\w:.]+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")


def _prepare(text: str) -> str:
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


class _Walker:
    """Collects simple commands and findings from one command line (all nesting levels)."""

    def __init__(self, source: str):
        self.commands: list[SimpleCommand] = []
        self.findings: list[tuple[str, str]] = []
        self.env: dict[str, str] = {}
        self.functions: set[str] = set()
        self.cwd: str | None = None
        self.src = source

    def parse(self, text: str, depth: int) -> str | None:
        """Parse and walk ``text``; return its static stdout when knowable."""
        if _FORK_BOMB.search(text):
            self.findings.append(("fork_bomb", text[:80]))
        if depth > MAX_DEPTH:
            self.findings.append(("unparseable", "nesting too deep"))
            return None
        prepared = _prepare(text)
        try:
            trees = bashlex.parse(prepared)
        except Exception as exc:  # bashlex raises many types; any failure means "ask"
            self.findings.append(("unparseable", f"{type(exc).__name__}: {exc}"[:200]))
            self.fallback(prepared, depth)
            return None
        saved = self.src
        self.src = prepared
        try:
            outs = [self.walk(tree, depth) for tree in trees]
        except (RecursionError, AttributeError, IndexError, TypeError) as exc:
            self.findings.append(("unparseable", f"{type(exc).__name__}"))
            return None
        finally:
            self.src = saved
        return None if any(o is None for o in outs) else "".join(o for o in outs if o)

    def fallback(self, text: str, depth: int) -> None:
        """Crude split of a line bashlex rejected, so the hardline floor still sees its
        commands (bash may run what bashlex cannot parse; the line asks regardless)."""
        text = re.sub(r"\$\(|`|[()\n]|(?<![$\w])\{\s|\s\}(?!\w)", " ; ", text)
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        tokens: list[str] = []
        try:
            tokens.extend(lexer)
        except ValueError:
            pass  # unterminated quote: keep what came before it
        group: list[Word] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set(";&|<>"):
                if group:
                    self.argv(group, depth + 1, "", None, ())
                group = []
            else:
                group.append(Word(token))

    def walk(self, node: Any, depth: int, stdin: str | None = None, piped: bool = False
             ) -> str | None:
        kind = node.kind
        if kind == "command":
            return self.command(node, depth, stdin, piped)
        if kind == "pipeline":
            out: str | None = None
            first = True
            for part in node.parts:
                if part.kind in ("pipe", "reservedword"):
                    continue
                out = self.walk(part, depth, None if first else out, not first)
                first = False
            return out
        if kind == "function":
            name = next(p.word for p in node.parts if p.kind == "word")
            self.functions.add(name)
            body = self.src[node.pos[0]:node.pos[1]]
            if re.search(rf"(?<![\w:]){re.escape(name)}\s*[|&]", body.split("{", 1)[-1]):
                self.findings.append(("fork_bomb", body[:80]))
        outs: list[str | None] = []
        for child in _children(node):
            if child.kind in ("operator", "reservedword", "pipe"):
                continue
            outs.append(self.walk(child, depth, stdin, piped))
        if kind in ("list", "compound") and outs and all(o is not None for o in outs):
            return "".join(o for o in outs if o)
        return None

    def word(self, node: Any, depth: int) -> Word:
        """Expand one word: quotes removed, substitutions analysed (and evaluated when
        static), parameters set earlier in this line substituted, others left as written.
        Quote removal is shlex's on the raw text (bashlex mishandles ``'a'"'"'b'``), with
        each expansion held by a placeholder meanwhile."""
        start = node.pos[0]
        raw_word = self.src[start:node.pos[1]]
        parts = sorted(getattr(node, "parts", []) or [], key=lambda p: p.pos[0])
        template, cursor, fills = "", 0, []
        for i, part in enumerate(parts):
            template += raw_word[cursor:part.pos[0] - start] + f"HERMESPART{i}Z"
            cursor = part.pos[1] - start
            fills.append(self.src[part.pos[0]:part.pos[1]])
        template += raw_word[cursor:]
        try:
            tokens = shlex.split(template)
        except ValueError:
            tokens = []
        text = tokens[0] if len(tokens) == 1 else node.word
        placeholders = len(tokens) == 1
        dyn = 0
        for i, part in enumerate(parts):
            value: str | None = None
            if part.kind == "commandsubstitution":
                out = self.walk(part.command, depth)
                value = None if out is None else out.rstrip("\n")
            elif part.kind == "processsubstitution":
                self.walk(part.command, depth)
            elif part.kind == "parameter":
                value = self.env.get(getattr(part, "value", ""))
            if value is None and part.kind != "tilde" and not (
                    part.kind == "parameter" and getattr(part, "value", "") == "HOME"):
                dyn = 2  # $HOME and ~ stay as written: command_risk knows they are home
            elif value is not None:
                dyn = max(dyn, 1)
            shown = fills[i] if value is None else value
            text = (text.replace(f"HERMESPART{i}Z", shown, 1) if placeholders
                    else text.replace(fills[i], shown, 1))
        return Word(text, dyn)

    def command(self, node: Any, depth: int, stdin: str | None, piped: bool) -> str | None:
        words: list[Word] = []
        assigns: list[tuple[str, Word]] = []
        redirects: list[tuple[str, str]] = []
        heredoc: str | None = None
        for part in node.parts:
            if part.kind == "assignment":
                name, _, _ = part.word.partition("=")
                value = self.word(part, depth)
                assigns.append((name, Word(value.text.partition("=")[2], value.dyn)))
            elif part.kind == "word":
                w = self.word(part, depth)
                if w.dyn == 1:
                    words.extend(Word(t, 1) for t in w.text.split())
                else:
                    words.append(w)
            elif part.kind == "redirect":
                op = part.type
                if getattr(part, "heredoc", None) is not None:
                    heredoc = part.heredoc.value.rsplit("\n", 1)[0] + "\n"
                elif op == "<<<":
                    heredoc = self.word(part.output, depth).text + "\n"
                elif not isinstance(part.output, int):
                    redirects.append((op, self.word(part.output, depth).text))
        if not words:
            for name, value in assigns:
                if value.dyn < 2:
                    self.env[name] = value.text
            return ""
        mode = "pipe" if piped else "heredoc" if heredoc is not None else (
            "file" if any(op == "<" for op, _ in redirects) else "")
        data = stdin if piped else heredoc
        return self.argv(words, depth, mode, data, tuple(redirects))

    def argv(self, words: list[Word], depth: int, mode: str, data: str | None,
             redirects: tuple[tuple[str, str], ...]) -> str | None:
        """Register one simple command (wrappers peeled into layers) and follow what it
        runs: shell payloads, eval, find -exec, scripts fed on stdin."""
        layers: list[tuple[str, ...]] = []
        current: list[Word] | None = words
        while current:
            if current[0].dyn:
                self.findings.append(("dynamic_name", current[0].text))
            texts = tuple(w.text for w in current)
            layers.append(texts if current[0].dyn == 2 else normalize_argv(texts))
            nxt = unwrap(current)
            if nxt is None:
                break
            if layers[-1][0] == "xargs" and data is not None:
                nxt = nxt + [Word(t, 1) for t in data.split()]  # xargs appends its stdin
            current = nxt
        if not layers:
            return ""
        inner = [w for w in (current or [])]
        cmd = SimpleCommand(layers=tuple(layers), redirects=redirects, stdin=mode,
                            stdin_text=data, cwd=self.cwd)
        self.commands.append(cmd)
        name = cmd.name
        if name == "cd" and len(inner) >= 1:
            target = inner[1].text if len(inner) > 1 else "~"
            self.cwd = target if inner[-1].dyn == 0 else None
        if name in SHELLS:
            self.shell(inner, depth, mode, data)
        elif name == "su":
            texts = [w.text for w in inner]
            flag = next((i for i, t in enumerate(texts) if t in ("-c", "--command")), None)
            if flag is not None and flag + 1 < len(inner):
                self.parse(inner[flag + 1].text, depth + 1)
        elif name == "sudo" and mode in ("pipe", "heredoc"):
            self.shell(inner[:1], depth, mode, data)
        elif name in ("eval", "watch"):
            args = inner[1:]
            while name == "watch" and args and args[0].text.startswith("-"):
                args = args[2:] if args[0].text in ("-n", "--interval") else args[1:]
            if any(w.dyn == 2 for w in args):
                self.findings.append(("eval_dynamic", cmd.text()))
            self.parse(" ".join(w.text for w in args), depth + 1)
        elif name in ("source", ".") and (len(inner) < 2 or inner[1].dyn == 2
                                          or inner[1].text.startswith("/dev/")):
            self.findings.append(("exec_process_substitution", cmd.text()))
        elif name == "find":
            self.find_exec(inner, depth)
        elif re.fullmatch(r"(python[0-9.]*|perl|ruby|node|nodejs|php|lua|Rscript|osascript)", name):
            if any(w.text in ("-c", "-e", "-r", "--eval", "-E") for w in inner[1:]) or \
                    (mode in ("pipe", "heredoc") and len(inner) == 1) or \
                    any(w.text == "-" for w in inner[1:]):
                self.findings.append(("inline_code", cmd.text()))
        return static_output(cmd.argv, data)

    def shell(self, inner: list[Word], depth: int, mode: str, data: str | None) -> None:
        args = inner[1:]
        i = 0
        while i < len(args):
            arg = args[i].text
            if arg in ("-o", "+o", "--rcfile", "--init-file"):
                i += 2
                continue
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
                payload = next((w for w in args[i + 1:] if not w.text.startswith("-")), None)
                if payload is None or payload.dyn == 2:
                    self.findings.append(("eval_dynamic", " ".join(w.text for w in inner)))
                if payload is not None:
                    self.parse(payload.text, depth + 1)
                return
            if arg.startswith(("-", "+")) and arg not in ("-", "--"):
                i += 1
                continue
            break
        operands = [w for w in args[i:] if w.text not in ("-", "--")]
        if operands:
            if operands[0].dyn == 2:
                self.findings.append(("exec_process_substitution", operands[0].text))
            return
        if mode == "pipe":
            self.findings.append(("pipe_to_shell", "a shell reads its script from a pipe"))
        if data is not None:
            self.parse(data, depth + 1)

    def find_exec(self, inner: list[Word], depth: int) -> None:
        for i, w in enumerate(inner):
            if w.text in ("-exec", "-execdir", "-ok", "-okdir"):
                rest = inner[i + 1:]
                end = next((j for j, r in enumerate(rest) if r.text in (";", "+")), len(rest))
                if rest[:end]:
                    self.argv(rest[:end], depth + 1, "", None, ())


def _children(node: Any) -> list[Any]:
    out: list[Any] = []
    for attr in ("parts", "list"):
        out.extend(getattr(node, attr, None) or [])
    for attr in ("command", "output"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, int) and hasattr(child, "kind"):
            out.append(child)
    out.extend(getattr(node, "redirects", None) or [])
    return out
