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


class IterationBudget:
    """A thread-safe counter of iterations.

    ``max_total`` <= 0 means unbounded (``remaining`` is infinity; use is still counted).
    ``consume()`` returns False once exhausted, else counts one and returns True.
    ``refund()`` gives one back and never goes below zero.
    """

    def __init__(self, max_total: int = DEFAULT_MAX_ITERATIONS):
        self.max_total = max_total
        self.used = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> float:
        if self.max_total <= 0:
            return float("inf")
        return max(0, self.max_total - self.used)

    def consume(self) -> bool:
        with self._lock:
            if self.max_total > 0 and self.used >= self.max_total:
                return False
            self.used += 1
            return True

    def refund(self) -> None:
        with self._lock:
            if self.used > 0:
                self.used -= 1
