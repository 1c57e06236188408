from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.context.breaker import RECOVERY_SECONDS, CompactionBreaker
from agents.context.compaction import Skip, compaction_threshold, drop_middle, plan_compaction
from agents.messages import Message

THRESHOLD = 100_000


class Clock:
    def __init__(self, now: float = 1_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def breaker(clock: Clock | None = None, clock_id: str = "proc-a") -> CompactionBreaker:
    return CompactionBreaker(clock=clock or Clock(), wall=Clock(50_000.0), clock_id=clock_id)


def trip_ineffective(b: CompactionBreaker) -> None:
    for _ in range(2):
        b.on_compaction_committed("summary")
        assert b.on_response(THRESHOLD + 1, THRESHOLD) == "ineffective"


def test_verdict_latch_gives_one_verdict_per_compaction() -> None:
    b = breaker()
    assert b.on_response(THRESHOLD + 5, THRESHOLD) is None  # nothing armed
    b.on_compaction_committed("summary")
    assert b.on_response(THRESHOLD, THRESHOLD) == "ineffective"
    assert b.on_response(THRESHOLD * 2, THRESHOLD) is None  # latch consumed
    assert b.ineffective_count == 1
    b.on_compaction_committed("summary")
    assert b.on_response(THRESHOLD - 1, THRESHOLD) == "effective"
    assert b.ineffective_count == 0


def test_response_without_usage_consumes_latch_without_verdict() -> None:
    b = breaker()
    b.on_compaction_committed("summary")
    assert b.on_response(None, THRESHOLD) is None
    assert not b.verify_next_reading
    assert b.on_response(THRESHOLD * 3, THRESHOLD) is None  # three turns later: not charged
    assert b.ineffective_count == 0


def test_fallback_streak_and_skip_neutrality() -> None:
    b = breaker()
    b.on_compaction_committed("fallback")
    b.on_compaction_committed("skip_small_middle")
    assert b.fallback_streak == 1 and b.verify_next_reading
    b.on_compaction_committed("summary")
    assert b.fallback_streak == 0
    b.on_compaction_committed("fallback")
    b.on_compaction_committed("fallback")
    decision = b.may_compact()
    assert not decision.allowed and decision.reason == "blocked: fallback streak"


def test_two_skips_never_trip_the_streak() -> None:
    b = breaker()
    for _ in range(5):
        b.on_compaction_committed("skip_small_middle")
        b.on_response(THRESHOLD - 1, THRESHOLD)
    assert b.fallback_streak == 0 and b.may_compact().allowed


def test_deadline_armed_at_first_block_not_at_trip() -> None:
    clock = Clock()
    b = breaker(clock)
    trip_ineffective(b)
    assert b.recovery_deadline is None  # tripping alone arms nothing
    clock.now += 1_000
    first = b.may_compact()
    assert not first.allowed and first.reason == "blocked: ineffective"
    assert b.recovery_deadline == clock.now + RECOVERY_SECONDS
    clock.now += RECOVERY_SECONDS - 1
    assert not b.may_compact().allowed


def test_probation_allows_one_probe_and_an_ineffective_probe_retrips() -> None:
    clock = Clock()
    b = breaker(clock)
    trip_ineffective(b)
    b.may_compact()
    clock.now += RECOVERY_SECONDS
    probe = b.may_compact()
    assert probe.allowed and probe.reason == "probation probe"
    assert b.ineffective_count == 1 and b.recovery_deadline is None
    b.on_compaction_committed("summary")
    b.on_response(THRESHOLD + 1, THRESHOLD)
    assert not b.may_compact().allowed
    assert b.recovery_deadline == clock.now + RECOVERY_SECONDS  # a full window again


def test_effective_probe_untrips() -> None:
    clock = Clock()
    b = breaker(clock)
    trip_ineffective(b)
    b.may_compact()
    clock.now += RECOVERY_SECONDS
    assert b.may_compact().allowed
    b.on_compaction_committed("summary")
    assert b.on_response(10, THRESHOLD) == "effective"
    assert b.ineffective_count == 0 and b.may_compact().reason == "ok"


def test_tripped_breaker_stays_tripped_across_restart_and_starts_a_full_window() -> None:
    """Seed: a fresh process that loads a tripped counter starts a full window blocked,
    even if the old process's deadline had already passed."""
    old_clock = Clock(5_000.0)
    b = breaker(old_clock, clock_id="proc-a")
    trip_ineffective(b)
    b.may_compact()
    old_clock.now += RECOVERY_SECONDS * 10  # long past the old deadline
    stored = json.loads(json.dumps(b.to_dict()))

    new_clock = Clock(3.0)  # a new process: its monotonic clock starts near zero
    restarted = CompactionBreaker.from_dict(stored, clock=new_clock, clock_id="proc-b")
    assert restarted.tripped and restarted.recovery_deadline is None
    assert not restarted.may_compact().allowed
    new_clock.now += RECOVERY_SECONDS - 0.001
    assert not restarted.may_compact().allowed
    new_clock.now += 0.001
    assert restarted.may_compact().reason == "probation probe"


def test_same_process_rebind_keeps_its_deadline() -> None:
    clock = Clock()
    b = breaker(clock, clock_id="proc-a")
    trip_ineffective(b)
    b.may_compact()
    rebound = CompactionBreaker.from_dict(b.to_dict(), clock=clock, clock_id="proc-a")
    assert rebound.recovery_deadline == b.recovery_deadline


def test_probation_drop_is_persisted_so_siblings_unblock() -> None:
    clock = Clock()
    b = breaker(clock)
    trip_ineffective(b)
    b.may_compact()
    clock.now += RECOVERY_SECONDS
    b.may_compact()
    sibling = CompactionBreaker.from_dict(b.to_dict(), clock=Clock(), clock_id="proc-z")
    assert sibling.may_compact().allowed


def test_failure_cooldown_escalates_and_survives_restart() -> None:
    wall = Clock(10_000.0)
    b = CompactionBreaker(clock=Clock(), wall=wall, clock_id="a")
    assert [b.on_summariser_failure() for _ in range(4)] == [60.0, 300.0, 900.0, 900.0]
    assert not b.may_summarise()
    assert b.on_summariser_failure(transient=True) == 30.0
    b.on_summariser_failure()
    restored = CompactionBreaker.from_dict(b.to_dict(), clock=Clock(), wall=wall, clock_id="b")
    assert not restored.may_summarise()
    wall.now += 900
    assert restored.may_summarise()
    restored.on_compaction_committed("summary")
    assert restored.failure_count == 0 and restored.on_summariser_failure() == 60.0


def test_growth_rejection_is_a_strike() -> None:
    b = breaker()
    b.on_compaction_grew()
    b.on_compaction_grew()
    assert b.tripped


def test_b10_incompressible_session_trips_after_two_skips() -> None:
    """B10: 64K window, a tiny middle; each pass drops 0.4K and the bill stays over the
    threshold: two strikes, then auto-compaction stops."""
    window = 64_000
    threshold = compaction_threshold(window)
    history = [Message(role="user", content="q"), Message(role="assistant", content="a")] * 2 \
        + [Message(role="user", content="Q"), Message(role="assistant", content="A")] * 4
    b = breaker()
    passes = 0
    for _ in range(5):
        if not b.may_compact().allowed:
            break
        plan = plan_compaction(history, window=window,
                               estimate=lambda m: 1_500 if m.content in ("Q", "A") else 100,
                               first_compaction=False)
        assert isinstance(plan, Skip) and plan.reason == "middle too small"
        assert plan.plan is not None
        history = drop_middle(plan.plan)
        b.on_compaction_committed("skip_small_middle")
        passes += 1
        b.on_response(threshold + 20_000, threshold)  # the floor alone is over the line
    assert passes == 2 and b.tripped and b.fallback_streak == 0


EVENTS = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(["summary", "fallback", "skip_small_middle"])),
    st.tuples(st.just("response"), st.one_of(st.none(), st.integers(0, 2 * THRESHOLD))),
    st.tuples(st.just("check"), st.floats(0, 400)),
    st.tuples(st.just("restart"), st.floats(0, 10)),
), max_size=40)


