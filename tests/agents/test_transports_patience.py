"""PatientTransport: a throttled provider is waited out (backoff, shared cooldowns,
Retry-After, jitter, a total), never after visible text, never for quota; Stop ends a wait.
Pure: fake inner transports (tests/agents/test_transports_failover.py's Fake), a fake clock
and sleep. The real-services proof is tests/reliability/test_database_and_provider.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.errors import TransportError, TurnCancelled
from agents.transports.errors import FailoverReason
from agents.transports.failover import FailoverTransport, MemoryCooldowns, Route
from agents.transports.patience import Patience, PatientTransport, routes_resting, throttled
from tests.agents.test_transports_failover import BUSY, QUOTA, RATE, REQUEST, SHAPE, Fake, hint

R = FailoverReason


class Clock:
    """A fake monotonic clock; ``sleep`` advances it and records each pause."""

    def __init__(self):
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def patient(inner, clock, **kw):
    return PatientTransport(inner, sleep=clock.sleep, clock=lambda: clock.now, **kw)


def test_a_throttled_provider_is_waited_out_and_the_turn_succeeds():
    fake, clock = Fake(RATE, BUSY, RATE), Clock()
    notices = []
    response = patient(fake, clock, patience=Patience(jitter=0.0),
                       notice=lambda s, h, n: notices.append((round(s, 3), h.reason, n))
                       ).complete(REQUEST, on_text=lambda t: None)
    assert response.message.content == "ok" and len(fake.calls) == 4
    # 2, 4, 8 s: doubling from base; each wait announced before it starts.
    assert notices == [(2.0, R.RATE_LIMIT, 1), (4.0, R.OVERLOADED, 2), (8.0, R.RATE_LIMIT, 3)]
    assert sum(clock.slept) == pytest.approx(14.0)


def test_the_servers_retry_after_and_the_shared_rest_lengthen_a_wait():
    fake, clock = Fake(hint(R.RATE_LIMIT, retryable=True, retry_after=25.0), RATE), Clock()
    waits = []
    patient(fake, clock, patience=Patience(jitter=0.0), resting=lambda: 12.0,
            notice=lambda s, h, n: waits.append(s)).complete(REQUEST, on_text=lambda t: None)
    assert waits == [25.0, 12.0]  # the hint above the 20 s cap; then the store's rest


@pytest.mark.parametrize("error", [QUOTA, SHAPE, hint(R.SERVER_ERROR, retryable=True)])
def test_only_throttling_is_waited_on(error):
    fake, clock = Fake(error), Clock()
    with pytest.raises(TransportError):
        patient(fake, clock).complete(REQUEST, on_text=lambda t: None)
    assert len(fake.calls) == 1 and clock.slept == []


def test_no_wait_after_visible_text():
    fake, clock = Fake(RATE, partial="Hel"), Clock()
    with pytest.raises(TransportError):
        patient(fake, clock).complete(REQUEST, on_text=lambda t: None)
    assert len(fake.calls) == 1 and clock.slept == []


def test_a_retry_after_above_max_hint_fails_at_once():
    fake, clock = Fake(hint(R.RATE_LIMIT, retryable=True, retry_after=120.0)), Clock()
    with pytest.raises(TransportError):
        patient(fake, clock, patience=Patience(max_hint=30.0)).complete(
            REQUEST, on_text=lambda t: None)
    assert len(fake.calls) == 1 and clock.slept == []


def test_the_patience_runs_out_with_the_providers_error():
    fake, clock = Fake(*[RATE] * 50), Clock()
    with pytest.raises(TransportError) as caught:
        patient(fake, clock, patience=Patience(total=60.0, jitter=0.0)).complete(
            REQUEST, on_text=lambda t: None)
    assert caught.value.classified.reason is R.RATE_LIMIT
    assert sum(clock.slept) <= 60.0
    # 2+4+8+16 = 30, +20 = 50; the next 20 s would pass 60: 6 attempts, no more.
    assert len(fake.calls) == 6


def test_stop_during_a_wait_cancels_the_turn_promptly():
    fake, clock = Fake(RATE, RATE), Clock()
    with pytest.raises(TurnCancelled):
        patient(fake, clock).complete(REQUEST, on_text=lambda t: None,
                                      should_stop=lambda: clock.now >= 1.0)
    assert len(fake.calls) == 1 and clock.now <= 1.0 + 0.5


def test_routes_resting_is_the_time_until_the_first_route_is_usable():
    now = [1_000.0]
    store = MemoryCooldowns(lambda: now[0])
    routes = [Route(provider="a", model="m", credential="k1", transport=Fake()),
              Route(provider="b", model="m", credential="", transport=Fake())]
    failover = FailoverTransport(routes, store=store, clock=lambda: now[0])
    resting = routes_resting(failover, clock=lambda: now[0])
    assert resting() == 0.0
    store.strike("key:a:k1", base=40.0, reason="rate_limit")
    assert resting() == 0.0  # b is usable
    store.strike("provider:b", base=10.0, reason="overloaded")
    assert resting() == pytest.approx(30.0)  # b's 30 s floor ends first
    now[0] += 35.0
    assert resting() == 0.0


@given(attempt=st.integers(1, 40), hint=st.none() | st.floats(0, 30),
       resting=st.floats(0, 3600), rand=st.floats(0, 1))
def test_a_wait_is_bounded_jittered_and_honours_the_hint(attempt, hint, resting, rand):
    p = Patience()
    wait = p.wait(attempt, hint=hint, resting=resting, rand=lambda: rand)
    assert wait >= (hint or 0.0)
    assert wait >= min(p.cap, p.base * 2 ** (attempt - 1))
    assert wait <= max(p.cap * (1 + p.jitter), hint or 0.0)


def test_throttled_reads_the_hints_only():
    error = TransportError("x", RATE)
    assert throttled(error)
    error.partial = "shown"
    assert not throttled(error)
    assert not throttled(TransportError("x", QUOTA)) and not throttled(ValueError())
