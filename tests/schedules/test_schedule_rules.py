"""The pure schedule rules (agents/schedule_rules.py) and the unattended builders
(agents/unattended.py): croniter/cron-descriptor behind a strict five-field form, bounds on
intervals, and a scaffold that never depends on the run."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.cache import REGISTRY, find_stable_prefix
from agents.schedule_rules import (MIN_INTERVAL_SECONDS, ScheduleError, cron_describe,
                                   cron_next_runs, cron_parse, interval_describe,
                                   interval_next_runs)
from agents.unattended import schedule_message, webhook_message

T0 = datetime(2026, 1, 1, 12, 7, tzinfo=timezone.utc)


def test_cron_description_and_next_runs():
    assert cron_describe("*/15 * * * *") == "Every 15 minutes (UTC)"
    assert cron_next_runs("*/15 * * * *", after=T0, count=3) == [
        T0.replace(minute=15), T0.replace(minute=30), T0.replace(minute=45)]
    assert "03:00" in cron_describe("0 3 * * 1-5")


@pytest.mark.parametrize("bad, says", [
    ("", "Enter a cron expression"), ("@daily", "Macros"), ("* * * *", "has 4"),
    ("* * * * * *", "has 6"), ("61 * * * *", "not a valid cron expression"),
    ("* 24 * * *", "not a valid"), ("* * 32 * *", "not a valid"), ("x y z a b", "not a valid"),
])
def test_bad_cron_expressions_are_refused_with_a_reason(bad, says):
    with pytest.raises(ScheduleError, match=says):
        cron_parse(bad)


def test_naive_after_is_refused():
    with pytest.raises(ValueError):
        cron_next_runs("* * * * *", after=T0.replace(tzinfo=None))


@given(st.integers(min_value=MIN_INTERVAL_SECONDS, max_value=10**7))
def test_interval_runs_are_evenly_spaced_and_described_exactly(seconds):
    runs = interval_next_runs(seconds, start=T0, count=4)
    assert [b - a for a, b in zip([T0, *runs], runs)] == [timedelta(seconds=seconds)] * 4
    words = interval_describe(seconds).split()
    n = 1 if len(words) == 2 else int(words[1])
    unit = {"day": 86400, "hour": 3600, "minute": 60, "second": 1}[words[-1].rstrip("s")]
    assert n * unit == seconds


@given(st.integers(max_value=MIN_INTERVAL_SECONDS - 1))
def test_intervals_below_a_minute_are_refused(seconds):
    with pytest.raises(ScheduleError):
        interval_describe(seconds)


@given(run=st.integers(1, 10**6), when=st.text(max_size=30))
def test_schedule_scaffold_is_the_same_for_every_run_and_registered(run, when):
    first = schedule_message(name="nightly", prompt="Summarise the logs.", run_number=1,
                             fired_at="2026-01-01T00:00:00Z")
    other = schedule_message(name="nightly", prompt="Summarise the logs.", run_number=run,
                             fired_at=when or "x")
    assert other.scaffold == first.scaffold and other.tail.strip()
    assert first.scaffold in REGISTRY.snapshot()
    assert find_stable_prefix(other.text) == len(first.scaffold)


@given(payload=st.text(max_size=200))
def test_a_payload_that_contains_the_scaffold_never_moves_the_split(payload):
    honest = webhook_message(name="ci", instructions="Triage the build.", delivery_id="d1",
                             received_at="t", payload="{}")
    hostile = webhook_message(name="ci", instructions="Triage the build.", delivery_id="d2",
                              received_at="t", payload=honest.text + payload)
    assert hostile.stable_len == honest.stable_len
    assert hostile.text.startswith(honest.scaffold)
