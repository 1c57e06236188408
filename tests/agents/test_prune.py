from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.context.history import validate_and_repair
from agents.messages import Message, ToolCall
from agents.context.prune import (
    MIN_RECLAIM_TOKENS, PROTECT_LAST_N, is_cold_resume, may_prune, plan_prune,
    rearm_level_after,
)
from agents.context.tokens import estimate_message_tokens as estimate


def exchange(k: int, output: str, *, name: str = "terminal", args: str = "{}") -> list[Message]:
    base = 100 + 3 * k
    return [Message(role="user", content=f"step {k}", id=base),
            Message(role="assistant", content="", id=base + 1,
                    tool_calls=(ToolCall(id=f"c{k}", name=name, arguments=args),)),
            Message(role="tool", content=output, tool_call_id=f"c{k}", tool_name=name,
                    id=base + 2)]


def session(outputs: list[str], **kw: str) -> list[Message]:
    return [m for k, out in enumerate(outputs) for m in exchange(k, out, **kw)]


BIG = "line of terminal output\n" * 2_000  # 48,000 chars, about 12K tokens
SMALL = "ok"


def test_trigger_zero_means_off() -> None:
    history = session([BIG] * 3 + [SMALL] * 10)
    assert plan_prune(history, estimate=estimate, trigger_tokens=0, rearm_level=0) is None


def test_oversized_old_result_becomes_a_stub_naming_tool_size_and_row() -> None:
    history = session([BIG] + [SMALL] * 10)
    plan = plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0)
    assert plan is not None and [e.kind for e in plan.edits] == ["oversized"]
    pruned = plan.messages[2]
    assert pruned.sent_content == ("[pruned: terminal output, 48,000 chars; full text kept as "
                                   "message #102 — use session_search or ask to re-run]")
    assert pruned.content == BIG and pruned.id == 102  # the full text stays on the row
    assert plan.reclaimed >= MIN_RECLAIM_TOKENS
    assert plan.tokens_after == plan.tokens_before - plan.reclaimed
    assert validate_and_repair(list(plan.messages)).problems == ()


def test_duplicate_old_results_point_at_the_newer_one() -> None:
    listing = "".join(f"src/module_{i}.py\n" for i in range(2_000))
    history = session([listing, listing] + [SMALL] * 10)
    plan = plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0)
    assert plan is not None
    kinds = {e.index: e.kind for e in plan.edits}
    assert kinds[2] == "duplicate"
    assert "identical to message #105" in plan.messages[2].wire_text


def test_bulky_old_call_arguments_are_truncated_and_still_parse() -> None:
    args = json.dumps({"path": "big.txt", "content": "x" * 30_000})
    history = session(["written"] + [SMALL] * 10, name="write_file", args=args)
    plan = plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0)
    assert plan is not None and plan.edits[0].kind == "arguments"
    parsed = plan.messages[1].tool_calls[0].parsed_arguments()
    assert parsed["path"] == "big.txt" and parsed["content"].endswith("[pruned: 30,000 chars]")


def test_protected_tail_is_never_touched() -> None:
    history = session([f"{BIG}{k}" for k in range(12)])
    plan = plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0)
    assert plan is not None
    assert {e.index for e in plan.edits} == {2, 5, 8, 11, 14}
    assert all(e.index < len(history) - PROTECT_LAST_N for e in plan.edits)


def test_reclaim_gate_refuses_small_wins_but_forced_commits_them() -> None:
    medium = "y" * 9_000  # just over the size limit: about 2K tokens freed
    history = session([medium] + [SMALL] * 10)
    assert plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0) is None
    forced = plan_prune(history, estimate=estimate, trigger_tokens=0, rearm_level=10**9,
                        forced=True)
    assert forced is not None and 0 < forced.reclaimed < MIN_RECLAIM_TOKENS


