"""Template filters for money: ``{{ amount|usd }}`` ("$0.0123", "$20.00", "—" for None)."""

from decimal import Decimal

from django import template

from agents.spend_caps import usd as usd_text

register = template.Library()


@register.filter
def usd(amount) -> str:
    """USD as the app writes it everywhere (agents/spend_caps.py usd); None → "—"."""
    if amount is None or amount == "":
        return "—"
    return usd_text(Decimal(str(amount)))


@register.filter
def percent(ratio) -> str:
    """0.873 → "87%"."""
    return f"{float(ratio or 0) * 100:.0f}%"
