"""The approval policy: one pure function decides allow / ask / deny for every tool call.

``decide(call, ctx)`` is the only gate between a model's tool call and the world; the CLI
checker (``check_command``), the loop, resumes, child agents and scheduled runs all call it.
The order of its checks is the security design (seed "The fourth fault"; hermes-facts §10):

1. missing or unparseable state → deny (no identity, bad arguments, no workspace);
2. isolated backend → only the deny list (and the instruction-file gate, below) applies;
3. hardline floor and the app's own config files → deny, nothing overrides, bypass included;
4. sudo password-piping guard → deny;  5. the user's and team's deny list → deny;
6. a human's decision on this very call (approved / denied with a reason);
7. instruction files (AGENTS.md, skills ...) and commands that do not parse → ask, one
   operation at a time (an unparsed command cannot be checked against the floor, so
   neither bypass nor a rule may wave it through);
8. bypass → allow;  9. "always" and session rules → allow;
10. unattended (scheduled run, child agent) → deny;  11. ask.

Decisions on the instruction-file gate: it is checked even on the isolated backend (the
workspace is bound read-write into the sandbox and outlives it, so a rewritten AGENTS.md
poisons every later session: isolation does not contain that damage) and is never covered
by bypass or rules (seed "The gate that trust cannot switch off"). Only the human decision
on that single call passes it.

Pure apart from resolving paths on disk (realpath: symlinks and ``..`` are resolved before
any check; failure case B33) and reading the identity contextvar. Never reads the process
environment: bypass is a value the caller passes (``freeze_bypass``). Parsing is
agents/commands.py; what a command risks is agents/command_risk.py.
"""

from __future__ import annotations

import json
import os
import re
from fnmatch import fnmatchcase
from typing import Any

from agents.command_risk import assess, write_targets
from agents.command_rules import (DESTRUCTIVE_CLASSES, first_matching_rule, most_severe,
                                  rule_matches)
from agents.command_scripts import WorkspaceReader
from agents.command_tables import UNKNOWN_CWD
from agents.commands import parse_command
from agents.policy_context import Decision, PolicyContext, Verdict  # noqa: F401
from agents.policy_paths import (PROTECTED_NAMES, is_protected, is_sensitive,  # noqa: F401
                                 is_within, path_findings, resolve_path)
from agents.errors import HarnessError
from agents.identity import current_identity
from agents.messages import ToolCall

READ_ONLY_TOOLS = frozenset({"read_file", "search_files", "skills_list", "skill_view",
                             "session_search"})
WRITE_TOOLS = frozenset({"write_file", "patch"})
COMMAND_TOOLS = frozenset({"terminal"})
DELEGATION_TOOLS = frozenset({"delegate"})
"""Starting child agents: allowed for a known identity (each child's own tool calls are
gated here one by one, in the child's session), denied by a deny rule naming it."""
STATE_TOOLS = frozenset({"memory", "todo", "clarify"})
"""Tools that touch no file and run nothing: a user's notes, the session's task list, a
question to the user. Allowed for a known identity (the tools themselves refuse child
memory writes and turn clarify into a wait)."""
CODE_TOOLS = frozenset({"execute_code"})
"""Python run through the command backend, like terminal. Its code cannot be parsed
against the floor, so off the sandbox it asks (bypass and "always" rules may allow it);
every tool it calls back through its RPC is decided here on its own."""



class BypassFrozen(HarnessError):
    """``freeze_bypass`` was called again with a different value after startup."""


_BYPASS: list[bool] = []  # empty until frozen; then exactly one value for the process


def freeze_bypass(value: bool) -> bool:
    """Fix the process-wide bypass (HERMES_YOLO) once, at startup. Returns the value.

    The attack it prevents (seed "The one-line attack"; failure case B32): skills, plugins
    and generated code run inside this process, so a bypass read from the environment on
    every check is switched off by one injected environment assignment (or an ``export``
    in a shell), silently, for every later call. Here the settings module reads the variable
    once before any model output exists and passes the value; this module never reads the
    environment. A repeat call with the same value is a no-op (settings may be imported
    twice); any other raises BypassFrozen, so a later attempt to turn it on is loud.
    """
    value = bool(value)
    if not _BYPASS:
        _BYPASS.append(value)
        return value
    if _BYPASS[0] != value:
        raise BypassFrozen(f"bypass is frozen at {_BYPASS[0]} for this process; "
                           f"refusing to change it to {value}")
    return value


