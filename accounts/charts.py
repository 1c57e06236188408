"""Charts for /spend/, drawn by pygal (SVG) and served inline in the page.

pygal's SVG carries an inline <script> (its tooltip config) and an inline <style>; both are
removed from the element tree (a Content-Security-Policy that forbids inline script and
style must not break the page) and the chart is styled by static/app.css through pygal's
classes, with the theme's colours, so it stays readable in dark mode. Each bar keeps a
<title> with its day and amount, which browsers show as a tooltip without JavaScript.
"""

from __future__ import annotations

from datetime import date
from decimal import ROUND_CEILING, Decimal
from functools import lru_cache
from xml.etree import ElementTree as ET

import pygal

from accounts.money import usd

# pygal builds un-namespaced elements and writes xmlns as a plain attribute.

def chart_spend_by_day(days: list[tuple[date, Decimal]], *, title: str = "Spend by day (USD)") -> str:
    """An SVG bar chart (markup string) of USD per day; x labels every few days. Drawing
    costs pygal tens of milliseconds, so the markup is memoised on the exact data (the same
    days and amounts always draw the same chart; any new spend is a new key)."""
    return _chart(tuple(days), title)


@lru_cache(maxsize=512)
def _chart(days: tuple[tuple[date, Decimal], ...], title: str) -> str:
    chart = pygal.Bar(js=[], disable_xml_declaration=True, show_legend=False, width=720,
                      height=280, x_label_rotation=0, show_minor_x_labels=False,
                      truncate_label=-1, margin=8, title=None, print_values=False,
                      value_formatter=lambda v: usd(Decimal(str(v))))
    step = max(1, len(days) // 8)
    chart.x_labels = [f"{d:%b %d}" for d, _ in days]
    chart.x_labels_major = [f"{d:%b %d}" for i, (d, _) in enumerate(days) if i % step == 0]
    chart.add("USD", [float(v) for _, v in days])
    # Our own ticks, not pygal's: its scale over a small range stepped finer than the
    # labels' precision, so labels repeated ("$0.02" three times). An axis labels every
    # tick with the same decimals (y_ticks), unlike usd(), which drops trailing zeros.
    chart.y_labels = [{"value": float(value), "label": label}
                      for value, label in y_ticks(max((v for _, v in days), default=Decimal(0)))]
    tree = chart.render_tree()
    bars = [g for g in tree.iter() if g.get("class") == "bar"]
    for bar, (day, amount) in zip(bars, days):
        tip = ET.Element("title")  # a tooltip without JavaScript
        tip.text = f"{day:%Y-%m-%d}: {usd(amount)}"
        bar.insert(0, tip)
        for desc in bar.findall("desc"):
            bar.remove(desc)
    return _clean(tree, title)


def y_ticks(top: Decimal, *, most: int = 6) -> list[tuple[Decimal, str]]:
    """Y-axis ticks from $0 to at least ``top``: a 1, 2 or 5 × 10^k step giving at most
    ``most`` ticks, each labelled with as many decimals as the step needs (at least cents),
    so no two labels read the same."""
    top = max(top, Decimal("0.01"))  # an empty month still gets a readable axis
    exponent = top.adjusted() - 1  # a step near a tenth of the top
    while True:
        for mantissa in (1, 2, 5):
            step = Decimal(mantissa).scaleb(exponent)
            count = int((top / step).to_integral_value(rounding=ROUND_CEILING)) + 1
            if count <= most:
                decimals = max(2, -step.normalize().as_tuple().exponent)
                return [(step * i, f"${step * i:,.{decimals}f}") for i in range(count)]
        exponent += 1


def _clean(tree: ET.Element, title: str) -> str:
    """Drop <script>, <style> and style attributes; add an accessible title; scale to fit."""
    for parent in list(tree.iter()):
        for child in list(parent):
            tag = child.tag.split("}")[-1] if isinstance(child.tag, str) else "comment"
            if tag in ("script", "style", "comment"):
                parent.remove(child)
            elif {"tooltip-overlay", "tooltip"} & set((child.get("class") or "").split()):
                parent.remove(child)  # the overlay needs pygal's JavaScript
    for element in tree.iter():
        element.attrib.pop("style", None)
    for stale in tree.findall("title"):
        tree.remove(stale)  # pygal's own "Pygal" title
    tree.set("role", "img")
    tree.set("aria-label", title)
    tree.set("class", "pygal-chart spend-chart")
    tree.attrib.pop("width", None)
    tree.attrib.pop("height", None)
    label = ET.Element("title")
    label.text = title
    tree.insert(0, label)
    return ET.tostring(tree, encoding="unicode")
