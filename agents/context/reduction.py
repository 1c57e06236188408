"""Which context reductions to try, and how to recover from a provider error: decided from
plain values, so the order is tested without a database (issue 11 item 1).

The runner (sessions/runner.py) loads the session's state, asks here, then runs each step
in order through sessions/context.py and stops at the first step that commits a
reduction. Nothing here reads a clock, the settings or the transcript.

Reduction before a request (hermes-internals: idle compaction is opt-in; cold prune before
the first request after the cache expired; prune by its trigger; compaction by the
threshold, at most once automatically per turn, B10):

    idle_compaction → cold_prune | prune → compaction

Recovery after a provider error (read from the classifier's hints, never the message;
defect 4). The loop refuses to resend a request identical to the one that failed, so every
step must change the bytes or the turn fails:

- overflow whose body says the input alone fits: only lower max_tokens (B25);
- other overflow: one forced compaction; while the breaker is tripped, first a notice and
  a forced prune of old tool output (no model call), and the compaction only when no
  compaction ran in this turn yet (B10);
- a history the provider rejected (B01, B02, B17): reload and repair strictly;
- anything else: fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agents.context.prune import is_cold_resume

ReductionStep = Literal["idle_compaction", "cold_prune", "prune", "compaction"]
RecoveryStep = Literal["shrink_output", "notice_breaker", "forced_prune", "forced_compaction",
                       "repair_history"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReductionState:
    """What the reduction order depends on, as values.

    ``first_request``: no request of this turn was sent yet. ``idle_seconds``: since the
    session's last message (s). ``idle_compaction_seconds``: HERMES_IDLE_COMPACTION_SECONDS
    (0 = off). ``cold_prune``: HERMES_PRUNE_ON_COLD_RESUME. ``cache_ttl_seconds``: the
    prompt cache's TTL (s). ``prune_trigger_tokens``: HERMES_PRUNE_TRIGGER_TOKENS (0 = off).
    ``compaction_enabled``: HERMES_COMPACTION_ENABLED. ``compactions``: compactions
    committed in this turn. ``over_threshold``: the calibrator's verdict on the projected
    prompt (agents/context/tokens.py Calibrator.should_compact).
    """

    first_request: bool
    idle_seconds: float
    idle_compaction_seconds: float = 0
    cold_prune: bool = False
    cache_ttl_seconds: float = 300
    prune_trigger_tokens: int = 0
    compaction_enabled: bool = True
    compactions: int = 0
    over_threshold: bool = False


def reduction_plan(state: ReductionState) -> tuple[ReductionStep, ...]:
    """The reductions to try before a request, in order; the caller stops at the first one
    that commits. Empty when nothing applies. The breaker may still refuse "compaction"
    (sessions/context.py asks it); the caller then tells the user it is paused."""
    steps: list[ReductionStep] = []
    if state.first_request and 0 < state.idle_compaction_seconds <= state.idle_seconds:
        steps.append("idle_compaction")  # the prefix is cold anyway
    if (state.first_request and state.cold_prune
            and is_cold_resume(state.idle_seconds, state.cache_ttl_seconds)):
        steps.append("cold_prune")
    elif state.prune_trigger_tokens > 0:
        steps.append("prune")
    if state.compaction_enabled and state.compactions == 0 and state.over_threshold:
        steps.append("compaction")
    return tuple(steps)


def recovery_plan(*, compress: bool, history_shape: bool, breaker_tripped: bool,
                  compactions: int) -> tuple[RecoveryStep, ...]:
    """The recovery for a classified provider error (agents/transports/errors.py hints
    ``compress`` and ``history_shape``; an unclassified error passes both False), given
    whether the compaction breaker is tripped and how many compactions this turn
    committed. The caller runs the steps in order and retries with the history of the first
    that yields one; none (or an empty plan): the turn fails. "notice_breaker" tells the
    user automatic compaction is paused and never yields a history."""
    if compress:
        if not breaker_tripped:
            return ("shrink_output", "forced_compaction")
        steps: tuple[RecoveryStep, ...] = ("shrink_output", "notice_breaker", "forced_prune")
        return steps + (() if compactions else ("forced_compaction",))
    if history_shape:
        return ("repair_history",)
    return ()