def bypass_frozen() -> bool:
    """The process-start bypass; False until ``freeze_bypass`` ran (fail closed)."""
    return bool(_BYPASS and _BYPASS[0])


def _d(verdict: Verdict, rule: str, reason: str, risk: str = "", norm: str = "",
       classes: tuple[str, ...] = ()) -> Decision:
    classes = tuple(dict.fromkeys(c for c in (*classes, risk) if c))
    return Decision(verdict=verdict, rule=rule, reason=reason, risk_class=risk, normalized=norm,
                    risk_classes=classes)


def check_command(command: str, ctx: PolicyContext) -> Decision:
    """Decide a terminal command as if the model had asked for it (the ``hermes policy``
    management command). Same function, same order: ``decide`` on a terminal ToolCall."""
    call = ToolCall(id="policy-check", name="terminal",
                    arguments=json.dumps({"command": command}))
    return decide(call, ctx)


def decide(call: ToolCall, ctx: PolicyContext) -> Decision:
    """allow / ask / deny for ``call`` under ``ctx`` (order in the module docstring).

    Tool names: READ_ONLY_TOOLS are allowed inside the workspace; ``terminal`` commands are
    parsed and assessed; WRITE_TOOLS are checked by resolved path; DELEGATION_TOOLS are
    allowed unless a deny rule names them; any other tool asks
    (denies when unattended). Never raises for bad input: it denies.
    """
    try:
        args = call.parsed_arguments()
    except (ValueError, TypeError):
        return _d("deny", "unparseable_arguments", "the tool arguments are not a JSON object")
    ident = current_identity()
    if ident is not None and (ctx.session_id not in (None, ident.session_id)
                              or ctx.user_id not in (None, ident.user_id)):
        return _d("deny", "identity_mismatch",
                  "the acting identity differs from the policy context")
    user_id = ctx.user_id or (ident.user_id if ident else None)
    session_id = ctx.session_id or (ident.session_id if ident else None)
    known = bool(user_id and session_id)
    if call.name in READ_ONLY_TOOLS:
        return _decide_paths(call, args, ctx, write=False)
    if not known:
        return _d("deny", "missing_identity",
                  "no acting session or user: a decision without identity denies")
    if call.name in COMMAND_TOOLS:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return _d("deny", "unparseable_arguments", "terminal needs a command string")
        return _decide_command(call.id, command, ctx)
    if call.name in WRITE_TOOLS:
        return _decide_paths(call, args, ctx, write=True)
    if call.name in STATE_TOOLS:
        return _d("allow", "state_tool", f"{call.name} changes no file and runs nothing")
    if call.name in CODE_TOOLS:
        return _decide_code(call, args, ctx)
    name = f"tool:{call.name}"
    if call.name in DELEGATION_TOOLS:
        if any(fnmatchcase(name, rule) for rule in ctx.deny_rules):
            return _d("deny", "deny_rule", f"{call.name} is on the deny list", "delegation",
                      name)
        return _d("allow", "delegation", "child agents: each of their tool calls is decided "
                  "here in the child's session", "delegation", name)
    return _gate(call.id, ctx, "unknown_tool", "unknown_tool",
                 f"{call.name} is not a tool the policy knows", name,
                 lambda pattern: fnmatchcase(name, pattern))


def _decide_code(call: ToolCall, args: dict[str, Any], ctx: PolicyContext) -> Decision:
    """execute_code: the sandbox contains it (allow); on the host it asks, once per call
    unless bypass or a rule for ``tool:execute_code`` covers it; unattended → deny."""
    if not isinstance(args.get("code"), str) or not args["code"].strip():
        return _d("deny", "unparseable_arguments", "execute_code needs a code string")
    if ctx.workspace is None:
        return _d("deny", "missing_state", "no session workspace is known")
    name = f"tool:{call.name}"
    if ctx.backend_isolated and not ctx.backend_has_host_paths:
        return _d("allow", "isolated_backend", "isolated backend: the code runs in the "
                  "sandbox; each tool it calls is decided on its own", "", name)
    return _gate(call.id, ctx, "code_execution", "code_execution",
                 "runs Python on the server host (the code cannot be checked against the "
                 "command floor)", name, lambda pattern: fnmatchcase(name, pattern))


