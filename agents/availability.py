"""Tool availability: per-tool predicates and the asymmetric cache in front of them.

Whether a tool enters a session's schema snapshot is decided by a zero-argument predicate
(is bubblewrap there, is an API key set, is a binary installed, is an MCP server connected).
Probes are subprocesses and network round trips that flap under load, so their results are
cached asymmetrically (seed, "Availability checks, and the flake that amputated a
toolbox"): a success is cached for 30 s; a failure arriving within 60 s of the last
success is thrown away (the tool stays available and the next check probes again); any
other failure is returned and not cached, so a tool that comes up is seen at the next
check. The accepted cost: for up to a minute after a real outage the model is offered a
tool that fails when called, instead of silently losing part of its toolbox.

Pure: the clock is injected; no Django, no environment reads (callers pass values).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

SUCCESS_TTL = 30.0
"""Seconds a successful probe is trusted without probing again (seed: thirty seconds)."""
FAILURE_GRACE = 60.0
"""Seconds after the last success during which a failed probe is ignored (seed: a minute)."""

Predicate = Callable[[], bool]


@dataclass(slots=True)
class _Entry:
    last_success: float | None = None
    """Clock reading of the last successful probe."""


class AvailabilityCache:
    """``check(key, probe) -> bool`` with the asymmetric rule of the module docstring.

    ``clock``: seconds, monotonic (injected for tests). A probe that raises counts as a
    failure. Thread-safe: the dispatcher and the turn start may check concurrently; a probe
    runs outside the lock, so two threads may both probe the same key (harmless)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 success_ttl: float = SUCCESS_TTL, failure_grace: float = FAILURE_GRACE):
        self._clock = clock
        self._success_ttl = success_ttl
        self._failure_grace = failure_grace
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def check(self, key: str, probe: Predicate) -> bool:
        """Is ``key`` available now? Probes only when no fresh success is cached."""
        now = self._clock()
        with self._lock:
            entry = self._entries.setdefault(key, _Entry())
            if entry.last_success is not None and now - entry.last_success < self._success_ttl:
                return True
        try:
            ok = bool(probe())
        except Exception:  # a probe that crashes is a failed probe, never a crashed turn
            ok = False
        now = self._clock()
        with self._lock:
            if ok:
                entry.last_success = now
                return True
            # A failure within the grace window is ignored: the tool stays offered.
            return entry.last_success is not None and now - entry.last_success < self._failure_grace

    def forget(self, key: str) -> None:
        """Drop what is known of ``key`` (a server removed from the configuration)."""
        with self._lock:
            self._entries.pop(key, None)


def binary_installed(name: str) -> Predicate:
    """A predicate: ``name`` is an executable on PATH (shutil.which)."""
    return lambda: shutil.which(name) is not None


def value_set(value: str | None) -> Predicate:
    """A predicate: a configured value (an API key from settings) is non-empty."""
    return lambda: bool(value and value.strip())


def bubblewrap_present(works: Callable[[], bool]) -> Predicate:
    """A predicate: bubblewrap is installed and ``works()`` (the sandbox's own probe)."""
    return lambda: shutil.which("bwrap") is not None and bool(works())


__all__ = ["AvailabilityCache", "FAILURE_GRACE", "SUCCESS_TTL", "Predicate",
           "binary_installed", "bubblewrap_present", "value_set"]
