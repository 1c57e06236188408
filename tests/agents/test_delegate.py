"""The delegate tool's pure decisions: the child's toolset (blocklist, never a tool the
parent lacks, depth), the focused prompt, the summary budget and its spill, and the tool's
validation (issue 12 item 1; seed "Delegation: a child that starts empty")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from agents.errors import DelegationRequested, ToolError
from agents.tools import ToolContext
from agents.tools.delegate import (BLOCKED_TOOLS, DESCRIPTION, MAX_BATCH,
                                   SUMMARY_FLOOR_TOKENS, TOOLSETS, ChildOutcome,
                                   DelegateTool, DelegationContext, child_prompt,
                                   child_toolset, delegate_result, plan_delegation,
                                   summary_budget_tokens)
from agents.tools.spill import CHARS_PER_TOKEN

BUILTINS = ["read_file", "write_file", "patch", "search_files", "terminal", "skills_list",
            "skill_view", "session_search"]
NAMES = st.sampled_from(BUILTINS + sorted(BLOCKED_TOOLS) + ["web_fetch", "image_gen"])


@given(parent=st.sets(NAMES), requested=st.none() | st.lists(
    st.sampled_from(sorted(TOOLSETS) + BUILTINS)), depth=st.integers(1, 4),
    max_depth=st.integers(0, 4))
def test_a_child_never_gains_a_tool_and_never_keeps_a_blocked_one(parent, requested, depth,
                                                                 max_depth):
    try:
        tools = set(child_toolset(parent, requested=requested, child_depth=depth,
                                  max_depth=max_depth))
    except ToolError:
        assert requested  # only an unknown requested name fails
        assert any(r not in TOOLSETS and r not in parent for r in requested)
        return
    assert tools <= parent
    blocked_kept = tools & BLOCKED_TOOLS
    assert blocked_kept <= {"delegate"}
    if "delegate" in tools:
        assert depth < max_depth  # only the depth re-opens delegation
    if requested is None:
        reopened = {"delegate"} if depth < max_depth else set()
        assert tools == parent - (BLOCKED_TOOLS - reopened)


def test_depth_one_default_strips_all_five_axes():
    parent = BUILTINS + ["delegate", "clarify", "memory", "send_message", "schedule"]
    tools = child_toolset(parent)
    assert set(tools) == set(BUILTINS)
    assert "delegate" in child_toolset(parent, child_depth=1, max_depth=2)
    assert set(child_toolset(parent, child_depth=1, max_depth=2)) - set(BUILTINS) == {"delegate"}


def test_toolsets_narrow_and_unknown_names_fail_clearly():
    assert child_toolset(BUILTINS, requested=["read"]) == ("read_file", "search_files")
    assert child_toolset(["read_file"], requested=["files"]) == ("read_file",)
    with pytest.raises(ToolError, match="unknown toolset.*web"):
        child_toolset(BUILTINS, requested=["web"])


@given(window=st.integers(0, 2_000_000), used=st.integers(0, 2_000_000),
       batch=st.integers(1, MAX_BATCH), floor=st.integers(0, 5_000))
def test_summary_budget_is_half_the_headroom_across_the_batch_floored(window, used, batch,
                                                                      floor):
    budget = summary_budget_tokens(context_window=window, context_used=used,
                                   batch_size=batch, floor=floor)
    assert budget >= floor
    headroom = max(0, window - used)
    if budget > floor:  # above the floor the batch together takes at most half the headroom
        assert budget * batch <= headroom // 2
        assert budget == headroom // 2 // batch


def test_budget_example_and_floor():
    assert summary_budget_tokens(context_window=200_000, context_used=40_000,
                                 batch_size=4) == 20_000
    assert summary_budget_tokens(context_window=200_000, context_used=199_000,
                                 batch_size=8) == SUMMARY_FLOOR_TOKENS


def test_prompt_carries_goal_and_context_and_asks_for_a_summary():
    prompt = child_prompt("count files", "the repo is at src/")
    assert "Goal:\ncount files" in prompt and "Context:\nthe repo is at src/" in prompt
    assert "no conversation history" in prompt and "summary" in prompt
    assert "Context:" not in child_prompt("g")


def test_description_says_summaries_are_self_reports():
    assert "self-reports, not verified facts" in DESCRIPTION
    assert DelegateTool().spec.name == "delegate"


def dctx(**kw) -> DelegationContext:
    return DelegationContext(parent_tools=tuple(BUILTINS + ["delegate", "memory"]), **kw)


def test_plan_validates_batch_shape():
    plan = plan_delegation({"tasks": [{"goal": "a"}, {"goal": "b", "toolsets": ["read"]}]},
                           dctx(context_window=100_000, context_used=20_000))
    assert [c.goal for c in plan.children] == ["a", "b"]
    assert plan.children[1].tool_names == ("read_file", "search_files")
    assert all(c.summary_budget == 20_000 and c.max_iterations == 50 for c in plan.children)
    assert "delegate" not in plan.children[0].tool_names
    for bad, message in [({}, "needs a `goal`"), ({"goal": "  "}, "non-empty"),
                         ({"goal": "a", "tasks": [{"goal": "b"}]}, "not both"),
                         ({"tasks": []}, "non-empty list"),
                         ({"tasks": [{"goal": "g"}] * (MAX_BATCH + 1)}, "at most"),
                         ({"tasks": ["nope"]}, "must be an object"),
                         ({"goal": "a", "toolsets": "files"}, "list of names"),
                         ({"goal": "a", "toolsets": ["clarify"]}, "unknown toolset"),
                         ({"goal": "x" * 5000}, "limited")]:
        with pytest.raises(ToolError, match=message):
            plan_delegation(bad, dctx())


def test_at_the_depth_limit_the_tool_refuses(tmp_path):
    with pytest.raises(ToolError, match="depth limit"):
        plan_delegation({"goal": "a"}, dctx(depth=1, max_depth=1))


def test_run_raises_the_request_or_explains_when_unavailable(tmp_path):
    tool = DelegateTool()
    with pytest.raises(ToolError, match="not available"):
        tool.run({"goal": "a"}, ToolContext(workspace=tmp_path))
    ctx = ToolContext(workspace=tmp_path, extras={"delegation": dctx()})
    with pytest.raises(DelegationRequested) as raised:
        tool.run({"goal": "a", "context": "c"}, ctx)
    assert raised.value.request.children[0].prompt == child_prompt("a", "c")
    assert tool.paths({}, ctx) == []


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 30_000), min_size=1, max_size=5),
       budget=st.integers(SUMMARY_FLOOR_TOKENS, 4_000))
def test_every_summary_in_the_result_fits_its_budget_and_nothing_is_lost(tmp_path_factory,
                                                                         sizes, budget):
    workspace = tmp_path_factory.mktemp("ws")
    outcomes = [ChildOutcome(index=i, goal=f"goal {i}", status="completed",
                             summary=f"start{i} " + "y" * size + f" end{i}",
                             iterations=2, summary_budget=budget)
                for i, size in enumerate(sizes, 1)]
    text = delegate_result(outcomes, ctx=ToolContext(workspace=workspace), call_id="call_1")
    sections = text.split("\n## Child ")[1:]
    assert len(sections) == len(sizes)
    for outcome, section in zip(outcomes, sections):
        assert len(section) <= budget * CHARS_PER_TOKEN + 700  # header + spill notice
        index = outcome.index
        assert f"start{index}" in section and f"end{index}" in section  # head and tail kept
        if "<persisted-output>" in section:
            spilled = workspace / ".hermes" / "spill" / f"call_1-child{index}.txt"
            assert spilled.read_text().strip() == outcome.summary.strip()


def test_failed_children_are_reported_as_not_finished(tmp_path):
    text = delegate_result([ChildOutcome(index=1, goal="g", status="failed",
                                         error="provider down", summary="")],
                           ctx=ToolContext(workspace=tmp_path), call_id="c")
    assert "did not finish: provider down" in text and "status: failed" in text