def test_only_after_tool_results_and_only_over_trigger() -> None:
    history = session([BIG] + [SMALL] * 10)
    bare_user = history + [Message(role="user", content="hi", id=999)]
    assert plan_prune(bare_user, estimate=estimate, trigger_tokens=1_000, rearm_level=0) is None
    total = sum(estimate(m) for m in history)
    assert plan_prune(history, estimate=estimate, trigger_tokens=total + 1,
                      rearm_level=0) is None


def test_rearm_level_and_hysteresis() -> None:
    history = session([BIG] + [SMALL] * 10)
    plan = plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0)
    assert plan is not None
    assert plan.rearm_level == plan.tokens_after + max(plan.reclaimed, 1_000, MIN_RECLAIM_TOKENS)
    regrown = session([BIG, BIG] + [SMALL] * 10)
    current = plan.rearm_level - 1
    assert plan_prune(regrown, estimate=estimate, trigger_tokens=1_000,
                      rearm_level=plan.rearm_level, current_tokens=current) is None
    assert plan_prune(regrown, estimate=estimate, trigger_tokens=1_000,
                      rearm_level=plan.rearm_level,
                      current_tokens=plan.rearm_level) is not None
    # over the compaction threshold the runway is waived
    assert plan_prune(regrown, estimate=estimate, trigger_tokens=1_000,
                      rearm_level=plan.rearm_level, current_tokens=current,
                      compaction_threshold=current) is not None


def test_rearm_level_survives_a_restart_as_plain_data() -> None:
    """The level is an int the caller stores with the edits; a new process reading it back
    refuses the same prune."""
    history = session([BIG] + [SMALL] * 10)
    plan = plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0)
    assert plan is not None
    row = json.loads(json.dumps({"prune_rearm_tokens": plan.rearm_level}))
    again = session([BIG, BIG] + [SMALL] * 10)
    assert plan_prune(again, estimate=estimate, trigger_tokens=1_000,
                      rearm_level=row["prune_rearm_tokens"],
                      current_tokens=plan.tokens_after + 10) is None


def test_may_prune_and_runway_arithmetic() -> None:
    assert may_prune(0, 0)
    assert not may_prune(9, 10) and may_prune(10, 10)
    assert may_prune(9, 10, compaction_threshold=9)
    assert rearm_level_after(50_000, 20_000, 1_000) == 70_000
    assert rearm_level_after(50_000, 100, 1_000) == 54_096
    assert rearm_level_after(50_000, 100, 30_000) == 80_000


def test_cold_resume_prunes_harder() -> None:
    history = session([f"{k}" + "z" * 3_000 for k in range(4)] + [SMALL] * 8)
    assert plan_prune(history, estimate=estimate, trigger_tokens=1_000, rearm_level=0,
                      forced=True) is None  # warm limits: nothing qualifies
    cold = plan_prune(history, estimate=estimate, trigger_tokens=0, rearm_level=10**9,
                      cold=True)
    assert cold is not None and len(cold.edits) == 4
    assert is_cold_resume(301, 300) and not is_cold_resume(299, 300)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([SMALL, "q" * 9_000, "w" * 20_000, "dup" * 300]),
                min_size=1, max_size=14),
       st.booleans())
def test_prune_is_idempotent_and_keeps_history_legal(outputs: list[str], cold: bool) -> None:
    history = session(outputs)
    plan = plan_prune(history, estimate=estimate, trigger_tokens=1, rearm_level=0,
                      forced=True, cold=cold)
    if plan is None:
        return
    assert plan.reclaimed == sum(e.reclaimed for e in plan.edits) > 0
    assert [m.id for m in plan.messages] == [m.id for m in history]
    assert [m.content for m in plan.messages if m.role == "tool"] == outputs
    assert validate_and_repair(list(plan.messages)).problems == ()
    assert plan_prune(list(plan.messages), estimate=estimate, trigger_tokens=1, rearm_level=0,
                      forced=True, cold=cold) is None