def _gate(call_id: str, ctx: PolicyContext, rule: str, risk: str, reason: str,
          normalized: str, covered_by: Any, classes: tuple[str, ...] = ()) -> Decision:
    """Steps 6, 8-11 for a call that would ask: human decision, bypass, rules, ask.
    A class in ``ctx.admin_only_risk_classes`` is never bypassed (issue 8 finding 6)."""
    classes = classes or (risk,)
    if call_id in ctx.denied_call_ids:
        return _d("deny", "human_denied", ctx.denied_call_ids[call_id] or "denied by a person",
                  risk, normalized, classes)
    if call_id in ctx.approved_call_ids:
        return _d("allow", "human_approved", ctx.approved_call_ids[call_id], risk, normalized,
                  classes)
    admin_only = set(classes) & set(ctx.admin_only_risk_classes)
    if ctx.bypass and not admin_only:
        return _d("allow", "bypass", f"approvals bypassed ({reason})", risk, normalized,
                  classes)
    for rule_name, patterns in (("always_rule", ctx.always_rules),
                                ("session_rule", ctx.session_rules)):
        hit = next((p for p in patterns if covered_by(p)), None)
        if hit is not None:
            return _d("allow", rule_name, f"approved by rule {hit!r}", risk, normalized,
                      classes)
    if ctx.bypass:
        reason = (f"{reason} (the bypass does not cover {', '.join(sorted(admin_only))}: "
                  "a team admin must approve)")
    return _ask_or_deny(ctx, rule, risk, reason, normalized, classes)


def _ask_or_deny(ctx: PolicyContext, rule: str, risk: str, reason: str, normalized: str,
                 classes: tuple[str, ...] = ()) -> Decision:
    if ctx.unattended:
        return _d("deny", "unattended",
                  f"no human is present to approve this (unattended run): {reason}", risk,
                  normalized, classes)
    return _d("ask", rule, reason, risk, normalized, classes)


def _human_gate(call_id: str, ctx: PolicyContext, rule: str, risk: str, reason: str,
                normalized: str) -> Decision:
    """A gate that trust cannot switch off: bypass and rules are not consulted; only a
    human decision on this very call passes it (one operation at a time)."""
    if call_id in ctx.denied_call_ids:
        return _d("deny", "human_denied", ctx.denied_call_ids[call_id] or "denied by a person",
                  risk, normalized)
    if call_id in ctx.approved_call_ids:
        return _d("allow", "human_approved", ctx.approved_call_ids[call_id], risk, normalized)
    return _ask_or_deny(ctx, rule, risk, reason, normalized)


def _protected_gate(call_id: str, ctx: PolicyContext, reason: str, normalized: str
                    ) -> Decision:
    """Step 7: instruction files."""
    return _human_gate(call_id, ctx, "protected_file", "instruction_file", reason, normalized)


def _call_paths(call: ToolCall, args: dict[str, Any]) -> list[str] | None:
    """Paths a file tool touches; None when the arguments do not say (→ deny)."""
    if call.name in ("skills_list", "skill_view", "session_search"):
        return []
    if call.name == "search_files":
        return [args.get("path") or "."]
    paths: list[Any] = [args[k] for k in ("path", "file_path") if k in args]
    edits = args.get("edits")
    if isinstance(edits, list):
        paths += [e.get("path") if isinstance(e, dict) else None for e in edits]
    if isinstance(args.get("patch"), str):
        paths += re.findall(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: "
                            r"(.+?)\s*$", args["patch"], re.M)
        paths = [p if isinstance(p, str) else (p[0] or p[1]) for p in paths]
    if not paths or not all(isinstance(p, str) and p.strip() and "\0" not in p for p in paths):
        return None
    return paths


