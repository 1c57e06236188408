"""The policy's inputs and answer as plain values: PolicyContext (what ``decide`` may
consult) and Decision (what it returns). agents/policy/__init__.py decides; its helpers
(agents/policy/paths.py) read the context from here, so imports point one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The policy's answer for one tool call.

    ``verdict``: allow / ask / deny. ``rule``: the name of the check that decided (e.g.
    "hardline", "deny_list", "bypass", "always_rule", "protected_file", "default_ask").
    ``reason``: a sentence for humans and, on deny, for the model. ``risk_class``: a short
    category ("destructive", "network", "privilege", "instruction_file", ...) used by team
    policies. ``normalized``: the normalised command or path that was matched.
    """

    verdict: Verdict
    rule: str
    reason: str = ""
    risk_class: str = ""
    normalized: str = ""
    risk_classes: tuple[str, ...] = ()
    """Every risk class of every finding (``risk_class`` is the most severe of them): the
    approval stores them all so an admin-only class is never hidden behind another, and
    an allow without a human on a destructive class is audited (B32/B33)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """Everything ``decide`` may consult, gathered by the caller from trusted state.

    ``session_id`` / ``user_id``: the acting identity; None falls back to the identity
    contextvar (agents/identity.py) and, if that is unset too, means deny (fail closed).
    ``workspace``: the session workspace (absolute); None denies file and command tools.
    ``backend_isolated``: commands run in a sandbox; ``backend_has_host_paths``: that
    sandbox can write host paths, so it is not treated as isolated. ``host_confined``: on
    the local backend, the kernel confines each command (Landlock), so what the policy
    cannot see before a command runs (a computed path) is the confinement's to stop;
    False (the default: fail closed) makes such a path ask (agents/policy/path_words.py
    ``unseen_path``).
    ``deny_rules``: the user's and team's patterns (``sudo *``, ``git push --force``),
    matched against every wrapper layer of every normalised simple command.
    ``always_rules`` / ``session_rules``: approved patterns, same matching.
    ``approved_call_ids`` / ``denied_call_ids``: tool call id → the human's note or reason.
    ``bypass``: the frozen process-start value OR the audited per-session toggle.
    ``unattended``: no human can answer (scheduled run, child agent): ask becomes deny.
    ``app_config_paths``: the app's own settings/env files and HERMES home (hard-blocked for
    reads and writes); ``sensitive_paths``: credential locations, treated the same.
    ``extra_protected_names``: more instruction-file basenames (case-insensitive).
    ``private_paths``: the app's data directory, its code, the workspace root (other users'
    workspaces) and HERMES home: on a host backend a command reading there asks and one
    writing there is denied (except inside the session's own workspace; issue 8 finding 2).
    ``admin_only_risk_classes``: the session team's classes only another admin may approve;
    no bypass (session toggle or process-wide) skips them (finding 6).
    ``scratch_paths``: directories outside the workspace a command may write without asking
    (checked on the resolved path, so a symlink there to a home file still asks: B33a).
    ``tool_policies``: see the field.
    """

    session_id: str | None
    user_id: str | None
    workspace: str | None
    backend_isolated: bool = False
    backend_has_host_paths: bool = False
    host_confined: bool = False
    deny_rules: tuple[str, ...] = ()
    always_rules: tuple[str, ...] = ()
    session_rules: tuple[str, ...] = ()
    approved_call_ids: Mapping[str, str] = field(default_factory=dict)
    denied_call_ids: Mapping[str, str] = field(default_factory=dict)
    bypass: bool = False
    unattended: bool = False
    app_config_paths: tuple[str, ...] = ()
    sensitive_paths: tuple[str, ...] = ()
    extra_protected_names: tuple[str, ...] = ()
    private_paths: tuple[str, ...] = ()
    admin_only_risk_classes: tuple[str, ...] = ()
    scratch_paths: tuple[str, ...] = ("/tmp", "/var/tmp", "/dev/shm")
    tool_policies: Mapping[str, str] = field(default_factory=dict)
    """Tools an admin configured (MCP servers' ``mcp__<server>__<tool>``) → "read_only"
    (allow), "allow" (allow) or "ask" (the ask path: a human, rules, bypass, unattended
    deny). A tool not listed here and not built in asks (agents/policy/__init__.py decide)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GateState:
    """Everything durable the policy needs for one session's turn: approvals/services.py
    ::gate_state reads it, sessions/toolbox.py turns it into a PolicyContext, so the runner
    receives it as a value.

    ``always_rules``/``session_rules``: (tool_name, normalised pattern) pairs, oldest first.
    ``always_rule_ids``: {(tool_name, pattern): ApprovalRule id}, for ``rule_hit``.
    ``approved_call_ids``: tool call ids a human approved in this turn.
    ``denied_call_ids``: {tool_call_id: the result text the model gets}.
    ``deny_rules``: the owner's teams' deny patterns. ``bypass``: Session.bypass_approvals.
    ``reserved``: risk class -> the owner's team that reserves it for its admins (what binds
    a session of no team; read with the deny patterns, one round trip).
    """

    always_rules: tuple[tuple[str, str], ...] = ()
    always_rule_ids: Mapping[tuple[str, str], int] = field(default_factory=dict)
    session_rules: tuple[tuple[str, str], ...] = ()
    approved_call_ids: frozenset[str] = frozenset()
    denied_call_ids: Mapping[str, str] = field(default_factory=dict)
    deny_rules: tuple[str, ...] = ()
    bypass: bool = False
    reserved: Mapping[str, str] = field(default_factory=dict)

    def patterns_for(self, tool_name: str, *, scope: str = "always") -> tuple[str, ...]:
        """The patterns of one tool, from the "always" (default) or "session" rules."""
        pairs = self.always_rules if scope == "always" else self.session_rules
        return tuple(pattern for name, pattern in pairs if name == tool_name)

    def rule_id_for(self, *, tool_name: str, pattern: str) -> int | None:
        """The ApprovalRule id behind an "always" pattern (this tool first, then any)."""
        exact = self.always_rule_ids.get((tool_name, pattern))
        if exact is not None:
            return exact
        return next((rid for (_, pat), rid in self.always_rule_ids.items() if pat == pattern),
                    None)
