"""The transports' retry policy: a few attempts for retryable failures, never a duplicate.

Both SDK retry layers are switched off (``max_retries=0``) so this is the only one (case
B22: layers multiply). A retry happens only when the classifier says the same payload may be
resent AND no visible text has reached the user yet; after text was shown, the failure is
raised with the partial text so the caller can keep it and surface a notice (cases B21, B22).
The server's retry-after hint is honoured; a hint above the cap fails over instead of
sleeping (case B23).

Not here: classification (agents/transports/errors.py) and wire shapes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from agents.errors import TransportError
from agents.transports.errors import PROVIDER_ERRORS, ClassifiedError, classify

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a transport retries (seconds throughout).

    ``max_attempts``: attempts in total, first included. ``base_delay``: first backoff,
    doubled per attempt, capped at ``max_delay``, with up to ``jitter`` × itself added.
    ``max_retry_after``: a server hint above this is not slept on; the error is raised so
    the caller can fall back (hermes-facts §12; case B23).
    """

    max_attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 20.0
    jitter: float = 0.25
    max_retry_after: float = 30.0

    def delay(self, attempt: int, hint: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based): the larger of
        the jittered backoff and the server's hint."""
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        backoff += backoff * self.jitter * random.random()
        return max(backoff, hint or 0.0)


class TextTap:
    """Wraps ``on_text`` and remembers what was delivered, so a retry can tell whether the
    user already saw something and a failure can carry the partial text."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self._on_text = on_text
        self.parts: list[str] = []

    def __call__(self, text: str) -> None:
        self.parts.append(text)
        self._on_text(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def name_interrupted_call(exc: BaseException, name: str | None) -> None:
    """Record on ``exc`` the tool whose call was being streamed when the stream failed
    (case B21); read back by ``call_with_retries``."""
    if name:
        try:
            exc.interrupted_call = name  # type: ignore[attr-defined]
        except AttributeError:  # an exception class with slots: the name is only lost
            pass


def transport_error(classified: ClassifiedError, *, partial: str = "",
                    attempts: int = 1, interrupted_call: str | None = None) -> TransportError:
    """Build the TransportError for ``classified``; ``.partial`` holds the visible text
    already delivered ("" when none), ``.attempts`` the number of attempts made and
    ``.interrupted_call`` the tool whose call the stream was cut in (never run; B21)."""
    error = TransportError(f"{classified.reason.value}: {classified.message}", classified)
    error.partial = partial  # type: ignore[attr-defined]
    error.attempts = attempts  # type: ignore[attr-defined]
    error.interrupted_call = interrupted_call  # type: ignore[attr-defined]
    return error


def call_with_retries(attempt: Callable[[TextTap], T], *, on_text: Callable[[str], None],
                      policy: RetryPolicy,
                      sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``attempt(tap)`` until it returns, retrying retryable provider failures.

    Each attempt gets a fresh TextTap over ``on_text``. Raises TransportError (with the
    ClassifiedError, ``.partial`` and ``.attempts``) when the failure is not retryable, text
    was already delivered, the server's hint exceeds ``policy.max_retry_after`` or the
    attempts are spent. Non-provider exceptions (bugs, TurnCancelled) propagate unchanged.
    """
    for number in range(1, policy.max_attempts + 1):
        tap = TextTap(on_text)
        try:
            return attempt(tap)
        except PROVIDER_ERRORS as exc:
            classified = classify(exc)
            hint = classified.retry_after
            last = (number == policy.max_attempts or not classified.retryable or bool(tap.parts)
                    or (hint is not None and hint > policy.max_retry_after))
            if last:
                raise transport_error(
                    classified, partial=tap.text, attempts=number,
                    interrupted_call=getattr(exc, "interrupted_call", None)) from exc
            sleep(policy.delay(number, hint))
    raise AssertionError("unreachable: the last attempt returns or raises")
