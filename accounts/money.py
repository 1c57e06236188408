"""THE money formatter of the interface, and the budget sentences written with it.

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

agents/spend_caps.py keeps its own ``usd`` for its log and error sentences; the budget
sentences users read are rewritten here (``cap_text``, ``warning_text``, ``refusal_text``).
"""

from __future__ import annotations

import re
from decimal import ROUND_DOWN, Decimal, InvalidOperation

from agents.spend_caps import Cap, limit_parse
from agents.spend_caps import cap_text as engine_cap_text

PLACES = Decimal("0.0001")
"""The finest step shown for amounts of $0.0001 or more (the cap's storage precision)."""


def usd(amount: Decimal | str | float | int | None) -> str:
    """An amount in USD as the interface writes it (see the module's rule): "$1,234.50",
    "$0.125", "$0.0042", "$0.000012"; None or "" → "—". ``amount``: a Decimal, or anything
    ``Decimal(str(amount))`` reads (a UsageRecord's string cost, an int)."""
    if amount is None or amount == "":
        return "—"
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        return "—"
    sign, value = ("-" if value < 0 else ""), abs(value)
    if value == 0:
        return "$0.00"
    if value < PLACES:  # two significant digits, toward zero
        step = Decimal(1).scaleb(value.adjusted() - 1)
        return f"{sign}${value.quantize(step, rounding=ROUND_DOWN):f}"
    text = f"{value.quantize(PLACES, rounding=ROUND_DOWN):,.4f}"
    for _ in range(2):  # drop zeros past the cents: "0.1250" → "0.125", "20.0000" → "20.00"
        if text.endswith("0") and len(text.split(".")[1]) > 2:
            text = text[:-1]
    return f"{sign}${text}"


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


def cap_text(cap: Cap) -> str:
    """"team budget of $0.125/day": agents/spend_caps.py cap_text's words with ``usd``."""
    who = f"{cap.label} " if cap.label else ""
    return f"{who}budget of {usd(cap.limit_usd)}/{cap.period}"


def warning_text(cap: Cap, *, spent: Decimal) -> str:
    """The 80% warning a user reads: "team budget of $0.125/day: $0.1249 spent (99%)".
    ``spent``: USD settled plus reserved this period; the share is floored, like the
    amounts, so it never reads 100% below the cap."""
    share = int(spent * 100 / cap.limit_usd) if cap.limit_usd else 100
    return f"{cap_text(cap)}: {usd(spent)} spent ({share}%)"


def refusal_text(cap: Cap, reason: str) -> str:
    """A refusal sentence of agents/spend_caps.py cap_decide with its cap written by
    ``usd``: the sentence's words stay the engine's (reached / unknown cost), only the
    amount it names changes ("$0.13" → "$0.125")."""
    return reason.replace(engine_cap_text(cap), cap_text(cap), 1)
