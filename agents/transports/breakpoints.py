"""Which planned breakpoints a transport may actually render, and the per-endpoint limit it
has learned.

The planner (agents/cache.py) plans up to 4 breakpoints; a route may honour fewer. The
profile states the budget (``max_breakpoints``); a proxy that adds its own markers can still
answer "A maximum of 4 blocks with cache_control may be provided. Found 5.", and then the
transport retries once with fewer and remembers the lower limit for that endpoint (issue 3
item 3; case B07). This module owns that memory (process-wide, thread-safe) and the rule for
which breakpoints go first: the earliest message breakpoints, then the stable-tier one, then
the system one, because the newest messages are where each turn's cache write pays off.

Not here: planning (agents/cache.py) and rendering markers into a wire body (transports).
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

from agents.messages import Breakpoint
from agents.providers import ProviderProfile

_limits: dict[str, int] = {}
_limits_lock = threading.Lock()

_FOUND = re.compile(r"maximum of (\d+) blocks with cache_control.*?found (\d+)",
                    re.IGNORECASE | re.DOTALL)


def learned_limit(base_url: str) -> int | None:
    """The breakpoint limit learned for ``base_url``, None when nothing was learned."""
    with _limits_lock:
        return _limits.get(base_url)


def remember_limit(base_url: str, limit: int) -> int:
    """Record that ``base_url`` accepts at most ``limit`` breakpoints from us; a limit only
    ever goes down. Returns the limit now in force."""
    with _limits_lock:
        current = min(limit, _limits.get(base_url, limit))
        _limits[base_url] = max(0, current)
        return _limits[base_url]


def limit_for(profile: ProviderProfile) -> int:
    """Breakpoints the client may spend on ``profile``'s endpoint: 0 without caching, else
    the profile's budget lowered by anything learned for its base_url."""
    if not profile.supports_caching:
        return 0
    learned = learned_limit(profile.base_url)
    return profile.max_breakpoints if learned is None else min(learned, profile.max_breakpoints)


def lower_limit(sent: int, message: str) -> int:
    """The limit to try after the provider rejected ``sent`` markers with ``message``.

    "A maximum of M blocks ... Found F" means someone else added F - sent markers, so we may
    spend M - (F - sent); without numbers, one fewer than sent. Always below ``sent``.
    """
    match = _FOUND.search(message)
    if match:
        maximum, found = int(match.group(1)), int(match.group(2))
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
