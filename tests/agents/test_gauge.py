"""agents/gauge.py: the context gauge's arithmetic (pure, no Django)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from agents.context.compaction import compaction_threshold
from agents.gauge import context_gauge
from agents.context.tokens import Calibrator, UsageAnchor


def anchor(rough: int, billed: int) -> UsageAnchor:
    return UsageAnchor(rough=rough, billed=billed, fingerprint="f", message_count=1, created=0)


def test_uncalibrated_reading_is_the_rough_sum():
    g = context_gauge(floor=4_000, history=6_000, threshold=150_000, window=200_000)
    assert (g.projected, g.headroom, g.percent, g.calibrated) == (10_000, 140_000, 7, False)
    assert g.floor_percent + g.history_percent == g.percent
    assert g.level == "ok"


def test_calibrated_reading_uses_the_billed_baseline_plus_growth():
    g = context_gauge(floor=4_000, history=6_000, threshold=150_000, window=200_000,
                      anchor=anchor(8_000, 12_000))
    assert g.projected == 12_000 + 2_000 and g.calibrated


def test_over_the_threshold_clamps_and_flags_high():
    g = context_gauge(floor=10, history=200_000, threshold=150_000, window=200_000)
    assert (g.percent, g.headroom, g.level) == (100, 0, "high")


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        context_gauge(floor=-1, history=0, threshold=1, window=1)
    with pytest.raises(ValueError):
        context_gauge(floor=0, history=0, threshold=1, window=0)


@given(floor=st.integers(0, 10**6), history=st.integers(0, 10**6),
       window=st.integers(1, 2 * 10**6),
       base=st.none() | st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)))
def test_projection_is_the_calibrators_and_parts_stay_in_bounds(floor, history, window, base):
    threshold = compaction_threshold(window)
    a = anchor(*base) if base else None
    g = context_gauge(floor=floor, history=history, threshold=threshold, window=window, anchor=a)
    calibrator = Calibrator(threshold=threshold, anchor=a)
    assert g.projected == calibrator.projected(floor + history)
    assert 0 <= g.floor_percent <= g.percent <= 100
    assert g.floor_percent + g.history_percent == g.percent
    assert g.headroom == max(0, threshold - g.projected)
    # The bar says "full" exactly when the compaction gate would fire on this projection.
    assert (g.headroom == 0) == calibrator.should_compact(floor + history) or threshold == 0
