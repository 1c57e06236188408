"""agents/spend_caps.py: periods, worst cases, the admission decision and its overshoot bound."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.pricing import Rates
from agents.spend_caps import (
    Cap, cap_decide, exceeded_reason, limit_parse, overshoot_bound, period_end, period_start,
    usd, warning_text, worst_case_usd)

D = Decimal
UTC = timezone.utc
NOW = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
TEAM_DAY = Cap(scope="team", period="day", limit_usd=D("20"), label="team")


def test_periods_are_utc_days_and_months():
    assert period_start("day", NOW) == datetime(2026, 12, 31, tzinfo=UTC)
    assert period_end("day", NOW) == datetime(2027, 1, 1, tzinfo=UTC)
    assert period_start("month", NOW) == datetime(2026, 12, 1, tzinfo=UTC)
    assert period_end("month", NOW) == datetime(2027, 1, 1, tzinfo=UTC)
    assert period_end("month", datetime(2026, 2, 10, tzinfo=UTC)) == datetime(2026, 3, 1,
                                                                               tzinfo=UTC)
    # another timezone: the UTC day it falls in
    tokyo = timezone(timedelta(hours=9))
    assert period_start("day", datetime(2026, 6, 2, 3, 0, tzinfo=tokyo)) == datetime(
        2026, 6, 1, tzinfo=UTC)


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
       st.sampled_from(["day", "month"]))
def test_every_moment_is_inside_its_period(moment, period):
    start, end = period_start(period, moment), period_end(period, moment)
    assert start <= moment.replace(tzinfo=UTC) < end
    assert period_start(period, end) == end  # periods tile: the next starts where this ends


def test_the_readable_reason():
    assert exceeded_reason(TEAM_DAY, NOW) == (
        "team budget of $20.00/day reached; resets at 00:00 UTC")
    month = Cap(scope="user", period="month", limit_usd=D("5"), label="your")
    assert exceeded_reason(month, NOW) == (
        "your budget of $5.00/month reached; resets at 2027-01-01 00:00 UTC")
    assert warning_text(TEAM_DAY, spent=D("16.4")) == "team budget of $20.00/day: $16.40 spent (82%)"
    assert usd(D("0.0042")) == "$0.0042" and usd(D("1234.5")) == "$1,234.50"


def test_decide_admits_below_the_cap_and_refuses_at_it():
    assert cap_decide(TEAM_DAY, spent=D("10"), reserved=D("5"), now=NOW).allowed
    refused = cap_decide(TEAM_DAY, spent=D("15"), reserved=D("5"), now=NOW)
    assert not refused.allowed and "reached" in refused.reason
    warn = cap_decide(TEAM_DAY, spent=D("15"), reserved=D("0"), now=NOW, worst=D("1"))
    assert warn.allowed and warn.warn
    assert not cap_decide(TEAM_DAY, spent=D("1"), reserved=D("0"), now=NOW, worst=D("1")).warn


def test_unknown_cost_policy():
    blocked = cap_decide(TEAM_DAY, spent=D(0), reserved=D(0), now=NOW, cost_known=False)
    assert not blocked.allowed and "unknown" in blocked.reason
    assert cap_decide(TEAM_DAY, spent=D(0), reserved=D(0), now=NOW, cost_known=False,
                      policy="allow").allowed


def test_worst_case():
    rates = Rates(input=D(3), output=D(15), cache_read=D("0.3"), cache_write_5m=D("3.75"),
                  cache_write_1h=D(6))
    # 10K prompt tokens at the 1h write rate (the dearest input side) + 1K output
    assert worst_case_usd(rates, prompt_estimate=10_000, max_tokens=1_000) == D("0.075")
    assert worst_case_usd(Rates(input=D(1)), prompt_estimate=1, max_tokens=1) is None
    assert worst_case_usd(None, prompt_estimate=1, max_tokens=1) is None


@pytest.mark.parametrize("raw", ["-1", "abc", "", "NaN", "inf", "0", "0.001", "2000000"])
def test_limit_parse_refuses(raw):
    with pytest.raises(ValueError):
        limit_parse(raw)


def test_limit_parse_accepts():
    assert limit_parse("$1,000") == D("1000") and limit_parse("0.05") == D("0.05")


# --- the bound, by simulation of the protocol ------------------------------------------
call_st = st.tuples(st.decimals(min_value=0, max_value=D("0.5"), places=4),   # actual
                    st.decimals(min_value=0, max_value=D("0.5"), places=4))   # worst


@settings(max_examples=400, deadline=None)
@given(st.lists(call_st, min_size=1, max_size=60), st.integers(1, 20),
       st.decimals(min_value=D("0.01"), max_value=D("3"), places=2), st.randoms())
def test_overshoot_below_one_call_plus_estimate_errors(calls, workers, limit, rnd):
    """``workers`` concurrent turns reserve, call and settle in a random interleaving under
    one cap; the final spend never exceeds the limit by the module's bound."""
    cap = Cap(scope="team", period="day", limit_usd=limit)
    queue = list(calls)
    spent, in_flight = D(0), []  # in_flight: (actual, worst)
    last_bound = D(0)
    idle = workers
    while queue or in_flight:
        can_start = bool(queue) and idle > 0
        if can_start and (not in_flight or rnd.random() < 0.5):
            actual, worst = queue.pop(0)
            decision = cap_decide(cap, spent=spent, reserved=sum((w for _, w in in_flight), D(0)),
                                  now=NOW, worst=worst)
            if decision.allowed:
                last_bound = overshoot_bound(last_call_usd=actual, in_flight=list(in_flight))
                in_flight.append((actual, worst))
                idle -= 1
            continue
        done = in_flight.pop(rnd.randrange(len(in_flight)))
        spent += done[0]
        idle += 1
    assert spent - limit < last_bound or spent <= limit
