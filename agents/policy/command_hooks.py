"""The exec hooks of shell commands: programs that run other commands, and scripts.

Issue 8 item 4: a program that runs other commands (shells given a file, ``source``,
interpreters given a script or inline code, awk's system(), an editor's ``!``, tar's
checkpoint actions, git aliases and program-valued config keys, find -exec, at, ssh,
env-var hooks such as BASH_ENV or LD_PRELOAD) has its payload parsed like any command, or
a finding that asks when the payload cannot be seen; an unknown program given what looks
like a command is an unknown wrapper (asks, and its tail is judged). ``HookWalker`` is the
half of agents/policy/commands.py's walker that does this; it calls back ``parse`` and ``argv``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents.policy.command_forms import Word, decode_ansi_c
from agents.policy.command_scripts import (ScriptEffects, other_script_effects, python_effects,
                                    shebang_interpreter)
from agents.policy.command_tables import (COMMAND_VARS, GIT_BUILTINS, GIT_EXEC_KEYS, HOOK_VARS,
                                   INTERPRETER, RUN_WORDS, SHELLS, UNKNOWN_CWD)

if TYPE_CHECKING:
    from agents.policy.command_model import SimpleCommand


class HookWalker:
    """Mixin of agents.policy.commands._Walker: follows what a command runs. Expects ``parse``,
    ``argv``, ``findings``, ``cwd`` and ``reader`` on the walker."""

    findings: list[tuple[str, str]]
    cwd: str | None
    reader: Any

    # Provided by agents.policy.commands._Walker (declared, not defined, so a missing one fails
    # loudly as an AttributeError): parse(text, depth) and
    # argv(words, depth, mode, data, redirects), each -> str | None.
    parse: Callable[[str, int], str | None]
    argv: Callable[[list[Word], int, str, str | None, tuple[tuple[str, str], ...]], str | None]

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
        script operand are read and judged like a script (agents/policy/command_scripts.py);
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

    def find_exec(self, inner: list[Word], depth: int) -> None:
        for i, w in enumerate(inner):
            if w.text in ("-exec", "-execdir", "-ok", "-okdir"):
                rest = inner[i + 1:]
                end = next((j for j, r in enumerate(rest) if r.text in (";", "+")), len(rest))
                if rest[:end]:
                    self.argv(rest[:end], depth + 1, "", None, ())

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
