"""Pricing: the dollars of one provider call from its four disjoint usage buckets.

Seed, "The struct that makes cost accounting possible": usage arrives as four disjoint
buckets (uncached input, output, cache read, cache write split by TTL 5m / 1h), pricing
multiplies each bucket by its own rate, and when any non-empty bucket has no known rate the
whole result is **unknown** (``usd is None`` with a reason), never a partial sum. Every
figure carries where its rates came from and when they were fetched.

Rates come from, in order:

1. operator overrides (``RateOverride``: Django admin rows and ``HERMES_PRICING_OVERRIDES``
   in settings), source ``"operator"``; a self-hosted route (vLLM, Ollama, llama.cpp) is an
   override at $0 by default (``SELF_HOSTED_FREE``);
2. the maintained ``genai-prices`` package (pinned in requirements.txt), read from the data
   bundled with the installed version. It is never asked to fetch prices over the network
   (its ``UpdatePrices`` is not used), so a price is reproducible from the pinned version.
   Tiered prices (a higher rate for every token once the prompt passes a threshold, e.g.
   Claude Sonnet 4.5 past 200K) are applied from the library's tier table.

All rates are USD per million tokens (``Decimal``); all counts are tokens; costs are USD
``Decimal``. Pure: no Django, no I/O besides reading the library's bundled data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from importlib.metadata import version as _dist_version

from genai_prices import data_snapshot
from genai_prices.types import TieredPrices

BUCKETS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
"""The five priced token counts (the four buckets, cache writes split by TTL)."""

PER_MILLION = Decimal(1_000_000)
LIBRARY = "genai-prices"
LIBRARY_VERSION = _dist_version("genai-prices")
LIBRARY_DATA_DATE = datetime(2026, 11, 10, tzinfo=timezone.utc)
"""When the bundled price data of the pinned genai-prices version was published (its
release; the data are fetched with the package, not at run time). Update with the pin."""

OPERATOR = "operator"

LIBRARY_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "openrouter": "openrouter"}
"""Hermes provider profile (agents/providers.py) -> genai-prices provider id."""

SIMULATOR_PRICED_AS = {"simulator": ("anthropic", "claude-sonnet-4-5"),
                       "simulator-openai": ("openai", "gpt-4.1"),
                       # An Anthropic model reached through an envelope gateway.
                       "simulator-envelope": ("anthropic", "claude-sonnet-4-5")}
"""The simulator stands in for a real model, so its calls are priced as that model's
published rates (the demo shows realistic dollars and budgets have something to stop)."""

SELF_HOSTED_FREE = ("vllm", "ollama", "llamacpp")
"""Routes served from the operator's own hardware: $0 per token unless overridden."""

KNOWN_PROVIDERS = tuple(LIBRARY_PROVIDERS) + tuple(SIMULATOR_PRICED_AS) + SELF_HOSTED_FREE
"""Providers a rate override may name (an override for anything else is a form error)."""


@dataclass(frozen=True, slots=True)
class Buckets:
    """Token counts of one call (or a sum of calls) in the disjoint priced buckets."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0

    @property
    def prompt(self) -> int:
        """Billed prompt size in tokens (derived: input + cache read + cache writes)."""
        return self.input + self.cache_read + self.cache_write_5m + self.cache_write_1h

    def __add__(self, other: Buckets) -> Buckets:
        return Buckets(*(getattr(self, b) + getattr(other, b) for b in BUCKETS))


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens for each bucket; None = no known rate for that bucket.

    ``source`` names where the rates came from ("operator", or "genai-prices 0.2.3
    anthropic/claude-sonnet-4-5"); ``fetched_at`` when (UTC); ``model`` the priced model.
    """

    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write_5m: Decimal | None = None
    cache_write_1h: Decimal | None = None
    source: str = ""
    fetched_at: datetime | None = None
    model: str = ""

    def rate(self, bucket: str) -> Decimal | None:
        return getattr(self, bucket)


