"""IterationBudget: how many model calls a turn may make (hermes-facts §1).

An iteration is one model request plus its tool calls. The budget measures model turns the
user asked for, not attempts the machinery made, so callers ``refund()`` when an iteration
never reached the provider (seed, "Why a counter that goes backwards").
"""

from __future__ import annotations

import threading

DEFAULT_MAX_ITERATIONS = 90
"""Parent turns (hermes-facts §1: the budget class's docstring; DESIGN.md §5)."""
CHILD_MAX_ITERATIONS = 50
"""Delegated child agents (DESIGN.md §5)."""
FREE_ITERATION_TOOL = "execute_code"
"""The sixth refund (seed, "Why a counter that goes backwards"): an iteration whose only
tool call is the code-execution tool is free, a price signal for batching many operations
into one programmatic call."""


def is_free_iteration(tool_names: list[str] | tuple[str, ...]) -> bool:
    """True when the reply's tool calls were exactly one execute_code call."""
    return len(tool_names) == 1 and tool_names[0] == FREE_ITERATION_TOOL


class IterationBudget:
    """A thread-safe counter of iterations.

    ``max_total`` <= 0 means unbounded (``remaining`` is infinity; use is still counted).
    ``spent_before``: iterations earlier runs of the same turn already used (a turn resumed
    after an approval, a clarify answer or its child agents): they count against
    ``max_total`` but not in ``used``, which is this run's charge. Without it each resume
    got a fresh budget and a model that asks at every step never stopped (found by the
    offline real-model lane, evals/).
    ``consume()`` returns False once exhausted, else counts one and returns True.
    ``refund()`` gives one back and never goes below zero.
    """

    def __init__(self, max_total: int = DEFAULT_MAX_ITERATIONS, *, spent_before: int = 0):
        self.max_total = max_total
        self.spent_before = max(0, spent_before)
        self.used = 0
        self.free = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> float:
        if self.max_total <= 0:
            return float("inf")
        return max(0, self.max_total - self.spent_before - self.used)

    def consume(self) -> bool:
        with self._lock:
            if self.max_total > 0 and self.spent_before + self.used >= self.max_total:
                return False
            self.used += 1
            return True

    def refund(self) -> None:
        with self._lock:
            if self.used > 0:
                self.used -= 1

    def refund_free(self) -> bool:
        """The sixth refund (``is_free_iteration``): give the iteration back, at most
        ``max_total`` times per budget, so a model that only ever calls execute_code still
        stops (after twice the budget in model calls). Returns True when refunded."""
        with self._lock:
            if self.max_total > 0 and self.free >= self.max_total:
                return False
            self.free += 1
        self.refund()
        return True
