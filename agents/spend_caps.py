"""Spend caps: USD budgets that stop a run (beyond hermes; the seed ends its usage chapter on
"there is no spend cap ... unattended cron work has no financial stop").

Not the iteration budget (agents/budget.py counts model calls per turn); this module counts
dollars per user, team or session per UTC day or month. Pure arithmetic and decisions; the
database shell (locks, reservation rows, sums) is accounts/budgets.py.

The protocol, per provider call, for every cap that applies to the call:

1. **reserve** before the call, under a lock on the cap: the call's worst case
   ``w = prompt_estimate × worst input-side rate + max_tokens × output rate`` (USD) is
   added to the cap's open reservations if ``spent + reserved < limit`` (there is headroom
   left), else the call is refused;
2. **settle** after the call, in the same transaction that writes its UsageRecord: the
   reservation is dropped and the actual cost ``c`` becomes part of ``spent``.

**The bound.** Let ``L`` be the limit and let call *k* be the last call admitted in the
period. When *k* was admitted, ``spent_k + reserved_k < L`` where ``reserved_k`` is the sum
of the worst cases ``w_i`` of the calls then in flight (set ``F``). No call is admitted
after *k*, so the period's final spend is
``spent_k + Σ_{i∈F} c_i + c_k ≤ spent_k + reserved_k + c_k + Σ_{i∈F} max(0, c_i − w_i)``,
hence **overshoot = final − L < c_k + Σ_{i∈F} max(0, c_i − w_i)**: less than the cost of
ONE call (the last admitted) plus the amount by which in-flight calls beat their worst case.
``c_i > w_i`` only when the billed prompt exceeds the chars/4 estimate (output is capped by
``max_tokens`` at the provider), so with ``N`` concurrent turns (one call in flight each)
the overshoot is below one call plus ``N`` estimate errors, never N calls. Calls of unknown
cost admitted under the "allow" policy add nothing to ``spent`` and are outside the bound
(they are flagged instead). A reservation left by a worker killed mid-call expires after
``RESERVATION_TTL_SECONDS`` (it is counted until then: fail closed).

Periods are UTC: a day runs 00:00–24:00 UTC, a month from the 1st 00:00 UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from typing import Literal

from agents.pricing import PER_MILLION, Rates, rates_worst_input

Period = Literal["day", "month"]
Scope = Literal["user", "team", "session"]
UnknownPolicy = Literal["block", "allow"]

WARN_FRACTION = Decimal("0.8")
"""A warning event once spend (with open reservations) reaches 80% of a cap."""
RESERVATION_TTL_SECONDS = 900
"""An unsettled reservation older than this is ignored (its worker died mid-call)."""
MAX_LIMIT_USD = Decimal("1000000")
"""The largest cap accepted (larger is a form error, not a typo to store)."""


class BudgetExceeded(Exception):
    """Raised before a provider call that a spend cap refuses. ``reason`` is the sentence the
    user reads; ``cap`` the refusing cap (None for the unknown-cost policy)."""

    def __init__(self, reason: str, cap: Cap | None = None):
        super().__init__(reason)
        self.reason = reason
        self.cap = cap


@dataclass(frozen=True, slots=True)
class Cap:
    """One spend cap: ``limit_usd`` per ``period`` for the ``scope`` named ``label``
    ("team Acme", "your", "this session's")."""

    scope: Scope
    period: Period
    limit_usd: Decimal
    label: str = ""
    key: int = 0
    """The budget row's id (the shell's handle; 0 in pure tests)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict for one call against one cap. ``allowed``; ``reason`` when refused;
    ``warn`` when admitted at or past WARN_FRACTION of the cap."""

    allowed: bool
    reason: str = ""
    warn: bool = False


def period_start(period: Period, now: datetime) -> datetime:
    """Start (UTC) of the period containing ``now`` (aware or naive-as-UTC)."""
    now = _utc(now)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return day if period == "day" else day.replace(day=1)


def period_end(period: Period, now: datetime) -> datetime:
    """End (UTC, exclusive) of the period containing ``now``: the next reset."""
    start = period_start(period, now)
    if period == "day":
        return start + timedelta(days=1)
    return (start.replace(year=start.year + 1, month=1) if start.month == 12
            else start.replace(month=start.month + 1))


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def worst_case_usd(rates: Rates | None, *, prompt_estimate: int,
                   max_tokens: int) -> Decimal | None:
    """The most a call can cost, USD: prompt estimate (tokens) × the highest input-side rate
    (a prompt token may be written to cache at 1.25× or 2× input) + max_tokens × the output
    rate. None when either rate is unknown."""
    if rates is None or rates.output is None:
        return None
    worst_in = rates_worst_input(rates)
    if worst_in is None:
        return None
    return (Decimal(max(prompt_estimate, 0)) * worst_in
            + Decimal(max(max_tokens, 0)) * rates.output) / PER_MILLION


USD_PLACES = Decimal("0.0001")
"""The finest step shown for amounts of $0.0001 or more (a cap's storage precision)."""


def usd(amount: Decimal | str | int | float) -> str:
    """THE way an amount in USD is written, in every sentence and page: two to four
    decimals, truncated toward zero (never rounded up past a cap), trailing zeros past the
    cents dropped: "$1,234.50", "$0.125", "$0.0042"; under $0.0001 two significant digits
    ("$0.000012"). A cap and a spend are then never shown contradicting each other (a
    $0.125 cap read "$0.13" beside "$0.12 spent"). ``amount``: anything ``Decimal(str(x))``
    reads; raises decimal.InvalidOperation otherwise (accounts/money.py handles None)."""
    value = Decimal(str(amount))
    sign, value = ("-" if value < 0 else ""), abs(value)
    if value == 0:
        return "$0.00"
    if value < USD_PLACES:  # two significant digits, toward zero
        step = Decimal(1).scaleb(value.adjusted() - 1)
        return f"{sign}${value.quantize(step, rounding=ROUND_DOWN):f}"
    text = f"{value.quantize(USD_PLACES, rounding=ROUND_DOWN):,.4f}"
    for _ in range(2):  # "0.1250" → "0.125", "20.0000" → "20.00"
        if text.endswith("0") and len(text.split(".")[1]) > 2:
            text = text[:-1]
    return f"{sign}${text}"


def cap_decide(cap: Cap, *, spent: Decimal, reserved: Decimal, now: datetime,
               cost_known: bool = True, policy: UnknownPolicy = "block",
               worst: Decimal | None = None) -> Decision:
    """May a call be admitted under ``cap``? ``spent``: settled USD this period;
    ``reserved``: worst cases of calls in flight; ``worst``: this call's worst case (None
    when unknown). Admitted iff ``spent + reserved < limit`` (see the module's bound). A call
    of unknown cost is refused under ``policy="block"`` and admitted under "allow"."""
    if not cost_known and policy == "block":
        return Decision(False, f"the cost of this call is unknown (no rate for the model) and "
                               f"{cap_text(cap)} is set; unknown-cost calls are blocked")
    committed = spent + reserved
    if committed >= cap.limit_usd:
        return Decision(False, exceeded_reason(cap, now))
    after = committed + (worst or Decimal(0))
    return Decision(True, warn=after >= cap.limit_usd * WARN_FRACTION)


def cap_text(cap: Cap) -> str:
    """"team budget of $20.00/day" / "your budget of $5.00/month"."""
    who = f"{cap.label} " if cap.label else ""
    return f"{who}budget of {usd(cap.limit_usd)}/{cap.period}"


def exceeded_reason(cap: Cap, now: datetime) -> str:
    """The sentence the user reads: "team budget of $20.00/day reached; resets at 00:00
    UTC" (a month cap names the date it resets)."""
    reset = period_end(cap.period, now)
    when = ("00:00 UTC" if cap.period == "day"
            else f"{reset:%Y-%m-%d} 00:00 UTC")
    return f"{cap_text(cap)} reached; resets at {when}"


def warning_text(cap: Cap, *, spent: Decimal) -> str:
    """The 80% warning: "team budget of $20.00/day: $16.40 spent (82%)"."""
    share = int(spent * 100 / cap.limit_usd) if cap.limit_usd else 100
    return f"{cap_text(cap)}: {usd(spent)} spent ({share}%)"


def overshoot_bound(*, last_call_usd: Decimal,
                    in_flight: list[tuple[Decimal, Decimal]]) -> Decimal:
    """The module's bound on ``final − limit`` given the last admitted call's cost and the
    (actual, worst) of the calls in flight when it was admitted (strict: overshoot is below
    it)."""
    return last_call_usd + sum((max(Decimal(0), c - w) for c, w in in_flight), Decimal(0))


def limit_parse(raw: object) -> Decimal:
    """A cap typed by a person ("20", "0.05", "$1,000") as USD. Raises ValueError for a
    non-numeric, negative, zero-or-less-than-a-cent, non-finite or absurd (> $1,000,000)
    value."""
    text = str(raw).strip().replace("$", "").replace(",", "")
    try:
        value = Decimal(text)
    except Exception as exc:  # decimal.InvalidOperation
        raise ValueError(f"{raw!r} is not an amount in dollars") from exc
    if not value.is_finite():
        raise ValueError(f"{raw!r} is not an amount in dollars")
    if value < 0:
        raise ValueError("a budget cannot be negative")
    if value < Decimal("0.01"):
        raise ValueError("a budget must be at least $0.01")
    if value > MAX_LIMIT_USD:
        raise ValueError(f"a budget above {usd(MAX_LIMIT_USD)} is not accepted")
    return value.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)
