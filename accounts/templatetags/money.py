"""Template filters for money: ``{{ amount|usd }}`` ("$0.125", "$20.00", "—" for None),
written by accounts/money.py ``usd``, the one formatter (static/money.js is its twin)."""

from django import template

from accounts import money

register = template.Library()


@register.filter
def usd(amount) -> str:
    """USD as the app writes it everywhere (accounts/money.py usd); None → "—"."""
    return money.usd(amount)


@register.filter
def percent(ratio) -> str:
    """0.873 → "87%"."""
    return f"{float(ratio or 0) * 100:.0f}%"
