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
from fnmatch import fnmatchcase
from typing import Any, Protocol

import bashlex

from agents.command_forms import Word, decode_ansi_c, normalize_argv, static_output, unwrap
from agents.command_scripts import (ScriptEffects, other_script_effects, python_effects,
                                    read_workspace_file, shebang_interpreter)

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "rbash"})
MAX_DEPTH = 8  # nested sh -c / eval / decode levels before giving up (then: unparseable)
UNKNOWN_CWD = "\x00unknown-cwd"
"""SimpleCommand.cwd after a ``cd`` whose target cannot be known (``cd "$X"``, ``cd -``)."""
INTERPRETER = re.compile(r"python[0-9.]*|pypy3?|perl|ruby|node|nodejs|php|lua[0-9.]*|Rscript"
                         r"|osascript|deno|bun|tclsh|wish|jshell|groovy|julia")
AWKS = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
EDITORS = frozenset({"vi", "vim", "nvim", "ex", "view", "vimdiff", "ed", "red", "emacs",
                     "nano"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "httpie", "lynx",
                         "links", "w3m", "nc", "ncat", "netcat", "socat", "ftp", "tftp",
                         "lwp-request", "GET", "xh"})
_GLOB_NAME = re.compile(r"[*?]|\[[^\]]*\]")
GLOB_CANDIDATES = ("rm", "rmdir", "dd", "shred", "mkfs", "mke2fs", "mkswap", "wipefs",
                   "blkdiscard", "fdisk", "sfdisk", "parted", "sgdisk", "chmod", "chown",
                   "chgrp", "kill", "killall", "pkill", "reboot", "shutdown", "halt",
                   "poweroff", "init", "systemctl", "mv", "cp", "truncate", "find", "tee",
                   "ln", "sh", "bash", "dash", "zsh", "sudo", "su", "curl", "wget", "python",
                   "python3", "perl", "eval", "sqlite3")
"""Programs a glob in a command name is tried against, so the floor still sees them."""
WRITE_PROGRAMS = frozenset({"rm", "rmdir", "unlink", "shred", "mv", "cp", "ln", "chmod",
                            "chown", "chgrp", "truncate", "tee", "dd", "touch", "install"})
RUN_WORDS = SHELLS | WRITE_PROGRAMS | {
    "sudo", "su", "doas", "kill", "pkill", "killall", "curl", "wget", "eval", "exec", "python",
    "python3", "perl", "ruby", "node", "mkfs", "wipefs", "reboot", "shutdown", "poweroff",
    "halt", "find", "xargs", "sqlite3", "psql", "systemctl", "crontab"}
"""Words that, after an unknown program, look like the command it would run."""
KNOWN_PROGRAMS = frozenset("""
: [ [[ alias apropos apt-cache basename bat cal cat cd chdir clear cmp column comm command
compgen complete cut date declare df diff dig dirname dmesg docker du echo egrep env export
expr false fd fgrep file fmt fold free gcc getent git go grep gunzip gzip hash head help
history host hostname id info ip jobs jq kubectl less ln locate look ls lsblk lsof make man
md5sum mkdir more mount npm npx nl od pip pip3 pnpm popd printenv printf ps pushd pwd
readlink realpath rg ag sed seq set sha1sum sha256sum shift sort stat strings tail test tldr
touch tput tr true type typeset ulimit umask uname unalias uniq unset uptime wc whatis
whereis which who whoami yarn yes cargo rustc pytest tox uv poetry mypy ruff black isort
flake8 pylint eslint prettier tsc go mvn gradle cmake ninja javac java dotnet sqlite3 psql
mysql redis-cli helm terraform aws gcloud az brew apt apt-get dnf yum apk pacman snap
systemctl service journalctl top htop nproc lscpu watch time sleep wait read trap return
exit break continue local readonly getopts dirs disown fg bg kill pkill killall xargs tee
tar zip unzip xz bzip2 zstd rsync scp cp mv rm rmdir mkdir chmod chown chgrp truncate dd
shred sha512sum base64 base32 xxd hexdump rev shuf split csplit paste join expand unexpand
iconv envsubst diff3 patch git-lfs gh hub code idea open xdg-open curl wget http ping
traceroute nslookup ss netstat lsattr chattr setfacl getfacl numfmt timeout nice nohup
""".split())
"""Programs that do not run their arguments as commands (or are analysed on their own):
anything else given a command-like word is an unknown wrapper (issue 8 item 4)."""
COMMAND_VARS = frozenset({"PAGER", "GIT_PAGER", "MANPAGER", "EDITOR", "VISUAL", "GIT_EDITOR",
                          "GIT_SEQUENCE_EDITOR", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF",
                          "GIT_PROXY_COMMAND", "LESSOPEN", "LESSCLOSE", "BROWSER",
                          "SYSTEMD_PAGER", "PSQL_PAGER", "SUDO_EDITOR"})
