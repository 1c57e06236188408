"""agents/context/reduction.py: the reduction order and the recovery after a provider error, from
plain values (issue 11 item 1). No database: these are the runner's decisions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.context.reduction import ReductionState, recovery_plan, reduction_plan

ORDER = ["idle_compaction", "cold_prune", "prune", "compaction"]

states = st.builds(
    ReductionState, first_request=st.booleans(),
    idle_seconds=st.floats(min_value=0, max_value=10**6, allow_nan=False),
    idle_compaction_seconds=st.sampled_from([0, 60, 3600]), cold_prune=st.booleans(),
    cache_ttl_seconds=st.sampled_from([300, 3600]),
    prune_trigger_tokens=st.sampled_from([0, 40_000]), compaction_enabled=st.booleans(),
    compactions=st.integers(min_value=0, max_value=3), over_threshold=st.booleans())


@given(states)
def test_steps_keep_the_order_and_appear_once(state):
    plan = reduction_plan(state)
    assert list(plan) == sorted(plan, key=ORDER.index)
    assert len(set(plan)) == len(plan)
    assert not ({"cold_prune", "prune"} <= set(plan))  # one prune, cold or by trigger


@given(states)
def test_idle_and_cold_steps_only_before_the_first_request(state):
    plan = reduction_plan(state)
    if not state.first_request:
        assert "idle_compaction" not in plan and "cold_prune" not in plan


@given(states)
def test_automatic_compaction_at_most_once_per_turn(state):
    """B10: once a compaction committed in this turn, the threshold never asks again."""
    plan = reduction_plan(state)
    assert ("compaction" in plan) == (state.compaction_enabled and state.compactions == 0
                                      and state.over_threshold)


def test_idle_compaction_is_opt_in_and_measured_in_seconds():
    base = dict(first_request=True, idle_seconds=100.0)
    assert reduction_plan(ReductionState(**base)) == ()
    assert reduction_plan(ReductionState(**base, idle_compaction_seconds=60)) == (
        "idle_compaction",)
    assert reduction_plan(ReductionState(**base, idle_compaction_seconds=101)) == ()


def test_cold_prune_after_the_cache_ttl_replaces_the_trigger_prune():
    cold = ReductionState(first_request=True, idle_seconds=301, cold_prune=True,
                          prune_trigger_tokens=40_000)
    assert reduction_plan(cold) == ("cold_prune",)
    warm = ReductionState(first_request=True, idle_seconds=299, cold_prune=True,
                          prune_trigger_tokens=40_000)
    assert reduction_plan(warm) == ("prune",)


def test_the_whole_order():
    state = ReductionState(first_request=True, idle_seconds=4000, idle_compaction_seconds=3600,
                           cold_prune=True, cache_ttl_seconds=300, prune_trigger_tokens=1,
                           over_threshold=True)
    assert reduction_plan(state) == ("idle_compaction", "cold_prune", "compaction")


def test_overflow_lowers_the_output_first_then_compacts_once():
    assert recovery_plan(compress=True, history_shape=False, breaker_tripped=False,
                         compactions=0) == ("shrink_output", "forced_compaction")
    # Not tripped: one forced compaction even after an automatic one (the loop caps retries).
    assert recovery_plan(compress=True, history_shape=False, breaker_tripped=False,
                         compactions=1) == ("shrink_output", "forced_compaction")


def test_tripped_breaker_prunes_first_and_compacts_only_if_none_ran():
    """B10: with the breaker tripped, a notice, then a prune (no model call); the forced
    compaction only when no compaction ran in this turn."""
    assert recovery_plan(compress=True, history_shape=False, breaker_tripped=True,
                         compactions=0) == ("shrink_output", "notice_breaker", "forced_prune",
                                            "forced_compaction")
    assert recovery_plan(compress=True, history_shape=False, breaker_tripped=True,
                         compactions=1) == ("shrink_output", "notice_breaker", "forced_prune")


@given(st.booleans(), st.booleans(), st.integers(min_value=0, max_value=3))
def test_history_shape_repairs_and_unknown_errors_fail(history_shape, tripped, compactions):
    plan = recovery_plan(compress=False, history_shape=history_shape, breaker_tripped=tripped,
                         compactions=compactions)
    assert plan == (("repair_history",) if history_shape else ())
