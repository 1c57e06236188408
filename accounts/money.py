"""The interface's money: ``usd`` (agents/spend_caps.py's one rule, with "—" for nothing)
and the parser of amounts people type.

Every dollar amount a person reads (session header and list, /spend/, budget caps, budget
notices, usage lines, charts) goes through ``usd``; static/money.js is its twin for what the
live page formats, and the two follow the same rule (tests/accounts/test_money.py checks
both on the same table).

The rule, and why: caps are stored to 1/100 of a cent (accounts/models.py Budget.limit_usd)
and calls cost fractions of a cent, so rounding to cents made a $0.125 cap read "$0.13"
beside "$0.12 spent (99%)", two numbers that contradicted each other. ``usd`` therefore

- shows at least two decimals and at most four, trailing zeros past the cents dropped
  ("$20.00", "$0.125", "$0.0042");
- truncates (rounds toward zero) instead of rounding half up, so a spend below a cap never
  reads as equal to it or above it, and a cap (four decimals at most) is always exact;
- gives an amount under $0.0001 two significant digits ("$0.000012"), never "$0.0000".

The rule lives in agents/spend_caps.py ``usd``, so the budget sentences it writes (the
warning, the refusal) name their amounts the same way as every page.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from agents.spend_caps import limit_parse
from agents.spend_caps import usd as engine_usd

def usd(amount: Decimal | str | float | int | None) -> str:
    """An amount in USD as the interface writes it: agents/spend_caps.py ``usd`` (the one
    rule, shared with every budget sentence); None, "" or what is not a number → "—"."""
    if amount is None or amount == "":
        return "—"
    try:
        return engine_usd(amount)
    except InvalidOperation:
        return "—"


AMOUNT_SYNTAX = re.compile(r"(-?)\$?(\d+(?:\.\d*)?|\.\d+)")
"""What a typed amount may be: digits with at most one dot for cents, an optional leading
"$" (and "-", so that a negative amount is refused by its range, with that reason). No
comma, space, apostrophe or underscore: "1,5" is $1.50 to half the world and $15 to
the other half, "1.000,50" and "1 000" the same, so the form refuses them instead of
guessing (a new user's 1,5 once became a cap of $15.00)."""

AMOUNT_HINT = "use a dot for cents and no thousands separators, e.g. 1.50 or 1000"


def amount_text(raw: object) -> str:
    """THE syntax check of every amount of money a person types (budgets on /spend/, caps
    and rate overrides in the Django admin): ``raw`` stripped and without its "$", as
    ``Decimal`` reads it. Raises ValueError naming the problem for anything else, in
    particular a decimal comma or a grouping separator."""
    text = str(raw).strip()
    match = AMOUNT_SYNTAX.fullmatch(text)
    if not match:
        if re.search(r"[,\s'’_]", text):
            raise ValueError(f"“{text}” is ambiguous: {AMOUNT_HINT}")
        raise ValueError(f"“{text}” is not an amount in dollars: {AMOUNT_HINT}")
    return match[1] + match[2]


def amount_parse(raw: object) -> Decimal:
    """A budget typed by a person as USD: ``amount_text``'s syntax, then agents/spend_caps.py
    limit_parse's range (at least $0.01, at most its maximum, stored to 1/100 of a cent).
    Raises ValueError with the sentence to show."""
    return limit_parse(amount_text(raw))
