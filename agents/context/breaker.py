"""The compaction breaker: did the last compaction work, and may the next one run?

Seed chapters "And then it asks whether the compaction was worth doing" and "Circuit-breaker
state belongs on the row, not in the process"; numbers from hermes-facts §4 "Effectiveness
verdict, strikes, streaks, probation".

A state machine with no I/O. The Django side rehydrates it from the Session row whenever a
worker binds to a session (``CompactionBreaker.from_dict``) and writes ``to_dict()`` back after
every method that changes it, so a restart never resets a counter. What does not belong here:
the threshold arithmetic (agents/context/compaction.py) and the calibrated trigger (agents/context/tokens.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

TRIP_AT = 2
"""Ineffective strikes or consecutive fallbacks that block auto-compaction (seed)."""
RECOVERY_SECONDS = 300.0
"""Probation window, armed at the first blocked evaluation (``_ANTI_THRASH_RECOVERY_SECONDS``)."""
FAILURE_COOLDOWNS = (60.0, 300.0, 900.0)
"""Summariser failure cooldown, escalating per consecutive failure (hermes-facts §4)."""
TRANSIENT_COOLDOWN = 30.0
"""Flat cooldown for JSON-decode, closed-stream and empty-response failures (hermes-facts §4)."""
PROCESS_CLOCK_ID = uuid.uuid4().hex
"""Identifies this process's monotonic clock: a deadline is only meaningful to the process
whose clock measured it."""

CommitKind = Literal["summary", "fallback", "skip_small_middle"]
Verdict = Literal["effective", "ineffective"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerDecision:
    """``allowed``: may auto-compaction run now. ``reason``: "ok", "probation probe",
    "blocked: ineffective" or "blocked: fallback streak" (which counter tripped, for logs)."""

    allowed: bool
    reason: str


class CompactionBreaker:
    """Verdict latch, ineffective strikes, fallback streak, probation and failure cooldown.

    Fields (all durable through ``to_dict``): ``ineffective_count``, ``fallback_streak``,
    ``recovery_deadline`` (seconds on ``clock``, a monotonic clock; None until the first
    blocked evaluation), ``failure_count`` and ``failure_cooldown_until`` (epoch seconds on
    ``wall``), ``verify_next_reading`` (the latch). ``clock_id`` names the monotonic clock; a
    stored deadline from another clock (another process) is discarded on load, so a fresh
    process that loads a tripped counter starts a full ``RECOVERY_SECONDS`` window.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, clock_id: str = PROCESS_CLOCK_ID):
        self.ineffective_count = 0
        self.fallback_streak = 0
        self.recovery_deadline: float | None = None
        self.failure_count = 0
        self.failure_cooldown_until: float | None = None
        self.verify_next_reading = False
        self._clock = clock
        self._wall = wall
        self.clock_id = clock_id

    @property
    def tripped(self) -> bool:
        return self.ineffective_count >= TRIP_AT or self.fallback_streak >= TRIP_AT

    def on_compaction_committed(self, kind: CommitKind) -> None:
        """A compaction boundary committed; arms the verdict latch for the next response.
        "summary" resets the fallback streak and the failure cooldown; "fallback" extends the
        streak; "skip_small_middle" (a too-small middle dropped without a model) is
        streak-neutral but still arms the verdict (seed)."""
        self.verify_next_reading = True
        if kind == "summary":
            self.fallback_streak = 0
            self.failure_count = 0
            self.failure_cooldown_until = None
        elif kind == "fallback":
            self.fallback_streak += 1
        self._settle()

    def on_compaction_grew(self) -> None:
        """A compaction refused because it would grow the prompt counts as a strike
        (hermes-facts §4)."""
        self.ineffective_count += 1
        self._settle()

    def on_response(self, billed_prompt_tokens: int | None, threshold: int) -> Verdict | None:
        """Judge the last compaction once, where the billed count is visible (seed: never on
        the rough preflight). No usage consumes the latch without a verdict; an unarmed latch
        judges nothing. Billed >= ``threshold`` is a strike; under it clears the strikes."""
        if not self.verify_next_reading:
            return None
        self.verify_next_reading = False
        if billed_prompt_tokens is None:
            return None
        if billed_prompt_tokens >= threshold:
            self.ineffective_count += 1
            verdict: Verdict = "ineffective"
        else:
            self.ineffective_count = 0
            verdict = "effective"
        self._settle()
        return verdict

    def may_compact(self, now: float | None = None) -> BreakerDecision:
        """Check before every automatic compaction (``now``: monotonic seconds, default
        ``clock()``). Tripped: the first call arms a deadline ``RECOVERY_SECONDS`` ahead and
        refuses; calls before it refuse; the first call at or after it drops the tripped
        counters to 1 and allows one probe. Persist ``to_dict()`` after calling."""
        if not self.tripped:
            return BreakerDecision(allowed=True, reason="ok")
        now = self._clock() if now is None else now
        reason = ("blocked: ineffective" if self.ineffective_count >= TRIP_AT
                  else "blocked: fallback streak")
        if self.recovery_deadline is None:
            self.recovery_deadline = now + RECOVERY_SECONDS
            return BreakerDecision(allowed=False, reason=reason)
        if now < self.recovery_deadline:
            return BreakerDecision(allowed=False, reason=reason)
        self.ineffective_count = min(self.ineffective_count, TRIP_AT - 1)
        self.fallback_streak = min(self.fallback_streak, TRIP_AT - 1)
        self.recovery_deadline = None
        return BreakerDecision(allowed=True, reason="probation probe")

    def on_summariser_failure(self, *, transient: bool = False,
                              now: float | None = None) -> float:
        """Start a summariser cooldown; returns its length in seconds (60 → 300 → 900, or a
        flat 30 for ``transient`` failures). ``now``: epoch seconds, default ``wall()``."""
        now = self._wall() if now is None else now
        if transient:
            seconds = TRANSIENT_COOLDOWN
        else:
            self.failure_count += 1
            seconds = FAILURE_COOLDOWNS[min(self.failure_count, len(FAILURE_COOLDOWNS)) - 1]
        self.failure_cooldown_until = now + seconds
        return seconds

    def may_summarise(self, now: float | None = None) -> bool:
        """False during a failure cooldown: compact with ``drop_middle`` instead."""
        now = self._wall() if now is None else now
        return self.failure_cooldown_until is None or now >= self.failure_cooldown_until

    def _settle(self) -> None:
        if not self.tripped:
            self.recovery_deadline = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state for the Session row."""
        return {"ineffective_count": self.ineffective_count,
                "fallback_streak": self.fallback_streak,
                "recovery_deadline": self.recovery_deadline, "clock_id": self.clock_id,
                "failure_count": self.failure_count,
                "failure_cooldown_until": self.failure_cooldown_until,
                "verify_next_reading": self.verify_next_reading}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *,
                  clock: Callable[[], float] = time.monotonic,
                  wall: Callable[[], float] = time.time,
                  clock_id: str = PROCESS_CLOCK_ID) -> CompactionBreaker:
        """Rehydrate on bind. Counters, cooldown and latch are restored; the deadline only if
        it was measured by this ``clock_id`` (the monotonic-clock policy, seed)."""
        breaker = cls(clock=clock, wall=wall, clock_id=clock_id)
        data = data or {}
        breaker.ineffective_count = int(data.get("ineffective_count") or 0)
        breaker.fallback_streak = int(data.get("fallback_streak") or 0)
        breaker.failure_count = int(data.get("failure_count") or 0)
        cooldown = data.get("failure_cooldown_until")
        breaker.failure_cooldown_until = float(cooldown) if cooldown is not None else None
        breaker.verify_next_reading = bool(data.get("verify_next_reading", False))
        deadline = data.get("recovery_deadline")
        if deadline is not None and data.get("clock_id") == clock_id and breaker.tripped:
            breaker.recovery_deadline = float(deadline)
        return breaker
