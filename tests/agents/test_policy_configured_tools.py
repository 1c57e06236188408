"""A team admin's per-tool setting (MCP servers) through the one policy function: read-only
and allowed tools run, "ask" takes the ask path (rules, bypass, unattended deny), the deny
list and a person's denial come first, an unconfigured tool still asks, no identity
denies."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agents.messages import ToolCall
from agents.policy import PolicyContext, decide

POLICIES = {"mcp__web__fetch": "read_only", "mcp__web__post": "allow",
            "mcp__web__delete": "ask"}


@pytest.fixture
def ctx(tmp_path) -> PolicyContext:
    return PolicyContext(session_id="s1", user_id="u1", workspace=str(tmp_path),
                         tool_policies=POLICIES)


def call(name: str, args: dict | None = None, call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(args or {}))


@pytest.mark.parametrize("name, verdict, rule", [
    ("mcp__web__fetch", "allow", "team_read_only"),
    ("mcp__web__post", "allow", "team_allow"),
    ("mcp__web__delete", "ask", "configured_tool"),
    ("mcp__other__x", "ask", "unknown_tool"),
])
def test_each_setting_maps_to_a_decision(ctx, name, verdict, rule):
    decision = decide(call(name), ctx)
    assert (decision.verdict, decision.rule) == (verdict, rule)


def test_ask_is_denied_unattended_and_allowed_by_a_rule_or_a_person(ctx):
    assert decide(call("mcp__web__delete"), replace(ctx, unattended=True)).verdict == "deny"
    ruled = decide(call("mcp__web__delete"), replace(ctx, always_rules=("tool:mcp__web__*",)))
    assert (ruled.verdict, ruled.rule) == ("allow", "always_rule")
    approved = decide(call("mcp__web__delete"), replace(ctx, approved_call_ids={"c1": "ok"}))
    assert approved.verdict == "allow" and approved.rule == "human_approved"
    assert decide(call("mcp__web__delete"), replace(ctx, bypass=True)).rule == "bypass"


def test_the_deny_list_and_a_denial_beat_an_allowed_setting(ctx):
    denied = decide(call("mcp__web__post"), replace(ctx, deny_rules=("tool:mcp__web__*",)))
    assert (denied.verdict, denied.rule) == ("deny", "deny_list")
    person = decide(call("mcp__web__fetch"), replace(ctx, denied_call_ids={"c1": "no"}))
    assert (person.verdict, person.reason) == ("deny", "no")


def test_no_identity_denies_even_a_read_only_tool(tmp_path):
    headless = PolicyContext(session_id=None, user_id=None, workspace=str(tmp_path),
                             tool_policies=POLICIES)
    assert decide(call("mcp__web__fetch"), headless).verdict == "deny"