@dataclass(frozen=True, slots=True)
class Cost:
    """The price of some usage. ``usd`` None = unknown, with ``unknown_reason`` saying why
    ("no rate for <model>", "no cache_write_1h rate for <model>"). ``by_bucket`` the USD of
    each non-empty bucket whose rate is known."""

    usd: Decimal | None
    source: str = ""
    fetched_at: datetime | None = None
    unknown_reason: str = ""
    by_bucket: dict[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RateOverride:
    """An operator's rate for ``provider`` and ``model`` ("*" = every model of the route).
    Rates in USD per million tokens; a None rate falls through to the library's."""

    provider: str
    model: str = "*"
    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write_5m: Decimal | None = None
    cache_write_1h: Decimal | None = None
    updated_at: datetime | None = None

    def matches(self, provider: str, model: str) -> bool:
        return self.provider == provider and self.model in ("*", model)


def self_hosted_overrides() -> tuple[RateOverride, ...]:
    """$0 overrides for the self-hosted routes (``SELF_HOSTED_FREE``)."""
    zero = Decimal(0)
    return tuple(RateOverride(provider=p, input=zero, output=zero, cache_read=zero,
                              cache_write_5m=zero, cache_write_1h=zero)
                 for p in SELF_HOSTED_FREE)


def override_validate(provider: str, values: dict[str, object]) -> dict[str, Decimal | None]:
    """Check an operator override before it is stored. Returns the rates as Decimals.

    Raises ValueError with a readable message for an unknown provider, a non-numeric,
    negative or non-finite rate."""
    if provider not in KNOWN_PROVIDERS:
        raise ValueError(f"unknown provider {provider!r} (known: {', '.join(KNOWN_PROVIDERS)})")
    out: dict[str, Decimal | None] = {}
    for bucket in BUCKETS:
        raw = values.get(bucket)
        if raw is None or raw == "":
            out[bucket] = None
            continue
        try:
            rate = Decimal(str(raw))
        except Exception as exc:  # decimal.InvalidOperation and friends
            raise ValueError(f"{bucket} rate {raw!r} is not a number") from exc
        if not rate.is_finite() or rate < 0:
            raise ValueError(f"{bucket} rate must be a non-negative number, not {raw}")
        out[bucket] = rate
    return out


def _tiered(value: Decimal | TieredPrices | None, prompt_tokens: int) -> Decimal | None:
    """A library price at this prompt size (genai-prices' rule: past a tier's start every
    token pays the tier's rate)."""
    if value is None or isinstance(value, Decimal):
        return value
    rate = value.base
    for tier in sorted(value.tiers, key=lambda t: t.start):
        if prompt_tokens > tier.start:
            rate = tier.price
    return rate


def _first(*values: Decimal | None) -> Decimal | None:
    return next((v for v in values if v is not None), None)


def library_rates(provider: str, model: str, *, prompt_tokens: int = 0,
                  at: datetime | None = None) -> tuple[Rates | None, str]:
    """Rates for ``model`` on the library provider ``provider`` (a genai-prices id) from the
    bundled data, at prompt size ``prompt_tokens`` (tiers) and time ``at`` (dated prices).
    Returns (rates, "") or (None, reason). A cache write of a TTL the library has no rate
    for stays None (5m falls back to the generic cache-write rate, which is the 5m rate)."""
    try:
        lib_provider, info = data_snapshot.get_snapshot().find_provider_model(
            model, None, provider, None)
    except LookupError:
        return None, f"no rate for {model}"
    prices = info.get_prices(at or datetime.now(timezone.utc))

    def get(key: str) -> Decimal | None:
        return _tiered(getattr(prices, key, None), prompt_tokens)

    rates = Rates(input=get("input_mtok"), output=get("output_mtok"),
                  cache_read=get("cache_read_mtok"),
                  cache_write_5m=_first(get("cache_write_5m_mtok"), get("cache_write_mtok")),
                  cache_write_1h=get("cache_write_1h_mtok"),
                  source=f"{LIBRARY} {LIBRARY_VERSION} {lib_provider.id}/{info.id}",
                  fetched_at=LIBRARY_DATA_DATE, model=info.id)
    if rates.input is None and rates.output is None:
        return None, f"no rate for {model}"
    return rates, ""


def rates_resolve(provider: str, model: str, *, prompt_tokens: int = 0,
                  at: datetime | None = None,
                  overrides: tuple[RateOverride, ...] = ()) -> tuple[Rates | None, str]:
    """The rates for a call to ``model`` on the Hermes provider profile ``provider``.

    An override matching (provider, model) exactly wins over one for (provider, "*"); its
    set rates replace the library's bucket by bucket and the source becomes "operator".
    Returns (rates, "") or (None, reason) when nothing is known about the route."""
    matching = sorted((o for o in overrides if o.matches(provider, model)),
                      key=lambda o: o.model == "*")
    override = matching[0] if matching else None
    lib_provider, lib_model = LIBRARY_PROVIDERS.get(provider), model
    if provider in SIMULATOR_PRICED_AS:
        lib_provider, lib_model = SIMULATOR_PRICED_AS[provider]
    base, reason = (library_rates(lib_provider, lib_model, prompt_tokens=prompt_tokens, at=at)
                    if lib_provider else (None, f"no rate for {model}"))
    if override is None:
        return base, reason
    values = {b: getattr(override, b) for b in BUCKETS}
    if base is not None:
        values = {b: values[b] if values[b] is not None else base.rate(b) for b in BUCKETS}
    rates = Rates(**values, source=OPERATOR, fetched_at=override.updated_at, model=model)
    return rates, ""


def cost_compute(buckets: Buckets, rates: Rates | None, *, reason: str = "") -> Cost:
    """USD of ``buckets`` at ``rates``: Σ tokens × rate / 1e6 over the buckets.

    Unknown (usd None) when ``rates`` is None or any non-empty bucket has no rate; the
    reason names the model and the bucket. Empty buckets never need a rate."""
    if rates is None:
        return Cost(usd=None, unknown_reason=reason or "no rate")
    by_bucket: dict[str, Decimal] = {}
    missing: list[str] = []
    for bucket in BUCKETS:
        tokens = getattr(buckets, bucket)
        if not tokens:
            continue
        rate = rates.rate(bucket)
        if rate is None:
            missing.append(bucket)
            continue
        by_bucket[bucket] = Decimal(tokens) * rate / PER_MILLION
    if missing:
        return Cost(usd=None, source=rates.source, fetched_at=rates.fetched_at,
                    unknown_reason=f"no {', '.join(missing)} rate for {rates.model}",
                    by_bucket=by_bucket)
    return Cost(usd=sum(by_bucket.values(), Decimal(0)), source=rates.source,
                fetched_at=rates.fetched_at, by_bucket=by_bucket)


def call_price(provider: str, model: str, buckets: Buckets, *, at: datetime | None = None,
               overrides: tuple[RateOverride, ...] = ()) -> Cost:
    """The price of one call: resolve rates at its prompt size (tiers) and time, then
    ``cost_compute``. Never raises for an unknown model: the Cost says unknown and why."""
    rates, reason = rates_resolve(provider, model, prompt_tokens=buckets.prompt, at=at,
                                  overrides=overrides)
    return cost_compute(buckets, rates, reason=reason)


def uncached_equivalent(buckets: Buckets) -> Buckets:
    """The same tokens had nothing been cached: every prompt token at the input rate."""
    return Buckets(input=buckets.prompt, output=buckets.output)


def rates_worst_input(rates: Rates) -> Decimal | None:
    """The highest input-side rate (input, cache writes; a cache read is cheaper), USD per
    million tokens: what a prompt token can cost at most. None when the input rate is
    unknown."""
    if rates.input is None:
        return None
    known = [r for r in (rates.input, rates.cache_write_5m, rates.cache_write_1h)
             if r is not None]
    return max(known)
