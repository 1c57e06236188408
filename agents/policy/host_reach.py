"""What a command can reach on the host that the policy cannot follow by reading its words:
paths walked through another process's view of the filesystem, programs that run code the
policy does not parse, and options that lift a tool's own containment. Pure text work over
one parsed SimpleCommand; agents/policy/paths.py turns the answers into findings.

Why (a second user's attack on the policy-only local backend, HERMES_LOCAL_CONFINEMENT=none):
- ``cat /proc/self/cwd/../../secret_key`` read the app's secret key. A path through
  ``/proc/<pid>/cwd`` (or ``root``, ``fd/``, ``/dev/fd/..``) is resolved by the kernel in
  the *command's* process, so neither the text (``normpath`` folds ``cwd/..`` away) nor the
  policy's own ``realpath`` (which follows the *worker's* ``/proc/self``) says where it
  lands. Such a path asks under every confinement mode (``through_process``).
- ``python3 -c "open('..'+'/2/x','w')"`` and ``tar -xPf``: code the policy does not parse
  (or parses only for literal paths) and extraction with absolute member names write anywhere the worker's user may. Where the policy is the only guard (no
  Landlock, no sandbox) they ask (``opaque_reach``); with confinement the kernel holds the
  boundary, as the same attack showed.
- ``ps eww``: BSD ``e`` prints every process's environment (secrets passed by environment),
  the same as reading ``/proc/<pid>/environ``, which already asks (``environment_read``).
"""

from __future__ import annotations

import re

from agents.policy.command_model import SimpleCommand
from agents.policy.command_tables import AWKS, INTERPRETER, UNKNOWN_CWD
from agents.policy.path_words import unseen_path

THROUGH_PROCESS = re.compile(
    r"(^|/)proc/+(?:(?:self|thread-self)/+(?:task/+[^/]+/+)?"
    r"(?:(?:cwd|root|map_files)(?:/|$)|(?:fd|fdinfo)/+(?!\d+/*$)[^/])"
    r"|(?!(?:self|thread-self)/)[^/]+/+(?:task/+[^/]+/+)?(?:cwd|root|map_files|fd|fdinfo)(?:/|$))"
    r"|(^|/)dev/+(?:fd|stdin|stdout|stderr)/+(?!\d+/*$)[^/]")
"""A path walked through a process's working directory, root or open descriptors (by any
pid spelling: a number, ``self``, ``thread-self``; another process's descriptor is its open
file, the app's database included) or through /dev/fd into a directory. A command's own
descriptor (/dev/fd/<n>, /proc/self/fd/<n>) is not: see QUIET_DEVICES."""

_CODE_FREE = frozenset({"--version", "-V", "--help", "-h", "-VV"})
"""Interpreter options that run no code at all."""
_AWK_REACH = re.compile(r"system\s*\(|getline|[|>]")
"""An awk program that runs a command or opens a file by a string (``system(x)``,
``print > f``, ``cmd | getline``): the string may be computed."""


def host_reach(cmd: SimpleCommand, *, confined: bool, cwd_known: bool
               ) -> list[tuple[str, str, str]]:
    """[(rule, risk class, reason)] of what ``cmd`` may reach on a host backend beyond what
    its words show: another process's environment (always), a working directory reached
    through a process (always), and, where the policy is the only guard (``confined``
    False: no Landlock), a path computed at run time (path_words ``unseen_path``) and code
    or archives the policy cannot follow (``opaque_reach``). Each asks."""
    out = []
    env = environment_read(cmd)
    if env is not None:
        out.append(("environment_read", "host_read", env))
    if cmd.cwd and cmd.cwd != UNKNOWN_CWD and through_process(cmd.cwd.rstrip("/") + "/."):
        out.append(("unseen_path", "host_read", f"works in {cmd.cwd}, a directory only the "
                    "running command can resolve"))
    if confined:
        return out
    unseen = unseen_path(cmd, cwd_known=cwd_known)
    if unseen is not None:  # the policy is the only guard: what it cannot see asks
        out.append(("unseen_path", "host_read", f"{unseen}; with no OS confinement on this "
                    "host the policy cannot tell where it points"))
    opaque = opaque_reach(cmd)
    if opaque is not None:
        out.append(("opaque_code", "host_write", f"{opaque}; with no OS confinement on this "
                    "host nothing else stops it"))
    return out


def through_process(path: str) -> bool:
    """True when ``path`` (as written, before any normalisation) walks through a process's
    cwd/root/descriptors or /dev/fd into a directory, whose target only the running command
    knows (module docstring)."""
    return bool(THROUGH_PROCESS.search(path))


def environment_read(cmd: SimpleCommand) -> str | None:
    """Why ``cmd`` prints other processes' environments (``ps e``, ``ps auxe``, ``ps eww``:
    a BSD-style option word holding ``e``; ``-e`` with a dash means "every process" and is
    not), or None."""
    for layer in cmd.layers:
        if layer and layer[0] == "ps" and any(
                re.fullmatch(r"[A-Za-z]+", w) and "e" in w for w in layer[1:]):
            return "ps with the e option prints every process's environment"
    return None


def opaque_reach(cmd: SimpleCommand) -> str | None:
    """Why what ``cmd`` touches cannot be told from its words, for a host where the policy
    is the only guard, or None: an interpreter running code (inline, a heredoc, a script:
    its file accesses may be computed strings), awk (its ``system()`` and redirections take
    computed strings), and extraction that keeps absolute or ``..`` member
    names (``tar -P``/``--absolute-names``, ``unzip -:``, ``cpio -i``, ``pax -r``)."""
    for layer in cmd.layers:
        if not layer:
            continue
        name, args = layer[0], layer[1:]
        if INTERPRETER.fullmatch(name) and not (args and all(a in _CODE_FREE for a in args)):
            return f"{name} runs code whose file accesses the policy cannot follow"
        if name in AWKS and any(_AWK_REACH.search(a) for a in args):
            return f"{name}'s program may run commands or open files named at run time"
        if name in ("tar", "bsdtar") and any(
                a == "--absolute-names" or re.fullmatch(r"-[A-Za-z]*P[A-Za-z]*", a)
                or k == 0 and re.fullmatch(r"[A-Za-z]*P[A-Za-z]*", a)  # old style: xPf
                for k, a in enumerate(args)):
            return "tar keeps absolute and .. member names, so an archive writes anywhere"
        if name == "unzip" and any(a.startswith("-") and ":" in a for a in args):
            return "unzip -: keeps .. member names, so an archive writes anywhere"
        if name == "cpio" and any(a in ("-i", "--extract") or re.fullmatch(r"-[a-zA-Z]*i[a-zA-Z]*", a)
                                  for a in args):
            return "cpio extracts absolute and .. member names as they are"
        if name == "pax" and any(re.fullmatch(r"-[a-zA-Z]*r[a-zA-Z]*", a) for a in args):
            return "pax extracts absolute and .. member names as they are"
    return None

