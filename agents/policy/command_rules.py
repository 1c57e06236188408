"""Which risk classes weigh most, and which rules match which commands.

A request's risk class is the most severe of all its findings (issue 8 finding 6). Allow
rules ("session", "always") for the destructive classes match only the exact command that
was approved: normalised program, flag set and operands (finding 7); deny rules match
broadly: any wrapper layer, a superset of the pattern's flags, more operands.
"""

from __future__ import annotations

import shlex
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from agents.policy.command_forms import git_globals, normalize_argv, normalize_pattern

if TYPE_CHECKING:
    from agents.policy.command_model import ParsedCommand

RISK_SEVERITY: tuple[str, ...] = (
    "destructive", "app_config", "workspace_destructive", "database", "infra", "git_history",
    "anti_forensics", "privilege", "host_write", "home_config", "system_write", "remote_code",
    "permissions", "obfuscation", "exec_hook", "network", "system_admin", "host_read",
    "inline_code", "instruction_file", "deny_list", "unknown_tool")
"""Risk classes from most to least severe: a request's class is the most severe of all
its findings (issue 8 finding 6). A class not listed ranks after all of them."""

DESTRUCTIVE_CLASSES = frozenset({"destructive", "workspace_destructive", "database", "infra",
                                 "git_history", "anti_forensics", "host_write", "app_config"})
"""Classes whose "session"/"always" rules match only the exact command approved (no extra
operands or flags; issue 8 finding 7) and which, by default, a team admin other than the
requester must approve (Team.admin_only_risk_classes)."""


DEFAULT_ADMIN_ONLY_CLASSES: tuple[str, ...] = ("destructive", "workspace_destructive",
                                               "database", "infra", "git_history",
                                               "anti_forensics")
"""A new team's admin-only risk classes (accounts.Team.admin_only_risk_classes)."""


def most_severe(classes) -> str:
    """The most severe of ``classes`` by RISK_SEVERITY ("" for none)."""
    ranked = [c for c in classes if c]
    if not ranked:
        return ""
    return min(ranked, key=lambda c: RISK_SEVERITY.index(c) if c in RISK_SEVERITY
               else len(RISK_SEVERITY))



def _canon(text: str) -> tuple[tuple[str, ...], ...]:
    """A normalised command line as canonical argvs, one per simple command (split at
    ``;`` tokens outside quotes); unparseable text gives ((text,),)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return ((text.strip(),),)
    out: list[tuple[str, ...]] = []
    group: list[str] = []
    for token in [*tokens, ";"]:
        if token and set(token) <= {";"}:
            if group:
                canon = normalize_argv(tuple(group))
                # git's global options stay: ``git -C other push -f`` is another command
                out.append(canon[:1] + git_globals(tuple(group)) + canon[1:])
            group = []
        else:
            group.append(token)
    return tuple(out)


def rule_matches(pattern: str, parsed: ParsedCommand, index: int | None, *,
                 exact: bool = False) -> bool:
    """Does an allow rule ``pattern`` cover command ``index`` (None: the whole line)?

    ``exact`` (the destructive classes, DESTRUCTIVE_CLASSES): the rule stores the normalised
    program, flag set and operands, and matches only that: the whole line canonically equal,
    or the one command (outermost layer, redirects included, run in the workspace) equal.
    Never an extra operand or flag (issue 8 finding 7).
    Otherwise the pattern (normalised like a command) matches any wrapper layer, or the
    whole line, and also a command that continues with more arguments (``git`` covers
    ``git status``)."""
    if exact:
        want = _canon(pattern)
        if not want or want == ((pattern.strip(),),) and not pattern.strip():
            return False
        if want == _canon(parsed.normalized):
            return True
        if index is None or len(want) != 1:
            return False
        cmd = parsed.commands[index]
        return cmd.cwd is None and _canon(cmd.display()) == want
    pat = normalize_pattern(pattern)
    if not pat:
        return False
    texts = [parsed.normalized] if index is None else [
        " ".join(layer) for layer in parsed.commands[index].layers]
    return any(fnmatchcase(t, pat) or fnmatchcase(t, pat + " *") for t in texts)


def _split_flags(argv: tuple[str, ...]) -> tuple[str, frozenset[str], tuple[str, ...]]:
    """(program with git subcommand, flag set with combined short flags split, operands)."""
    if not argv:
        return "", frozenset(), ()
    head, rest = argv[0], list(argv[1:])
    if head == "git" and rest:
        head = f"git {rest.pop(0)}"
    flags: set[str] = set()
    operands: list[str] = []
    for a in rest:
        if a == "-" or not a.startswith("-"):
            operands.append(a)
        elif a.startswith("--"):
            flags.add(a.split("=", 1)[0])
        elif a[1:].isalpha():
            flags.update(f"-{c}" for c in a[1:])
        else:
            flags.add(a)
    return head, frozenset(flags), tuple(operands)


def deny_matches(pattern: str, parsed: ParsedCommand) -> bool:
    """Does deny rule ``pattern`` hit any command of ``parsed``? Deny rules match broadly:
    any wrapper layer (an unknown wrapper's tail is a command of its own), the pattern's
    flags a subset of the command's (``rm -rf build`` denies ``rm -rfv build``), its
    operands a prefix (fnmatch per operand; ``*`` matches the rest), or the plain
    normalised-pattern match of ``rule_matches``."""
    try:
        pat_argv = normalize_argv(tuple(shlex.split(pattern)))
    except ValueError:
        pat_argv = ()
    p_head, p_flags, p_ops = _split_flags(pat_argv)
    for i, cmd in enumerate(parsed.commands):
        if rule_matches(pattern, parsed, i):
            return True
        if not p_head:
            continue
        for layer in cmd.layers:
            head, flags, ops = _split_flags(layer)
            if head != p_head or not p_flags <= flags:
                continue
            if p_ops and p_ops[-1] == "*":
                fixed = p_ops[:-1]
                if len(ops) >= len(fixed) and all(fnmatchcase(o, p) for o, p in
                                                  zip(ops, fixed)):
                    return True
            elif len(ops) >= len(p_ops) and all(fnmatchcase(o, p) for o, p in zip(ops, p_ops)):
                return True
    return rule_matches(pattern, parsed, None)


def first_matching_rule(patterns: tuple[str, ...], parsed: ParsedCommand) -> str | None:
    """The first deny pattern of ``patterns`` matching ``parsed`` (see deny_matches)."""
    for p in patterns:
        if deny_matches(p, parsed):
            return p
    return None