@settings(max_examples=200)
@given(EVENTS)
def test_breaker_invariants_over_random_event_sequences(events: list) -> None:
    clock = Clock()
    b = breaker(clock)
    process = 0
    blocked_since: float | None = None
    for kind, arg in events:
        if kind == "commit":
            b.on_compaction_committed(arg)
        elif kind == "response":
            latched = b.verify_next_reading
            before = b.ineffective_count
            verdict = b.on_response(arg, THRESHOLD)
            assert (verdict is not None) == (latched and arg is not None)
            assert not b.verify_next_reading
            if verdict is None:
                assert b.ineffective_count == before
        elif kind == "check":
            clock.now += arg
            was_tripped = b.tripped
            decision = b.may_compact()
            probe = decision.reason == "probation probe"
            assert decision.allowed == (not was_tripped or probe)
            if was_tripped and not decision.allowed:
                blocked_since = clock.now if blocked_since is None else blocked_since
                assert b.recovery_deadline is not None
                assert b.recovery_deadline <= blocked_since + RECOVERY_SECONDS
            if decision.reason == "probation probe":
                assert blocked_since is not None
                assert clock.now - blocked_since >= RECOVERY_SECONDS
                assert b.ineffective_count <= 1 and b.fallback_streak <= 1
        else:
            process += 1
            clock = Clock(arg)
            b = CompactionBreaker.from_dict(json.loads(json.dumps(b.to_dict())), clock=clock,
                                            clock_id=f"proc-{process}")
            assert b.recovery_deadline is None
        if not b.tripped:
            blocked_since = None
            assert b.recovery_deadline is None
        elif kind == "restart":
            blocked_since = None
