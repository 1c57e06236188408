"""Shell commands reduced to their meaning: the simple commands a shell would really run.

A deny list run over the raw string is defeated by the shell itself: quotes, escapes,
``${IFS}``, ``$(...)``, ``eval``, ``sh -c``, decode pipes and wrappers all change the text
without changing the effect (failure cases B29, B30; seed "The fourth fault"). This module
parses with bashlex, walks every place a command can hide, statically evaluates the few
producers and filters obfuscation uses (echo, printf, base64 -d, xxd -r -p, tr, rev), strips
wrappers and canonicalises executables and flags. Judging what a command means (hardline,
ask) is agents/policy/command_risk.py; deciding is agents/policy/__init__.py. Nothing here runs a command.
"""

from __future__ import annotations

import re
import shlex
from fnmatch import fnmatchcase
from typing import Any

import bashlex

from agents.policy.command_forms import (Word, git_globals, in_double_quotes, normalize_argv,
                                  prepare_for_parsing, static_output, unwrap)
from agents.policy.command_hooks import HookWalker
from agents.policy.command_model import ParsedCommand, SimpleCommand
from agents.policy.command_options import option_commands
from agents.policy.command_scripts import ScriptReader
from agents.policy.command_tables import (AWKS, DOWNLOADERS, EDITORS, GLOB_CANDIDATES, INTERPRETER,
                                   KNOWN_PROGRAMS, SHELLS, WRITE_PROGRAMS, _GLOB_NAME)

MAX_DEPTH = 8  # nested sh -c / eval / decode levels before giving up (then: unparseable)


def parse_command(text: str, reader: ScriptReader | None = None) -> ParsedCommand:
    """Parse ``text`` into simple commands. Never raises: what bashlex cannot parse gives a
    ParsedCommand with an "unparseable" finding (the policy asks; B29). ``reader`` reads
    the scripts the command runs (``sh x``, ``. x``, ``python x.py``, ``./x``); without one
    every such script is unreadable (asks)."""
    walker = _Walker(text, reader)
    walker.parse(text, 0)
    return ParsedCommand(source=text, commands=tuple(walker.commands),
                         findings=tuple(dict.fromkeys(walker.findings)))


_FORK_BOMB = re.compile(r"([\w:.]+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")


