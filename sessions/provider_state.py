"""Provider state every worker shares, in the database: key/provider cooldowns and learned
cache-breakpoint limits (issue 10, build 1 and defect 8).

Implements agents.transports.failover.CooldownStore and
agents.transports.breakpoints.LimitStore over ProviderCooldown and BreakpointLimit rows.
Each write is one short transaction with the row locked, so two workers striking the same
key at once escalate it once each, never lose a strike.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from datetime import timezone as dt_timezone

from cachetools import TTLCache
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agents.transports.failover import cooldown_seconds
from sessions.models import BreakpointLimit, ProviderCooldown


class DbCooldowns:
    """CooldownStore on ProviderCooldown rows (times in epoch seconds at the interface)."""

    def until(self, scope: str) -> float | None:
        row = ProviderCooldown.objects.filter(scope=scope, until__gt=timezone.now()).first()
        return row.until.timestamp() if row else None

    def known(self, scopes: list[str]) -> dict[str, float]:
        """{scope: until (epoch seconds)} of the rows for ``scopes``, past ones included
        (the failover resets the strikes of a scope that serves again). Asked before every
        provider request, so plain SQL: the ORM's build of this query cost ~0.8 ms more
        than its round trip (issue 15 target 1)."""
        if not scopes:
            return {}
        meta = ProviderCooldown._meta
        column = {f.name: f.column for f in meta.concrete_fields}
        with connection.cursor() as cursor:
            cursor.execute(
                f'SELECT "{column["scope"]}", "{column["until"]}" FROM "{meta.db_table}" '
                f'WHERE "{column["scope"]}" IN ({", ".join(["%s"] * len(scopes))})',
                list(scopes))
            rows = cursor.fetchall()
        return {scope: _epoch(until) for scope, until in rows}

    def strike(self, scope: str, *, base: float, reason: str) -> float:
        with transaction.atomic():
            row = ProviderCooldown.objects.select_for_update().filter(scope=scope).first()
            strikes = row.strikes if row else 0
            until = timezone.now() + timedelta(seconds=cooldown_seconds(base, strikes))
            ProviderCooldown.objects.update_or_create(
                scope=scope, defaults={"until": until, "strikes": strikes + 1,
                                       "reason": reason[:50]})
        return until.timestamp()

    def clear(self, scope: str) -> None:
        ProviderCooldown.objects.filter(scope=scope).delete()


def _epoch(value) -> float:
    """A DateTimeField value from a plain cursor as epoch seconds: PostgreSQL returns an
    aware datetime, SQLite the stored text (UTC, as Django writes it with USE_TZ)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, dt_timezone.utc)
    return value.timestamp()


def cooldowns_active() -> list[ProviderCooldown]:
    """Cooldowns in force now (for the admin and the reliability notes)."""
    return list(ProviderCooldown.objects.filter(until__gt=timezone.now()).order_by("until"))


BREAKPOINT_LIMITS_TTL_SECONDS = 10.0
"""How long a process reuses a learned breakpoint limit it read (seconds). The store is
asked before every provider request (one query an iteration, ~1.3 ms of issue 15 target 1's
overhead); a limit only ever goes down, this process's own lowering replaces its copy at
once, and one lowered by another worker is seen within this window: meanwhile at most one
request here is refused by the gateway (a 400 that teaches this process the same limit,
agents/transports/breakpoints.py)."""


class DbBreakpointLimits:
    """LimitStore on BreakpointLimit rows: learned once, used by every process; reads kept
    for BREAKPOINT_LIMITS_TTL_SECONDS (``clear`` forgets them)."""

    def __init__(self) -> None:
        self._read: TTLCache = TTLCache(maxsize=64, ttl=BREAKPOINT_LIMITS_TTL_SECONDS)
        self._lock = threading.Lock()

    def get(self, base_url: str) -> int | None:
        with self._lock:
            if base_url in self._read:
                return self._read[base_url]
        limit = BreakpointLimit.objects.filter(base_url=base_url).values_list(
            "limit", flat=True).first()
        with self._lock:
            self._read[base_url] = limit
        return limit

    def lower(self, base_url: str, limit: int) -> int:
        limit = max(0, limit)
        with transaction.atomic():
            row = BreakpointLimit.objects.select_for_update().filter(base_url=base_url).first()
            if row is None:
                BreakpointLimit.objects.create(base_url=base_url, limit=limit)
                kept = limit
            elif limit < row.limit:
                BreakpointLimit.objects.filter(pk=row.pk).update(limit=limit)
                kept = limit
            else:
                kept = row.limit
        with self._lock:
            self._read[base_url] = kept
        return kept

    def clear(self, *args, **kwargs) -> None:
        """Forget this process's copies (a signal receiver too: any arguments)."""
        with self._lock:
            self._read.clear()


COOLDOWNS = DbCooldowns()
BREAKPOINT_LIMITS = DbBreakpointLimits()
