"""The transports' retry policy: a few attempts for retryable failures, never a duplicate.

Both SDK retry layers are switched off (``max_retries=0``) so this is the only one (case
B22: layers multiply). A retry happens only when the classifier says the same payload may be
resent AND no visible text has reached the user yet; after text was shown, the failure is
raised with the partial text so the caller can keep it and surface a notice (cases B21, B22).
The server's retry-after hint is honoured; a hint above the cap fails over instead of
sleeping (case B23). tenacity runs the attempts; the retry condition and the delay are
written here.

Not here: classification (agents/transports/errors.py) and wire shapes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from agents.errors import TransportError
from agents.messages import BilledAttempt, ModelResponse, Usage
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
    user already saw something and a failure can carry the partial text. The stream reader
    sets ``interrupted_call`` to the tool whose call it was reading when the stream failed
    (case B21), and ``billed`` when the failed attempt was already being answered."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self._on_text = on_text
        self.parts: list[str] = []
        self.interrupted_call: str | None = None
        self.billed: Usage | None = None
        """Set by the stream reader when this attempt failed after the provider began to
        answer (its usage as reported so far): the attempt is billed."""

    def __call__(self, text: str) -> None:
        self.parts.append(text)
        self._on_text(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def transport_error(classified: ClassifiedError, *, partial: str = "",
                    attempts: int = 1, interrupted_call: str | None = None,
                    billed: tuple[BilledAttempt, ...] = ()) -> TransportError:
    """The TransportError for ``classified`` with its typed fields (agents/errors.py)."""
    return TransportError(f"{classified.reason.value}: {classified.message}", classified,
                          partial=partial, attempts=attempts, interrupted_call=interrupted_call,
                          billed=billed)


def billed_attempts(taps: list[TextTap]) -> tuple[BilledAttempt, ...]:
    """The billed failed attempts among ``taps`` (route not named yet), oldest first."""
    return tuple(BilledAttempt(usage=tap.billed) for tap in taps if tap.billed is not None)


def call_with_retries(attempt: Callable[[TextTap], T], *, on_text: Callable[[str], None],
                      policy: RetryPolicy,
                      sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``attempt(tap)`` until it returns, retrying retryable provider failures (tenacity
    drives the attempts; the condition and the delay are this module's rules).

    Each attempt gets a fresh TextTap over ``on_text``. Raises TransportError (with the
    ClassifiedError, ``partial``, ``attempts`` and ``interrupted_call``) when the failure is
    not retryable, text was already delivered, the server's hint exceeds
    ``policy.max_retry_after`` or the attempts are spent. Non-provider exceptions (bugs,
    TurnCancelled) propagate unchanged. Failed attempts the provider billed (``TextTap.billed``)
    ride on the result (``ModelResponse.billed_before``) or the TransportError (``billed``).
    """
    taps: list[TextTap] = []

    def once() -> T:
        taps.append(TextTap(on_text))
        return attempt(taps[-1])

    def may_retry(exc: BaseException) -> bool:
        # Never after visible text (B21, B22: the user would see it twice), never on a
        # server hint longer than we sleep (B23: fail over instead).
        if not isinstance(exc, PROVIDER_ERRORS):
            return False
        classified = classify(exc)
        hint = classified.retry_after
        return (classified.retryable and not taps[-1].parts
                and (hint is None or hint <= policy.max_retry_after))

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        hint = classify(error).retry_after if error is not None else None
        return policy.delay(state.attempt_number, hint)

    retrying = Retrying(stop=stop_after_attempt(policy.max_attempts),
                        retry=retry_if_exception(may_retry), wait=wait, sleep=sleep,
                        reraise=True)
    try:
        result = retrying(once)
    except PROVIDER_ERRORS as exc:
        tap = taps[-1]
        raise transport_error(classify(exc), partial=tap.text, attempts=len(taps),
                              interrupted_call=tap.interrupted_call,
                              billed=billed_attempts(taps)) from exc
    billed = billed_attempts(taps[:-1])
    if billed and isinstance(result, ModelResponse):
        result = replace(result, billed_before=billed + result.billed_before)
    return result
