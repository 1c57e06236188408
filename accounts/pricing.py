"""The database shell of agents/pricing.py: operator overrides from settings and the admin,
and the price of one usage row. The arithmetic and the rules live in agents/pricing.py."""

from __future__ import annotations

import threading
from datetime import datetime
from decimal import Decimal

from cachetools import TTLCache

from django.conf import settings
from django.db import transaction

from accounts.models import RateOverride as RateOverrideRow
from agents.pricing import (
    BUCKETS, Buckets, Cost, RateOverride, call_price, override_validate, self_hosted_overrides,
    uncached_equivalent)
from sessions.models import UsageRecord


RATE_OVERRIDES_TTL_SECONDS = 5.0
"""How long a process reuses the overrides it read (every provider call is priced, and the
admin rows were one query per call). Saving or deleting a row clears this process's copy at
once (rate_overrides_clear, connected in AccountsConfig.ready); other processes price with
the new rates at most this many seconds later, and `hermes reprice` re-prices history."""
_OVERRIDES: TTLCache = TTLCache(maxsize=8, ttl=RATE_OVERRIDES_TTL_SECONDS)
_OVERRIDES_LOCK = threading.Lock()


def rate_overrides_clear(*args, **kwargs) -> None:
    """Forget this process's copy of the overrides (a signal receiver: any arguments)."""
    with _OVERRIDES_LOCK:
        _OVERRIDES.clear()


def rate_overrides_load(*, fresh: bool = False) -> tuple[RateOverride, ...]:
    """Every operator override in force: admin rows first (newest decision wins over the
    settings file), then HERMES_PRICING_OVERRIDES (settings: a list of dicts with provider,
    model and per-bucket USD/MTok rates), then the $0 self-hosted defaults. Within each
    source an exact model beats "*" (agents/pricing.py rates_resolve). Reused for up to
    RATE_OVERRIDES_TTL_SECONDS unless ``fresh``."""
    key = repr(settings.HERMES.get("PRICING_OVERRIDES", ()))
    if not fresh:
        with _OVERRIDES_LOCK:
            cached = _OVERRIDES.get(key)
        if cached is not None:
            return cached
    loaded = _overrides_read()
    with _OVERRIDES_LOCK:
        _OVERRIDES[key] = loaded
    return loaded


def _overrides_read() -> tuple[RateOverride, ...]:
    rows = tuple(
        RateOverride(provider=r.provider, model=r.model or "*", updated_at=r.updated_at,
                     **{b: getattr(r, b) for b in BUCKETS})
        for r in RateOverrideRow.objects.all())
    configured = []
    for entry in settings.HERMES.get("PRICING_OVERRIDES", ()):
        rates = override_validate(entry["provider"], entry)
        configured.append(RateOverride(provider=entry["provider"],
                                       model=entry.get("model", "*"), **rates))
    return _precedence((*rows, *configured, *self_hosted_overrides()))


def _precedence(overrides: tuple[RateOverride, ...]) -> tuple[RateOverride, ...]:
    """Keep one override per (provider, model): the first listed."""
    out: dict[tuple[str, str], RateOverride] = {}
    for o in overrides:
        out.setdefault((o.provider, o.model), o)
    return tuple(out.values())


def buckets_of(row) -> Buckets:
    """The priced buckets of a UsageRecord (or any object with its token fields)."""
    return Buckets(input=row.input_tokens, output=row.output_tokens,
                   cache_read=row.cache_read_tokens, cache_write_5m=row.cache_write_5m_tokens,
                   cache_write_1h=row.cache_write_1h_tokens)


def usage_cost(*, provider: str, model: str, buckets: Buckets, at: datetime,
               overrides: tuple[RateOverride, ...] | None = None) -> Cost:
    """The Cost of one call (agents/pricing.py call_price with the overrides in force)."""
    return call_price(provider, model, buckets, at=at,
                      overrides=rate_overrides_load() if overrides is None else overrides)


def cost_fields(cost: Cost, uncached: Cost | None = None) -> dict:
    """The UsageRecord columns a Cost (and its uncached equivalent) fills."""
    known = cost.usd is not None
    part = cost.by_bucket

    def bucket(*names: str):
        return sum((part.get(n, Decimal(0)) for n in names), Decimal(0)) if known else None

    return {"cost_usd": cost.usd, "rate_source": cost.source[:200],
            "rate_fetched_at": cost.fetched_at, "cost_unknown_reason": cost.unknown_reason[:200],
            "cost_input_usd": bucket("input"), "cost_output_usd": bucket("output"),
            "cost_cache_read_usd": bucket("cache_read"),
            "cost_cache_write_usd": bucket("cache_write_5m", "cache_write_1h"),
            "cost_uncached_usd": uncached.usd if known and uncached is not None else None}


COST_FIELDS = ["cost_usd", "rate_source", "rate_fetched_at", "cost_unknown_reason",
               "cost_input_usd", "cost_output_usd", "cost_cache_read_usd",
               "cost_cache_write_usd", "cost_uncached_usd"]


def usage_cost_fields(*, provider: str, model: str, buckets: Buckets, at: datetime,
                      overrides: tuple[RateOverride, ...] | None = None) -> tuple[Cost, dict]:
    """Price one call and its uncached equivalent; returns (cost, UsageRecord columns)."""
    overrides = rate_overrides_load() if overrides is None else overrides
    cost = usage_cost(provider=provider, model=model, buckets=buckets, at=at,
                      overrides=overrides)
    uncached = usage_cost(provider=provider, model=model, at=at, overrides=overrides,
                          buckets=uncached_equivalent(buckets))
    return cost, cost_fields(cost, uncached)


def usage_reprice(*, since: datetime | None = None, batch: int = 2_000) -> dict[str, int]:
    """Re-price UsageRecords (created at or after ``since``, else all) at the rates in force
    now, each at its own call's date and prompt size. Idempotent: a row whose cost, source,
    fetched-at and reason are already right is not written. Each batch is one transaction.
    Returns counts: rows seen, rows changed, rows of unknown cost."""
    overrides = rate_overrides_load(fresh=True)
    rows = UsageRecord.objects.order_by("id")
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    seen = changed = unknown = 0
    last_id = 0
    fields = COST_FIELDS
    while True:
        chunk = list(rows.filter(id__gt=last_id)[:batch])
        if not chunk:
            break
        last_id = chunk[-1].id
        dirty = []
        for row in chunk:
            seen += 1
            cost, new = usage_cost_fields(provider=row.provider, model=row.model,
                                          buckets=buckets_of(row), at=row.created_at,
                                          overrides=overrides)
            unknown += cost.usd is None
            if any(_differs(getattr(row, f), new[f]) for f in fields):
                for f in fields:
                    setattr(row, f, new[f])
                dirty.append(row)
        if dirty:
            with transaction.atomic():
                UsageRecord.objects.bulk_update(dirty, fields)
            changed += len(dirty)
    return {"seen": seen, "changed": changed, "unknown": unknown}


def _differs(old, new) -> bool:
    """Column comparison that ignores a Decimal's stored scale (0.05 == 0.050000)."""
    if old is None or new is None:
        return old is not new
    return old != new