"""Variables whose value another program runs as a command: parsed like one."""
HOOK_VARS = frozenset({"BASH_ENV", "ENV", "PROMPT_COMMAND", "PS4", "SHELLOPTS",
                       "BASHOPTS", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
                       "DYLD_INSERT_LIBRARIES", "GCONV_PATH", "PYTHONSTARTUP", "PYTHONHOME",
                       "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS",
                       "GIT_SSH", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS",
                       "SUDO_ASKPASS", "GIT_TEMPLATE_DIR", "GIT_CONFIG_PARAMETERS",
                       "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                       "ZDOTDIR", "INPUTRC", "HOSTALIASES", "LOCPATH", "MALLOC_CONF"})
"""Variables that make a program load code or run a startup hook: setting one asks."""
GIT_EXEC_KEYS = frozenset({"core.pager", "core.sshcommand", "core.editor", "core.fsmonitor",
                           "core.hookspath", "core.askpass", "core.gitproxy", "diff.external",
                           "sequence.editor", "gpg.program", "gpg.ssh.program",
                           "uploadpack.packobjectshook", "protocol.ext.allow", "include.path",
                           "credential.helper", "web.browser", "man.viewer", "core.worktree",
                           "gpg.x509.program", "ssh.variant"})
GIT_BUILTINS = frozenset("""
add am annotate apply archive bisect blame branch bundle cat-file check-attr check-ignore
check-ref-format checkout cherry cherry-pick clean clone commit commit-graph config
count-objects describe diff diff-files diff-index diff-tree difftool fetch for-each-ref
format-patch fsck gc grep hash-object help init log ls-files ls-remote ls-tree merge
merge-base mergetool mv name-rev notes pull push range-diff rebase reflog remote repack
replace reset restore rev-list rev-parse revert rm shortlog show show-ref sparse-checkout
stash status submodule switch symbolic-ref tag update-index update-ref verify-commit
version whatchanged worktree write-tree lfs maintenance var blame gui citool instaweb
""".split())


class ScriptReader(Protocol):
    """Reads scripts a command runs (agents/command_scripts.py). ``read``: the text, or
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
        import os.path as osp  # noqa: PLC0415 - stdlib alias for a short local name

        root = osp.realpath(self.workspace)
        return osp.commonpath([osp.realpath(path), root]) == root if path.startswith("/") \
            else True


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
        return " ".join((*(shlex.quote(w) if w else "''" for w in self.layers[0]),
                         *(f"{op} {shlex.quote(t)}" for op, t in self.redirects)))


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
        quoted = bool(parts) and all(_in_double_quotes(template, f"HERMESPART{i}Z")
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
        heredoc: str | None = None
        for part in node.parts:
            if part.kind == "assignment":
                name, _, _ = part.word.partition("=")
                value = self.word(part, depth)
                assigns.append((name, Word(value.text.partition("=")[2], value.dyn)))
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
                    redirects.append((op, self.word(part.output, depth).text))
        for name, value in assigns:
            self.env_hook(name, value, depth)
        if not words:
            for name, value in assigns:
                if value.dyn < 2:
                    self.env[name] = value.text
            if redirects:
                # A command that is only a redirect (``> /dev/sda``) still writes: register
                # it as ``:`` so the floor and the path checks see its target (finding 3).
                return self.argv([Word(":")], depth, "", None, tuple(redirects))
            return ""
        mode = "pipe" if piped else "heredoc" if heredoc is not None else (
            "file" if any(op == "<" for op, _ in redirects) else "")
        data = stdin if piped else heredoc
        return self.argv(words, depth, mode, data, tuple(redirects))

    def argv(self, words: list[Word], depth: int, mode: str, data: str | None,
             redirects: tuple[tuple[str, str], ...]) -> str | None:
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
                            stdin_text=data, cwd=self.cwd)
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

    def _runs_file(self, head: Word) -> bool:
        """``./build.sh``, ``scripts/x``, ``/tmp/x``: a file that is not a system program."""
        text = head.text
        if not text.startswith("/"):
            return True
        return not re.match(r"/(usr|bin|sbin|opt|snap|nix|lib\w*|etc)/", text) or (
            self.reader is not None and self.reader.inside(text, self.cwd))

    def cd(self, inner: list[Word]) -> None:
        """Track the working directory through ``cd``: relative targets join the current
        one; an unknown target (``cd -``, ``cd "$X"``, ``popd``) makes it UNKNOWN_CWD."""
        args = [w for w in inner[1:] if not w.text.startswith("-") or w.text == "-"]
        if inner[0].text == "popd":
            self.cwd = UNKNOWN_CWD
            return
        if not args:
            self.cwd = "~"
            return
        target = args[0]
        if target.dyn == 2 or target.text == "-" or self.cwd == UNKNOWN_CWD:
            self.cwd = UNKNOWN_CWD
            return
        text = re.sub(r"^(\$HOME|\$\{HOME\})(?=/|$)", "~", target.text)
        if text.startswith(("/", "~")) or self.cwd is None:
            self.cwd = text
        else:
            self.cwd = self.cwd.rstrip("/") + "/" + text

    def env_hook(self, name: str, value: Word, depth: int) -> None:
        """An environment variable another program executes or loads (BASH_ENV, ENV,
        PROMPT_COMMAND, LD_PRELOAD, GIT_SSH_COMMAND, PAGER ...): its value is parsed as a
        command where it is one; a loader or startup hook asks regardless."""
        if name in COMMAND_VARS:
            if value.dyn == 2:
                self.findings.append(("env_hook", f"{name}={value.text}"))
            self.parse(value.text, depth + 1)
            return
        if name == "NODE_OPTIONS" and not re.search(r"(^|\s)(-r|--require|--import|--loader|"
                                                    r"--experimental-loader)\b", value.text):
            return
        if value.dyn and re.fullmatch(r"\$\{?_?OLD_\w*(:-)?\}?", value.text):
            return  # restoring a saved value (a venv's deactivate), not a new hook
        if name in HOOK_VARS or name.startswith(("BASH_FUNC_", "GIT_CONFIG_KEY_",
                                                 "GIT_CONFIG_VALUE_")):
            self.findings.append(("env_hook", f"{name}={value.text}"[:120]))
            if name in ("PROMPT_COMMAND", "GIT_CONFIG_VALUE_0"):
                self.parse(value.text, depth + 1)

    def script(self, path: Word, kind: str, depth: int, *, sourced: bool = False) -> None:
        """Read a script the command runs and judge it like the command itself (finding 3).
        ``kind``: "sh", "python", "other" or "auto" (by its ``#!`` line; none: a shell).
        Unreadable (not in the workspace, a symlink, missing, too big) asks."""
        if path.dyn == 2 or self.reader is None or self.cwd == UNKNOWN_CWD:
            self.findings.append(("script_unreadable", path.text))
            return
        text = self.reader.read(path.text, self.cwd)
        if text is None:
            self.findings.append(("script_unreadable", path.text))
            return
        if kind == "auto":
            interp = shebang_interpreter(text)
            kind = ("sh" if not interp or interp in SHELLS else
                    "python" if interp.startswith("python") else
                    "other" if INTERPRETER.fullmatch(interp) else "unknown")
        if kind == "sh":
            saved_cwd = self.cwd
            self.parse(text, depth + 1)
            if not sourced:
                self.cwd = saved_cwd  # a child shell's cd does not move this one
            return
        effects = (python_effects(text) if kind == "python" else
                   other_script_effects(text) if kind == "other" else
                   ScriptEffects((), "the script's interpreter is not one the policy reads"))
        for line in effects.commands:
            self.parse(line, depth + 1)
        if effects.opaque:
            self.findings.append(("script_opaque", f"{path.text}: {effects.opaque}"))

    def interpreter(self, cmd: SimpleCommand, inner: list[Word], depth: int, mode: str,
                    data: str | None) -> None:
        """python / perl / ruby / node ...: inline code (``-c``/``-e``, a heredoc) and a
        script operand are read and judged like a script (agents/command_scripts.py);
        code read from a pipe cannot be seen and asks."""
        name = cmd.name
        kind = "python" if name.startswith(("python", "pypy")) else "other"
        args = inner[1:]
        inline = ("-c",) if kind == "python" else ("-e", "-E", "-r", "--eval", "-p",
                                                     "--print", "-pe", "-ne", "-le")
        i = 0
        while i < len(args):
            a = args[i].text
            if a in inline or kind == "python" and a.startswith("-") and not a.startswith(
                    "--") and a.endswith("c") and len(a) > 2:
                payload = args[i + 1] if i + 1 < len(args) else None
                if payload is None or payload.dyn == 2:
                    self.findings.append(("inline_code", cmd.text()))
                    return
                self.code(payload.text, kind, depth, "inline code")
                return
            if a in ("-m", "--version", "-V", "--help", "-h", "-i"):
                return  # a module, or no script
            if a == "-":
                break
            if a in ("-W", "-X", "--require", "-I", "--inspect-port"):
                i += 2
                continue
            if a.startswith("-"):
                i += 1
                continue
            self.script(args[i], kind, depth)
            return
        if data is not None and mode == "heredoc":
            self.code(data, kind, depth, "a heredoc")
        elif mode in ("pipe", "heredoc") or any(w.text == "-" for w in args):
            self.findings.append(("inline_code", cmd.text()))

    def code(self, text: str, kind: str, depth: int, what: str) -> None:
        effects = python_effects(text) if kind == "python" else other_script_effects(text)
        for line in effects.commands:
            self.parse(line, depth + 1)
        if effects.opaque:
            self.findings.append(("script_opaque", f"{what}: {effects.opaque}"))

    def awk(self, inner: list[Word], depth: int) -> None:
        """awk's program: ``system("...")``, ``print | "cmd"``, ``"cmd" | getline``."""
        args = inner[1:]
        i = 0
        while i < len(args):
            a = args[i].text
            if a in ("-f", "--file"):
                text = None if self.reader is None or i + 1 >= len(args) else \
                    self.reader.read(args[i + 1].text, self.cwd)
                if text is None:
                    self.findings.append(("script_unreadable", " ".join(w.text for w in inner)))
                    return
                self.awk_program(text, depth)
                i += 2
                continue
            if a in ("-v", "-F", "--assign", "--field-separator", "-i", "--include"):
                i += 2
                continue
            if a.startswith("-") and a != "-":
                i += 1
                continue
            if args[i].dyn == 2:
                self.findings.append(("exec_hook", "awk program computed at run time"))
            self.awk_program(a, depth)
            return

    def awk_program(self, prog: str, depth: int) -> None:
        literal = r'"((?:[^"\\]|\\.)*)"'
        pattern = re.compile(rf"\bsystem\s*\(\s*{literal}\s*\)|\|&?\s*{literal}"
                             rf"|{literal}\s*\|&?\s*getline")
        for m in pattern.finditer(prog):
            payload = decode_ansi_c(next(g for g in m.groups() if g is not None))
            self.parse(payload, depth + 1)
            first = payload.split(" ", 1)[0].rsplit("/", 1)[-1]
            if m.group(0).lstrip().startswith("|") and (first in SHELLS
                                                        or INTERPRETER.fullmatch(first)):
                self.findings.append(("exec_hook", f"awk prints commands to {first}"))
        rest = pattern.sub("", prog)
        if re.search(r"\bsystem\s*\(|\|&?\s*getline|\b(print|printf)\b[^;{}]*\|", rest):
            self.findings.append(("exec_hook", "awk runs a command it computes"))

    def editor(self, inner: list[Word], depth: int, data: str | None) -> None:
        """vi / vim / ex / ed: ``-c '!cmd'``, ``+'!cmd'``, ``:!cmd`` and ``!cmd`` lines
        read from stdin run shell commands."""
        cmds: list[str] = []
        args = inner[1:]
        for i, w in enumerate(args):
            if w.text in ("-c", "--cmd") and i + 1 < len(args):
                cmds.append(args[i + 1].text)
            elif w.text.startswith("+") and len(w.text) > 1:
                cmds.append(w.text[1:])
            elif w.text in ("-S", "-s", "-u", "--servername") or w.dyn == 2:
                self.findings.append(("exec_hook", f"{inner[0].text} reads commands from a "
                                      "file or another instance"))
        if data is not None:
            cmds += data.splitlines()
        for text in cmds:
            body = text.strip().lstrip(":").strip()
            bang = re.search(r"(?:^|[\s%]|\br(?:ead)?\s*|\bw(?:rite)?\s*)!(.*)$", body)
            if bang:
                self.findings.append(("exec_hook", f"editor shell escape: {body[:80]}"))
                self.parse(bang.group(1), depth + 1)
            elif re.search(r"\bsystem\s*\(|\bterm(inal)?\b|\bpy(thon)?3?\b|\blua\b|\bperl\b",
                           body):
                self.findings.append(("exec_hook", f"editor runs code: {body[:80]}"))

    def tar(self, inner: list[Word], depth: int) -> None:
        """tar's exec hooks: --checkpoint-action=exec=, --to-command, -I/--use-compress-
        program, --rsh-command, --info-script / -F / --new-volume-script."""
        args = [w.text for w in inner[1:]]
        for i, a in enumerate(args):
            nxt = args[i + 1] if i + 1 < len(args) else ""
            key, eq, value = a.partition("=")
            if not eq:
                value = nxt
            if key == "--checkpoint-action":
                if value.startswith("exec="):
                    self.parse(value[5:], depth + 1)
                    self.findings.append(("exec_hook", f"tar --checkpoint-action={value}"))
            elif key in ("--to-command", "--use-compress-program", "--rsh-command", "-I"):
                self.parse(value, depth + 1)
                if value.split(" ", 1)[0] not in ("gzip", "bzip2", "xz", "zstd", "lz4",
                                                  "pigz", "lzma", "zstd -T0", "brotli"):
                    self.findings.append(("exec_hook", f"tar {key} {value}"[:120]))
            elif key in ("--info-script", "--new-volume-script", "-F"):
                self.findings.append(("exec_hook", f"tar {key} runs a script"))

    def git(self, inner: list[Word], depth: int) -> None:
        """git ``-c key=value`` and ``git config key value``: aliases beginning with ``!``
        are parsed; keys that name a program (core.pager, core.sshCommand, core.fsmonitor,
        core.hooksPath, filters, diff drivers ...) ask. A subcommand that is not built in is
        an alias: read from the workspace's .git/config, or asked about."""
        args = inner[1:]
        i = 0
        while i < len(args) and args[i].text.startswith("-"):
            a = args[i].text
            if a == "-c" and i + 1 < len(args):
                key, _, value = args[i + 1].text.partition("=")
                self.git_config(key, value, depth, persistent=False)
                i += 2
                continue
            if a.startswith("--config-env") or a.startswith("--exec-path="):
                self.findings.append(("exec_hook", f"git {a}"))
            i += 2 if a in ("-C", "--git-dir", "--work-tree", "--namespace",
                            "--config-env") else 1
        if i >= len(args):
            return
        sub = args[i].text
        rest = [w.text for w in args[i + 1:]]
        if sub == "config":
            plain = [a for a in rest if not a.startswith("-")]
            if plain and plain[0] in ("set", "add"):
                plain = plain[1:]
            if len(plain) >= 2:
                self.git_config(plain[0], plain[1], depth, persistent=True)
        elif sub not in GIT_BUILTINS and not args[i].dyn:
            alias = self.git_alias(sub)
            if alias is None:
                self.findings.append(("exec_hook", f"git {sub} is not a built-in command "
                                      "(an alias the policy cannot read)"))
            elif alias.startswith("!"):
                self.parse(alias[1:] + " " + " ".join(rest), depth + 1)

    def git_alias(self, name: str) -> str | None:
        if self.reader is None:
            return None
        text = self.reader.read(".git/config", self.cwd if self.cwd != UNKNOWN_CWD else None)
        if text is None:
            return None
        section = ""
        for line in text.splitlines():
            s = line.strip()
            if s.startswith("["):
                section = s.strip("[]").strip().lower()
            elif section == "alias" and "=" in s:
                key, _, value = s.partition("=")
                if key.strip().lower() == name.lower():
                    return value.strip().strip('"')
        return None

    def git_config(self, key: str, value: str, depth: int, *, persistent: bool) -> None:
        k = key.lower()
        if k.startswith("alias."):
            if value.startswith("!"):
                self.parse(value[1:], depth + 1)
                if persistent:
                    self.findings.append(("exec_hook", f"git alias {key} runs a shell command"))
            return
        if k in GIT_EXEC_KEYS or k.startswith(("pager.", "includeif.", "remote.")) and (
                k.endswith(("uploadpack", "receivepack", "proxy")) or k.startswith(
                ("pager.", "includeif."))) or (k.startswith(("filter.", "diff.", "merge."))
                and k.rsplit(".", 1)[-1] in ("clean", "smudge", "process", "command",
                                              "textconv", "driver")) or (
                k.startswith("credential") and k.endswith("helper")):
            self.findings.append(("exec_hook", f"git {key} names a program git will run"))
            self.parse(value.lstrip("!"), depth + 1)

    def ssh(self, inner: list[Word], depth: int) -> None:
        """ssh host [command]: the command runs on another host (asks), and is parsed so
        the floor still sees it."""
        args = inner[1:]
        i = 0
        while i < len(args):
            a = args[i].text
            if a.startswith("-") and len(a) == 2 and a[1] in "bcDEeFIiJLlmOopQRSWw":
                i += 2
                continue
            if a.startswith("-"):
                i += 1
                continue
            break
        self.findings.append(("remote_host", " ".join(w.text for w in inner)[:120]))
        payload = args[i + 1:]
        if payload:
            self.parse(" ".join(w.text for w in payload), depth + 1)

    def unknown_wrapper(self, inner: list[Word], depth: int, mode: str, data: str | None
                        ) -> None:
        """A program the policy does not know, given what looks like a command (``foo rm
        -rf build``): it may run it, so it asks and the tail is judged as a command."""
        for i, w in enumerate(inner[1:], start=1):
            if w.dyn == 0 and w.text.rsplit("/", 1)[-1] in RUN_WORDS:
                self.findings.append(("unknown_wrapper", " ".join(x.text for x in inner)[:120]))
                self.argv(inner[i:], depth + 1, mode, data, ())
                return

    def shell(self, inner: list[Word], depth: int, mode: str, data: str | None) -> None:
        args = inner[1:]
        i = 0
        while i < len(args):
            arg = args[i].text
            if arg in ("-o", "+o", "--rcfile", "--init-file"):
                if arg in ("--rcfile", "--init-file") and i + 1 < len(args):
                    self.script(args[i + 1], "sh", depth)
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
        reads_stdin = any(a.text.startswith("-") and "s" in a.text[1:] and
                          not a.text.startswith("--") for a in args[:i]) or not operands
        if operands and not reads_stdin:
            if operands[0].dyn == 2:
                self.findings.append(("exec_process_substitution", operands[0].text))
            else:
                self.script(operands[0], "sh", depth)
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


def _in_double_quotes(template: str, marker: str) -> bool:
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