class _Walker(HookWalker):
    """Collects simple commands and findings from one command line (all nesting levels)."""

    def __init__(self, source: str, reader: ScriptReader | None = None):
        self.reader = reader
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
        prepared = prepare_for_parsing(text)
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
            downloaded = False
            for part in node.parts:
                if part.kind in ("pipe", "reservedword"):
                    continue
                start = len(self.commands)
                out = self.walk(part, depth, None if first else out, not first)
                first = False
                names = {layer[0] for c in self.commands[start:] for layer in c.layers}
                if downloaded and any(n in SHELLS or INTERPRETER.fullmatch(n) or n in (
                        "source", ".", "eval", "xargs", "sudo") for n in names) and not any(
                        r == "pipe_to_shell" for r, _ in self.findings):
                    # ``curl x | python3 - arg``, ``wget -O- x | bash -s -- y``: with or
                    # without arguments, the interpreter runs what was downloaded.
                    self.findings.append(("download_exec", "a download is piped to an "
                                          "interpreter"))
                downloaded = downloaded or bool(names & DOWNLOADERS)
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
        if kind == "compound" and getattr(node, "redirects", None):
            # ``{ ...; } > f``, ``while ...; done < f``: the group's redirections apply to
            # every command in it; register them as ``:`` so the floor and the path checks
            # see the file written or read (as for a command that is only a redirect).
            reds = tuple((r.type, self.word(r.output, depth).text) for r in node.redirects
                         if getattr(r, "heredoc", None) is None and r.type != "<<<"
                         and not isinstance(r.output, int))
            if reds:
                self.argv([Word(":")], depth, "", None, reds)
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
        quoted = bool(parts) and all(in_double_quotes(template, f"HERMESPART{i}Z")
                                     for i in range(len(parts)))
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
        return Word(text, dyn, quoted)

    def command(self, node: Any, depth: int, stdin: str | None, piped: bool) -> str | None:
        words: list[Word] = []
        assigns: list[tuple[str, Word]] = []
        redirects: list[tuple[str, str]] = []
        computed: list[str] = []  # redirect targets and assignments the shell computes
        heredoc: str | None = None
        for part in node.parts:
            if part.kind == "assignment":
                name, _, _ = part.word.partition("=")
                value = self.word(part, depth)
                assigns.append((name, Word(value.text.partition("=")[2], value.dyn)))
                if value.dyn == 2:
                    computed.append(f"{name}={assigns[-1][1].text}")
            elif part.kind == "word":
                w = self.word(part, depth)
                if w.dyn == 1 and not w.quoted:
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
                    target = self.word(part.output, depth)
                    redirects.append((op, target.text))
                    if target.dyn == 2:
                        computed.append(target.text)
        for name, value in assigns:
            self.env_hook(name, value, depth)
        if not words:
            for name, value in assigns:
                if value.dyn < 2:
                    self.env[name] = value.text
            if redirects:
                # A command that is only a redirect (``> /dev/sda``) still writes: register
                # it as ``:`` so the floor and the path checks see its target (finding 3).
                return self.argv([Word(":")], depth, "", None, tuple(redirects),
                                 computed=tuple(computed))
            return ""
        mode = "pipe" if piped else "heredoc" if heredoc is not None else (
            "file" if any(op == "<" for op, _ in redirects) else "")
        data = stdin if piped else heredoc
        return self.argv(words, depth, mode, data, tuple(redirects),
                         assigns=tuple(f"{n}={v.text}" for n, v in assigns),
                         computed=tuple(computed))

    def argv(self, words: list[Word], depth: int, mode: str, data: str | None,
             redirects: tuple[tuple[str, str], ...], assigns: tuple[str, ...] = (),
             computed: tuple[str, ...] = ()) -> str | None:
        """Register one simple command (wrappers peeled into layers) and follow what it
        runs: shell payloads, scripts, eval, find -exec, awk system(), editor ``!``, tar
        checkpoint actions, git aliases, at, ssh, env-var hooks, unknown wrappers."""
        layers: list[tuple[str, ...]] = []
        current: list[Word] | None = words
        xargs_blind = False
        while current:
            while layers and len(current) > 1 and re.match(r"[A-Za-z_]\w*=", current[0].text):
                # ``sudo X=1 cmd``: a wrapper passes the assignment on as environment
                key, _, value = current[0].text.partition("=")
                self.env_hook(key, Word(value, current[0].dyn), depth)
                current = current[1:]
            head = current[0]
            if head.dyn:
                self.findings.append(("dynamic_name", head.text))
            elif _GLOB_NAME.search(head.text):
                # ``/???/r? -rf /``, ``/bin/r[m]``: the shell picks the program; ask, and
                # let the floor judge every dangerous program the glob could name.
                self.findings.append(("dynamic_name", head.text))
                base = head.text.rsplit("/", 1)[-1]
                for prog in GLOB_CANDIDATES:
                    if fnmatchcase(prog, base):
                        self.argv([Word(prog), *current[1:]], depth + 1, mode, data, redirects)
            texts = tuple(w.text for w in current)
            layers.append(texts if head.dyn == 2 else normalize_argv(texts))
            if layers[-1][0] == "env":
                for w in current[1:]:
                    if w.text.startswith("-"):
                        continue
                    if "=" not in w.text:
                        break
                    key, _, value = w.text.partition("=")
                    self.env_hook(key, Word(value, w.dyn), depth)
            nxt = unwrap(current)
            if nxt is None:
                break
            if layers[-1][0] == "xargs":
                if data is not None:
                    nxt = nxt + [Word(t, 1) for t in data.split()]  # xargs appends its stdin
                else:
                    xargs_blind = True
            current = nxt
        if not layers:
            return ""
        inner = [w for w in (current or [])]
        cmd = SimpleCommand(layers=tuple(layers), redirects=redirects, stdin=mode,
                            stdin_text=data, cwd=self.cwd, assigns=assigns,
                            options=git_globals(tuple(w.text for w in words)),
                            computed=(*(w.text for w in words[1:] if w.dyn == 2), *computed))
        self.commands.append(cmd)
        name = cmd.name
        if xargs_blind and name in WRITE_PROGRAMS:
            self.findings.append(("xargs_operands", cmd.text()))
        if name in ("cd", "pushd", "popd"):
            self.cd(inner)
        elif name in ("export", "declare", "typeset", "readonly", "local"):
            for w in inner[1:]:
                if "=" in w.text and not w.text.startswith("-"):
                    key, _, value = w.text.partition("=")
                    self.env_hook(key, Word(value, w.dyn), depth)
        # A command in an option or a script text (sed e, script -c, man -P, sqlite3 .shell):
        # judged like any command, or a finding when it cannot be seen (command_options.py).
        for kind, text in option_commands(name, [w.text for w in inner[1:]], data):
            if kind == "command":
                self.parse(text, depth + 1)
            else:
                self.findings.append((kind, text))
        if name in SHELLS:
            self.shell(inner, depth, mode, data)
        elif name == "su":
            texts = [w.text for w in inner]
            flag = next((i for i, t in enumerate(texts) if t in ("-c", "--command")), None)
            if flag is not None and flag + 1 < len(inner):
                self.parse(inner[flag + 1].text, depth + 1)
        elif name == "sudo" and mode in ("pipe", "heredoc"):
            self.shell(inner[:1], depth, mode, data)
        elif name in ("eval", "watch", "trap"):
            # trap's first operand is a command the shell runs later (on EXIT, a signal):
            # `trap 'rm -rf ./*' EXIT` is that command (second-user attack A1).
            args = ([w for w in inner[1:] if not w.text.startswith("-")][:1]
                    if name == "trap" else inner[1:])
            while name == "watch" and args and args[0].text.startswith("-"):
                args = args[2:] if args[0].text in ("-n", "--interval") else args[1:]
            if any(w.dyn == 2 for w in args):
                self.findings.append(("eval_dynamic", cmd.text()))
            self.parse(" ".join(w.text for w in args), depth + 1)
        elif name in ("source", "."):
            if len(inner) < 2 or inner[1].dyn == 2 or inner[1].text.startswith("/dev/"):
                self.findings.append(("exec_process_substitution", cmd.text()))
            else:
                self.script(inner[1], "sh", depth, sourced=True)
        elif name == "find":
            self.find_exec(inner, depth)
        elif INTERPRETER.fullmatch(name):
            self.interpreter(cmd, inner, depth, mode, data)
        elif name in AWKS:
            self.awk(inner, depth)
        elif name in EDITORS:
            self.editor(inner, depth, data)
        elif name == "tar":
            self.tar(inner, depth)
        elif name == "git":
            self.git(inner, depth)
        elif name in ("at", "batch"):
            self.findings.append(("schedules", cmd.text()))
            if data is not None:
                self.parse(data, depth + 1)
        elif name == "ssh":
            self.ssh(inner, depth)
        elif inner and "/" in inner[0].text and inner[0].dyn == 0 and self._runs_file(inner[0]):
            self.script(inner[0], "auto", depth)
        elif name not in KNOWN_PROGRAMS:
            self.unknown_wrapper(inner, depth, mode, data)
        return static_output(cmd.argv, data)

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
