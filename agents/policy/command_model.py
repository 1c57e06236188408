"""What a parsed command line is: the simple commands a shell would run (plain data).

Built by agents/policy/commands.py (the parser), read by the policy's judges (command_hooks,
command_risk, command_rules, policy_paths); kept apart so those modules import downward
only (agents/policy/commands.py imports them).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


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
    options: tuple[str, ...] = ()
    """git's global options (``-C dir``, ``-c key=value``), dropped from ``layers`` so rules
    read the subcommand, kept here and in ``display`` so an exact rule sees them."""
    assigns: tuple[str, ...] = ()
    """``NAME=value`` words placed before the command (``X=/path sh -c 'cat $X'``): not
    argv, but the program sees them, so the path checks read their values too."""
    computed: tuple[str, ...] = ()
    """The words (after the program name), redirect targets and ``NAME=value`` assignments
    whose value the shell computes when the command runs: a parameter not set earlier in
    the line or a command substitution, kept as written (``$HOME`` and ``~`` are not
    computed; a single-quoted ``$1`` is text). agents/policy/path_words.py ``unseen_path``."""

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
        outer = self.layers[0][:1] + self.options + self.layers[0][1:]
        return " ".join((*(shlex.quote(w) if w else "''" for w in outer),
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
