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
agents/policy/commands.py; what a command risks is agents/policy/command_risk.py.
"""

from __future__ import annotations

import json
import os
from fnmatch import fnmatchcase
from typing import Any

from agents.policy.command_risk import assess
from agents.policy.write_targets import write_targets
from agents.policy.command_rules import (DESTRUCTIVE_CLASSES, first_matching_rule, most_severe,
                                  rule_matches)
from agents.policy.command_scripts import WorkspaceReader
from agents.policy.command_tables import UNKNOWN_CWD
from agents.policy.commands import parse_command
from agents.policy.context import Decision, PolicyContext, Verdict  # noqa: F401
from agents.policy.paths import (PROTECTED_NAMES, is_protected, is_sensitive,  # noqa: F401
                                 is_within, path_findings, resolve_path)
from agents.errors import HarnessError
from agents.identity import current_identity
from agents.messages import ToolCall
from agents.tools import Access, tool_facts
from agents.tools.registry import ToolRegistry, builtin_registry



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


def decide(call: ToolCall, ctx: PolicyContext, tools: ToolRegistry | None = None) -> Decision:
    """allow / ask / deny for ``call`` under ``ctx`` (order in the module docstring).

    The policy judges what the tool declares (agents/tools Tool: ``read_only``,
    ``targets``, ``command``), looked up in ``tools`` (the session's registry; the built-in
    tools when None), never a list of tool names: a shell command is parsed and assessed;
    a read-only tool's paths must lie inside the workspace; a writing tool's paths are
    checked by resolved path; a tool that declares nothing the policy can judge (unknown,
    or effects without paths) asks (denies when unattended). A tool's declared ``effect``
    says what it does besides paths and commands: "state" (a user's notes, the session's
    task list, a question to the user: allowed), "delegation" (child agents, each of whose
    calls is decided here in the child's session: allowed unless a deny rule names it),
    "code" (Python through the command backend: allowed in the sandbox, asks on the host).
    Every tool, read-only ones included, needs the acting identity. Never raises for bad input: it denies.
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
    if not (user_id and session_id):
        return _d("deny", "missing_identity",
                  "no acting session or user: a decision without identity denies")
    facts = tool_facts((tools or builtin_registry()).get(call.name), args)
    name = f"tool:{call.name}"
    configured = ctx.tool_policies.get(call.name)
    if configured is not None:  # a team admin's per-tool setting (MCP servers)
        return _decide_configured(call, ctx, configured, name)
    if facts.effect == "state":
        return _d("allow", "state_tool", f"{call.name} changes no file and runs nothing")
    if facts.effect == "code":
        return _decide_code(call, args, ctx)
    if facts.effect == "delegation":
        if any(fnmatchcase(name, rule) for rule in ctx.deny_rules):
            return _d("deny", "deny_rule", f"{call.name} is on the deny list", "delegation",
                      name)
        return _d("allow", "delegation", "child agents: each of their tool calls is decided "
                  "here in the child's session", "delegation", name)
    if facts.declared and facts.command is not None:
        if not facts.command.strip():
            return _d("deny", "unparseable_arguments", f"{call.name} needs a command string")
        return _decide_command(call.id, facts.command, ctx)
    if facts.declared and facts.targets is None:
        return _d("deny", "unparseable_arguments", f"{call.name}: no usable path argument")
    if facts.declared and (facts.read_only or facts.targets):
        return _decide_paths(call, facts.targets or (), ctx, read_only=facts.read_only)
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
                 "command floor)", name, lambda pattern: fnmatchcase(name, pattern),
                 ("code_execution", *_unconfined(ctx, False)))


def _decide_configured(call: ToolCall, ctx: PolicyContext, setting: str, name: str
                       ) -> Decision:
    """A configured tool: the deny list and a human's denial first, then "read_only" and
    "allow" allow, anything else takes the ask path (rules, bypass, unattended → deny)."""
    if any(fnmatchcase(name, pattern) for pattern in ctx.deny_rules):
        return _d("deny", "deny_list", f"{call.name} matches the deny list", "deny_list", name)
    if call.id in ctx.denied_call_ids:
        return _d("deny", "human_denied", ctx.denied_call_ids[call.id] or "denied by a person",
                  "configured_tool", name)
    if setting in ("read_only", "allow"):
        return _d("allow", f"team_{setting}", f"a team admin marked {call.name} {setting}",
                  "", name)
    return _gate(call.id, ctx, "configured_tool", "configured_tool",
                 f"a team admin asks for approval of each {call.name} call", name,
                 lambda pattern: fnmatchcase(name, pattern))


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
    admin_only = set(classes) & {*ctx.admin_only_risk_classes, UNCONFINED}
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
                normalized: str, classes: tuple[str, ...] = ()) -> Decision:
    """A gate that trust cannot switch off: bypass and rules are not consulted; only a
    human decision on this very call passes it (one operation at a time)."""
    if call_id in ctx.denied_call_ids:
        return _d("deny", "human_denied", ctx.denied_call_ids[call_id] or "denied by a person",
                  risk, normalized, classes)
    if call_id in ctx.approved_call_ids:
        return _d("allow", "human_approved", ctx.approved_call_ids[call_id], risk, normalized,
                  classes)
    return _ask_or_deny(ctx, rule, risk, reason, normalized, classes)


UNCONFINED = "unconfined"
"""The risk class every request a command raises carries where the policy is the only guard
(a host backend with no OS confinement: ``host_confined`` False). Nothing the policy asks
about there may be approved by the requester, bypassed, or approved at all in a session of
no team: a requester who is the attacker would otherwise approve their own read of another
user's workspace (a second user's attack, policy-only mode). approvals/services.py
``approval_permissions`` holds the other half."""


def _unconfined(ctx: PolicyContext, isolated: bool) -> tuple[str, ...]:
    """(UNCONFINED,) for a command that runs on a host the kernel does not confine."""
    return () if isolated or ctx.host_confined else (UNCONFINED,)


def _protected_gate(call_id: str, ctx: PolicyContext, reason: str, normalized: str
                    ) -> Decision:
    """Step 7: instruction files."""
    return _human_gate(call_id, ctx, "protected_file", "instruction_file", reason, normalized)


def _decide_paths(call: ToolCall, targets: tuple[tuple[str, Access], ...], ctx: PolicyContext,
                  *, read_only: bool) -> Decision:
    """File tools: resolve every declared path, then app config → deny, outside the
    workspace → deny (the file tools refuse it too), instruction files (writes) → the
    gate. A tool that declares ``read_only`` is judged as reading, whatever it names."""
    paths = [path for path, _ in targets]
    write = not read_only and any(access == "write" for _, access in targets)
    if not paths:
        return _d("allow", "read_only", "read-only tool")
    if ctx.workspace is None:
        return _d("deny", "missing_state", "no session workspace is known")
    workspace = os.path.realpath(ctx.workspace)
    resolved = [resolve_path(p, ctx) for p in paths]
    shown = ", ".join(real for _, real in resolved)
    for given, (lexical, real) in zip(paths, resolved):  # reasons name the path as given
        if is_sensitive(real, ctx):
            return _d("deny", "app_config", f"{given} is the application's own configuration "
                      "or a credential file", "app_config", real)
        if not is_within(real, workspace):
            return _d("deny", "outside_workspace", f"{given} resolves outside the session "
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
                           "be parsed, so the hardline floor cannot be checked", norm,
                           _unconfined(ctx, isolated))
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
                 (risk, *classes, *_unconfined(ctx, isolated)))
