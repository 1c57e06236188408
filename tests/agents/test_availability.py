"""The asymmetric availability cache (seed, "Availability checks"): a success trusted for
30 s, a failure within 60 s of the last success ignored and re-probed, property-tested
with an injected clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.availability import (FAILURE_GRACE, SUCCESS_TTL, AvailabilityCache,
                                 binary_installed, value_set)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Probe:
    def __init__(self) -> None:
        self.answer, self.calls = True, 0

    def __call__(self) -> bool:
        self.calls += 1
        if self.answer is None:
            raise RuntimeError("probe crashed")
        return self.answer


def test_a_success_is_trusted_for_thirty_seconds_without_probing():
    clock, probe = Clock(), Probe()
    cache = AvailabilityCache(clock=clock)
    assert cache.check("terminal", probe) and probe.calls == 1
    clock.now += SUCCESS_TTL - 0.01
    probe.answer = False
    assert cache.check("terminal", probe) and probe.calls == 1
    clock.now += 0.02
    assert cache.check("terminal", probe) and probe.calls == 2  # re-probed, failure ignored


def test_a_failure_inside_the_grace_window_is_ignored_and_reprobed_each_time():
    clock, probe = Clock(), Probe()
    cache = AvailabilityCache(clock=clock)
    cache.check("mcp:x", probe)
    probe.answer = False
    for step in (31, 40, 59):
        clock.now = 1000.0 + step
        assert cache.check("mcp:x", probe)
    assert probe.calls == 4  # every check after the TTL probed again
    clock.now = 1000.0 + FAILURE_GRACE
    assert not cache.check("mcp:x", probe)


def test_a_failure_with_no_success_before_it_is_returned_and_not_cached():
    clock, probe = Clock(), Probe()
    cache = AvailabilityCache(clock=clock)
    probe.answer = False
    assert not cache.check("k", probe)
    probe.answer = True
    assert cache.check("k", probe) and probe.calls == 2  # a tool that comes up is seen


def test_a_probe_that_raises_is_a_failure_not_a_crash():
    clock, probe = Clock(), Probe()
    probe.answer = None
    assert not AvailabilityCache(clock=clock).check("k", probe)


def test_predicates():
    assert binary_installed("sh")() and not binary_installed("no-such-binary-hermes")()
    assert value_set("sk-1")() and not value_set("  ")() and not value_set(None)()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=45, allow_nan=False),
                          st.sampled_from([True, False, None])), min_size=1, max_size=40))
def test_flapping_never_removes_a_tool_within_sixty_seconds_of_a_success(steps):
    """Whatever the probe answers (up, down, crashing) and whenever it is asked, a check
    within 60 s of the last successful probe says available; a check that says
    unavailable always has no success in the last 60 s."""
    clock, probe = Clock(), Probe()
    cache = AvailabilityCache(clock=clock)
    last_success = None
    for dt, answer in steps:
        clock.now += dt
        probe.answer = answer
        calls = probe.calls
        ok = cache.check("tool", probe)
        probed = probe.calls > calls
        if probed and answer is True:
            last_success = clock.now
        if last_success is not None and clock.now - last_success < FAILURE_GRACE:
            assert ok, (clock.now, last_success)
        if not ok:
            assert last_success is None or clock.now - last_success >= FAILURE_GRACE
        if not probed:
            assert ok and clock.now - last_success < SUCCESS_TTL
