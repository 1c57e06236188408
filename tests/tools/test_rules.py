"""The pure rules of the issue-13 tools (no Django): the sixth refund and its bound, the
todo list, clarify's gate and arguments, the output cap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.budget import IterationBudget, is_free_iteration
from agents.errors import ToolError
from agents.memory import MemoryRefused, memory_apply, memory_size
from agents.messages import ToolCall
from agents.policy.context import Decision
from agents.todo import TodoRefused, todo_apply, todo_render
from agents.tools.clarify import NO_HUMAN, clarify_gate, clarify_question
from agents.tools.execute_code import cap_output


def test_only_a_lone_execute_code_call_is_free():
    assert is_free_iteration(["execute_code"])
    assert not is_free_iteration(["execute_code", "read_file"])
    assert not is_free_iteration(["terminal"])
    assert not is_free_iteration([])


@given(st.integers(min_value=1, max_value=30))
def test_a_model_that_only_calls_execute_code_still_stops(max_total):
    """Each iteration consumes then is refunded; the refunds are bounded by the budget, so
    the loop ends after at most twice the budget."""
    budget = IterationBudget(max_total)
    calls = 0
    while budget.consume():
        calls += 1
        budget.refund_free()
        assert calls <= 2 * max_total
    assert calls == 2 * max_total and budget.free == max_total


@given(st.lists(st.text(min_size=1, max_size=40).filter(str.strip), max_size=12),
       st.integers(min_value=10, max_value=300))
def test_memory_never_grows_past_its_cap(texts, limit):
    entries: tuple[str, ...] = ()
    for text in texts:
        try:
            entries = memory_apply(entries, "add", content=text, limit=limit).entries
        except MemoryRefused as exc:
            assert f"capped at {limit} characters" in str(exc) or "NUL" in str(exc)
        assert memory_size(entries) <= limit


def test_todo_replace_merge_and_refusals():
    items = todo_apply([], [{"id": "1", "content": "read"}, {"id": "2", "content": "write"}])
    assert [i["status"] for i in items] == ["pending", "pending"]
    items = todo_apply(items, [{"id": "1", "status": "completed"},
                               {"id": "3", "content": "test", "status": "in_progress"}],
                       merge=True)
    assert [(i["id"], i["status"]) for i in items] == [
        ("1", "completed"), ("2", "pending"), ("3", "in_progress")]
    assert "(1/3 completed)" in todo_render(items)
    with pytest.raises(TodoRefused, match="no todo item has id"):
        todo_apply(items, [{"id": "9", "status": "completed"}], merge=True)
    with pytest.raises(TodoRefused, match="status must be one of"):
        todo_apply(items, [{"id": "1", "content": "x", "status": "done"}])
    with pytest.raises(TodoRefused, match="unique"):
        todo_apply([], [{"id": "1", "content": "a"}, {"id": "1", "content": "b"}])


def test_clarify_gate_asks_only_for_an_unanswered_allowed_question_a_human_can_answer():
    allow = Decision(verdict="allow", rule="state_tool", reason="")
    deny = Decision(verdict="deny", rule="deny_list", reason="no")
    call = ToolCall(id="c1", name="clarify", arguments='{"question": "Which?"}')
    other = ToolCall(id="c2", name="read_file", arguments='{"path": "a"}')
    assert clarify_gate(call, allow, answered=False, unattended=False).verdict == "ask"
    assert clarify_gate(call, allow, answered=True, unattended=False) is allow
    assert clarify_gate(call, allow, answered=False, unattended=True) is allow
    assert clarify_gate(call, deny, answered=False, unattended=False) is deny
    assert clarify_gate(other, allow, answered=False, unattended=False) is allow
    assert NO_HUMAN.startswith("no human available")


def test_clarify_arguments():
    assert clarify_question({"question": " Which? ", "choices": ["a", "b", "a"]}) == (
        "Which?", ("a", "b"))
    with pytest.raises(ToolError, match="at most 4"):
        clarify_question({"question": "q", "choices": list("abcde")})
    with pytest.raises(ToolError, match="non-empty question"):
        clarify_question({"question": "  "})


def test_cap_output():
    assert cap_output("abc", 5) == ("abc", False)
    text, cut = cap_output("abcdef", 3)
    assert cut and text.startswith("abc\n[output capped at 3 characters; 3 more")


# --- the policy on the new tools (agents/policy/__init__.py decide) ------------------------------

def _call(name: str, **args) -> ToolCall:
    import json

    return ToolCall(id=f"c-{name}", name=name, arguments=json.dumps(args))


@pytest.fixture
def policy_ctx(tmp_path):
    from agents.policy import PolicyContext

    return PolicyContext(session_id="s1", user_id="u1", workspace=str(tmp_path))


def test_state_tools_are_allowed_with_an_identity_and_denied_without(policy_ctx):
    from dataclasses import replace

    from agents.policy import decide

    for name, args in (("memory", {"action": "add", "content": "x"}),
                       ("todo", {"todos": []}), ("clarify", {"question": "q"})):
        assert decide(_call(name, **args), policy_ctx).verdict == "allow"
        nobody = replace(policy_ctx, user_id=None, session_id=None)
        assert decide(_call(name, **args), nobody).verdict == "deny"


def test_execute_code_is_allowed_in_the_sandbox_and_asks_on_the_host(policy_ctx):
    from dataclasses import replace

    from agents.policy import decide

    call = _call("execute_code", code="print(1)")
    sandboxed = replace(policy_ctx, backend_isolated=True)
    assert decide(call, sandboxed).verdict == "allow"
    asked = decide(call, policy_ctx)
    assert (asked.verdict, asked.rule) == ("ask", "code_execution")
    assert decide(call, replace(policy_ctx, unattended=True)).verdict == "deny"
    # The bypass lets it through on a host Landlock confines; where the policy is the only
    # guard it does not (agents/policy UNCONFINED: the requester may be the attacker).
    assert decide(call, replace(policy_ctx, bypass=True, host_confined=True)).verdict == "allow"
    unconfined = decide(call, replace(policy_ctx, bypass=True))
    assert unconfined.verdict == "ask" and "unconfined" in unconfined.risk_classes
    assert decide(call, replace(policy_ctx, always_rules=("tool:execute_code",))
                  ).rule == "always_rule"
    assert decide(_call("execute_code", code="  "), sandboxed).verdict == "deny"
