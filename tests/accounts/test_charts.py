"""The pygal chart as served: one bar per day with a tooltip title, no script or inline
style (a strict CSP must not break it)."""

from __future__ import annotations

import re
from datetime import date, timedelta
from decimal import Decimal

from accounts.charts import chart_spend_by_day


def test_chart_has_a_bar_per_spending_day_and_no_script_or_style():
    days = [(date(2026, 11, 1) + timedelta(days=i), Decimal(0)) for i in range(29)]
    days.append((date(2026, 11, 30), Decimal("0.0081")))
    svg = chart_spend_by_day(days, title="t")
    assert svg.startswith("<svg") and 'role="img"' in svg
    assert "<script" not in svg and "<style" not in svg and "style=" not in svg
    assert svg.count('class="bar"') == 30
    bar = re.search(r'<g class="bar"><title>2026-11-30: \$0.0081</title><rect [^>]*>', svg)
    assert bar is not None  # the day's bar is drawn, with its tooltip


def y_axis_labels(svg: str) -> list[str]:
    """The y-axis tick labels as drawn in the SVG (pygal's "axis y" group)."""
    from xml.etree import ElementTree as ET

    tree = ET.fromstring(svg)
    axis = next(g for g in tree.iter() if {"axis", "y"} <= set((g.get("class") or "").split()))
    return [t.text for t in axis.iter() if t.tag.endswith("text") and t.text]


def test_y_axis_labels_are_distinct_over_a_small_range():
    """A user's finding: over a few cents the axis read "$0.03" twice and "$0.02" three
    times (ticks a fraction of a cent apart, each rounded to cents)."""
    days = [(date(2026, 11, 1) + timedelta(days=i), Decimal(v))
            for i, v in enumerate(["0.021", "0.0314", "0.025", "0", "0.0288"])]
    labels = y_axis_labels(chart_spend_by_day(days, title="t"))
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
    assert labels[0] == "$0.00" and "$0.04" in labels


def test_y_axis_labels_keep_enough_decimals_below_a_cent():
    days = [(date(2026, 11, 1), Decimal("0.0081")), (date(2026, 11, 2), Decimal("0.0012"))]
    labels = y_axis_labels(chart_spend_by_day(days, title="t"))
    assert len(set(labels)) == len(labels) >= 3, labels
    assert "$0.002" in labels  # a tenth-of-a-cent step is labelled to the tenth of a cent
