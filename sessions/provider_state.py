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

from cachetools import TTLCache

from django.db import transaction
from django.utils import timezone

from agents.transports.failover import cooldown_seconds
from sessions.models import BreakpointLimit, ProviderCooldown


class DbCooldowns:
    """CooldownStore on ProviderCooldown rows (times in epoch seconds at the interface)."""

    def until(self, scope: str) -> float | None:
        row = ProviderCooldown.objects.filter(scope=scope, until__gt=timezone.now()).first()
        return row.until.timestamp() if row else None

    def known(self, scopes: list[str]) -> dict[str, float]:
        return {scope: until.timestamp() for scope, until in
                ProviderCooldown.objects.filter(scope__in=scopes).values_list("scope", "until")}

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