def _decide_paths(call: ToolCall, args: dict[str, Any], ctx: PolicyContext, *, write: bool
                  ) -> Decision:
    """File tools: resolve every path, then app config → deny, outside the workspace →
    deny (the file tools refuse it too), instruction files (writes) → the gate."""
    paths = _call_paths(call, args)
    if paths is None:
        return _d("deny", "unparseable_arguments", f"{call.name}: no usable path argument")
    if not paths:
        return _d("allow", "read_only", "read-only tool")
    if ctx.workspace is None:
        return _d("deny", "missing_state", "no session workspace is known")
    workspace = os.path.realpath(ctx.workspace)
    resolved = [resolve_path(p, ctx) for p in paths]
    shown = ", ".join(real for _, real in resolved)
    for lexical, real in resolved:
        if is_sensitive(real, ctx):
            return _d("deny", "app_config", f"{real} is the application's own configuration "
                      "or a credential file", "app_config", real)
        if not is_within(real, workspace):
            return _d("deny", "outside_workspace", f"{real} resolves outside the session "
                      "workspace", "host_write" if write else "host_read", real)
    if not write:
        return _d("allow", "read_only", "read-only tool inside the workspace", "", shown)
    if any(is_protected(lexical, real, ctx) for lexical, real in resolved):
        return _protected_gate(call.id, ctx, "writes a file that steers future sessions "
                               "(instruction or skill file); a multi-file edit is gated whole",
                               shown)
    return _d("allow", "workspace_write", "write inside the session workspace", "", shown)


# --- commands ---------------------------------------------------------------------------

def _decide_command(call_id: str, command: str, ctx: PolicyContext) -> Decision:
    """Parse once, judge every effect, then the order of the module docstring. On an
    isolated backend the hardline floor, the deny list, instruction files and commands
    that destroy the (host-mounted, writable) workspace still apply (issue 8 item 3)."""
    if ctx.workspace is None:
        return _d("deny", "missing_state", "no session workspace is known", "", command)
    workspace = os.path.realpath(ctx.workspace)
    parsed = parse_command(command, WorkspaceReader(workspace))
    norm = parsed.normalized if parsed.parseable else command
    isolated = ctx.backend_isolated and not ctx.backend_has_host_paths
    findings: list[Any] = [*assess(parsed), *path_findings(parsed, ctx, workspace,
                                                            host=not isolated)]
    targets = [resolve_path(t, ctx, None if cmd.cwd == UNKNOWN_CWD else cmd.cwd)
               for cmd in parsed.commands for t in write_targets(cmd)]
    denied_by = first_matching_rule(ctx.deny_rules, parsed)
    protected = [real for lexical, real in targets if is_protected(lexical, real, ctx)]
    hard = [f for f in findings if f.level == "hardline"]
    if hard:
        first = min(hard, key=lambda f: 0 if f.rule == "hardline" else 1)
        rule = "hardline" if first.rule == "hardline" else first.rule
        return _d("deny", rule, first.reason, first.risk_class, norm,
                  tuple(f.risk_class for f in hard))
    guard = [f for f in findings if f.level == "guard"]
    if guard and not isolated:
        return _d("deny", "sudo_guard", guard[0].reason, "privilege", norm)
    if denied_by is not None:
        return _d("deny", "deny_list", f"matches deny rule {denied_by!r}", "deny_list", norm)
    if protected:
        return _protected_gate(call_id, ctx, f"writes {protected[0]}, a file that steers "
                               "future sessions", norm)
    if not parsed.parseable:
        return _human_gate(call_id, ctx, "unparseable", "obfuscation", "the command could not "
                           "be parsed, so the hardline floor cannot be checked", norm)
    asks = [f for f in findings if f.level == "ask"]
    if isolated:
        unasked = tuple(f.risk_class for f in asks if f.risk_class in DESTRUCTIVE_CLASSES)
        asks = [f for f in asks if f.rule == "workspace_destructive"]
        if not asks:
            return _d("allow", "isolated_backend", "isolated backend: the floor, the deny list "
                      "and workspace-destroying commands are checked", "", norm, unasked)
    if not asks:
        return _d("allow", "default_allow", "no risky pattern", "", norm)

    def covered_by(pattern: str) -> bool:
        return all(rule_matches(pattern, parsed, f.command,
                                exact=f.risk_class in DESTRUCTIVE_CLASSES) for f in asks)

    risk = most_severe(f.risk_class for f in asks)
    first = next(f for f in asks if f.risk_class == risk)
    reason = "; ".join(dict.fromkeys(f.reason for f in asks))
    classes = tuple(dict.fromkeys(f.risk_class for f in asks))
    return _gate(call_id, ctx, first.rule, risk, reason, norm, covered_by,
                 (risk, *classes))
