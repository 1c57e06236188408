"""Which planned breakpoints a transport may actually render, and the per-endpoint limit it
has learned.

The planner (agents/cache.py) plans up to 4 breakpoints; a route may honour fewer. The
profile states the budget (``max_breakpoints``); a proxy that adds its own markers can still
answer "A maximum of 4 blocks with cache_control may be provided. Found 5.", and then the
transport retries once with fewer and remembers the lower limit for that endpoint (issue 3
item 3; case B07). This module owns that memory (process-wide, thread-safe) and the rule for
which breakpoints go first: the earliest message breakpoints, then the stable-tier one, then
the system one, because the newest messages are where each turn's cache write pays off.
A gateway that adds a 5m marker on the tools while our system marker is 1h gets a "ttl='1h'
... must not come after a ttl='5m'" 400; the transport then clamps every TTL to 5m
(``select_breakpoints(allow_1h=False)``) and resends once.

Not here: planning (agents/cache.py) and rendering markers into a wire body (transports).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Protocol

from agents.messages import Breakpoint
from agents.providers import ProviderProfile

class LimitStore(Protocol):
    """Where learned breakpoint limits live. The default keeps them in this process; the
    Django side passes a database-backed one (sessions/provider_state.py) so every worker
    and every new process shares what one 400 taught (issue 10 defect 8)."""

    def get(self, base_url: str) -> int | None:
        """The learned limit for ``base_url``, None when nothing was learned."""
        ...

    def lower(self, base_url: str, limit: int) -> int:
        """Record ``limit`` (a limit only ever goes down); return the limit now in force."""
        ...


class MemoryLimitStore:
    """A process-local LimitStore (thread-safe); used where no database is wired in."""

    def __init__(self) -> None:
        self._limits: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, base_url: str) -> int | None:
        with self._lock:
            return self._limits.get(base_url)

    def lower(self, base_url: str, limit: int) -> int:
        with self._lock:
            current = max(0, min(limit, self._limits.get(base_url, limit)))
            self._limits[base_url] = current
            return current


PROCESS_LIMITS = MemoryLimitStore()
"""The fallback store for transports built without one (tests, the CLI's pure paths)."""


def learned_limit(base_url: str, store: LimitStore = PROCESS_LIMITS) -> int | None:
    """The breakpoint limit learned for ``base_url``, None when nothing was learned."""
    return store.get(base_url)


def remember_limit(base_url: str, limit: int, store: LimitStore = PROCESS_LIMITS) -> int:
    """Record that ``base_url`` accepts at most ``limit`` breakpoints from us; a limit only
    ever goes down. Returns the limit now in force."""
    return store.lower(base_url, limit)


def limit_for(profile: ProviderProfile, store: LimitStore = PROCESS_LIMITS,
              configured: int | None = None) -> int:
    """Breakpoints the client may spend on ``profile``'s endpoint: 0 without caching, else
    the profile's budget lowered by the per-endpoint setting (``configured``, from
    HERMES_BREAKPOINT_LIMITS, for a known proxy that adds its own markers) and by anything
    learned for its base_url."""
    if not profile.supports_caching:
        return 0
    limits = [profile.max_breakpoints, store.get(profile.base_url), configured]
    return min(x for x in limits if x is not None)


def lower_limit(sent: int, maximum: int | None, found: int | None) -> int:
    """The limit to try after the provider rejected ``sent`` markers, from the classifier's
    hints (``maximum`` = M and ``found`` = F of "A maximum of M blocks ... Found F").

    F - sent markers were added by someone else, so we may spend M - (F - sent); without
    numbers, one fewer than sent. Always below ``sent``.
    """
    if maximum is not None and found is not None:
        return max(0, min(sent - 1, maximum - (found - sent)))
    return max(0, sent - 1)


def select_breakpoints(breakpoints: tuple[Breakpoint, ...], *, limit: int, n_messages: int,
                       allow_1h: bool) -> tuple[Breakpoint, ...]:
    """The breakpoints to render, at most ``limit`` of them.

    Message indexes are normalised (negative counts from the end); out-of-range ones and
    duplicates (same target and index) are dropped, the later one winning. Over the limit,
    the earliest message breakpoints go first, then "system_stable", then "system".
    Without ``allow_1h`` every TTL is clamped to 5m (seed, "It will not ship a marker the
    route does not honour"). Order of the result: system ones, then messages by index.
    """
    if limit <= 0:
        return ()
    by_key: dict[tuple[str, int], Breakpoint] = {}
    for point in breakpoints:
        index = point.index
        if point.target == "message":
            index = index + n_messages if index < 0 else index
            if not 0 <= index < n_messages:
                continue
        else:
            index = -1
        if not allow_1h and point.ttl == "1h":
            point = replace(point, ttl="5m")
        by_key[(point.target, index)] = replace(point, index=index)
    system = [by_key[k] for k in (("system_stable", -1), ("system", -1)) if k in by_key]
    messages = sorted((p for p in by_key.values() if p.target == "message"),
                      key=lambda p: p.index)
    while len(system) + len(messages) > limit:
        if messages:
            messages.pop(0)
        else:
            system.pop(0)
    return (*system, *messages)
