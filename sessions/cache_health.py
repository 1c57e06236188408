"""Prompt-cache health of a session, fed by every provider call (agents/cache.py decides;
this module loads, stores and announces)."""

from __future__ import annotations

from agents.cache import CacheHealth
from sessions.events import event_append


def cache_health_fields(ctx, usage) -> dict:
    """Feed one call's usage to the cache-health tracker (agents/cache.py); three calls in a
    row that write the cache and read nothing raise a warning event and the admin flag.
    Returns the Session columns to write (the caller writes them with its own UPDATE)."""
    session = ctx.session
    health = CacheHealth.from_dict(session.cache_health or {})
    warning = health.observe(usage, caching=ctx.profile.supports_caching)
    session.cache_health = health.to_dict()
    updates = {"cache_health": session.cache_health}
    if warning:
        updates["cache_warning"] = True
        event_append(session_id=session.pk, type="cache.warning",
                     payload={"turn_id": ctx.turn.pk, "reason": warning})
    return updates
