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
