"""Waiting out a throttled provider: a turn whose every route answered "rate limited" or
"overloaded" backs off and tries again, for minutes, instead of failing after the route's
few quick retries (issue 10: "a provider that answers 429 to every call for a minute →
turns back off and finish after it recovers, without a retry storm").

Layering (outermost first): the spend caps → ``PatientTransport`` → FailoverTransport (keys,
fallback providers, shared cooldowns) → each route's transport with its RetryPolicy (a few
attempts over seconds). This layer acts only once failover has nothing left to try, so a
fallback provider is always preferred to waiting.

The wait before the next attempt (``Patience.wait``): an exponential backoff (``base`` ×
2^(attempt-1)), raised to how long the shared cooldown store still rests the provider or
key (the other workers' strikes count too), capped at ``cap``; then jittered upwards by up
to ``jitter`` × itself, so the turns throttled together do not come back together. A
server's Retry-After is honoured even above the cap (up to ``max_hint``: a longer one fails
the turn at once, case B23). The turn gives up, with the last error, when the next wait would
end past ``total`` seconds of waiting. The user's Stop is
seen within half a second of a wait (``TurnCancelled``).

Never retried here: a failure after visible text reached the user (it carries
``.partial``; a resend would show the text twice, B21/B22), quota or billing exhaustion (it
will not heal in minutes), and any other failure reason.

Waiting holds the worker (and the lease, which the heartbeat renews) rather than parking
the turn and re-enqueueing it: see docs/reliability.md for why.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception

from agents import Transport
from agents.errors import TransportError, TurnCancelled
from agents.messages import ModelRequest, ModelResponse
from agents.transports.errors import ClassifiedError, FailoverReason

THROTTLED = frozenset({FailoverReason.RATE_LIMIT, FailoverReason.OVERLOADED})
"""Failures that heal by waiting: the provider asks us to slow down."""
STOP_POLL_SECONDS = 0.5
"""How often a wait checks the user's Stop."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Patience:
    """How long a throttled turn waits (seconds throughout).

    ``total``: the most a turn waits in all before it fails with the provider's error.
    ``base``: the first wait, doubled per attempt; ``cap``: the longest single wait
    (unless the server's Retry-After says longer); ``jitter``: up to this fraction of the
    wait is added at random.
    """

    total: float = 300.0
    base: float = 2.0
    cap: float = 20.0
    jitter: float = 0.5
    max_hint: float = 30.0
    """A Retry-After above this is not waited on: the turn fails clearly at once (case B23;
    the runner passes HERMES MAX_RETRY_AFTER, the routes' own limit)."""

    def wait(self, attempt: int, *, hint: float | None, resting: float,
             rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): max(backoff, the
        store's remaining rest ``resting``) capped at ``cap``, jittered, and never below
        the server's hint ``hint`` (seconds or None)."""
        backoff = self.base * 2 ** (attempt - 1)
        pause = min(self.cap, max(backoff, resting))
        pause += pause * self.jitter * rand()
        return max(pause, hint or 0.0)


def throttled(error: BaseException) -> bool:
    """True for a failure this layer waits out (see the module doc)."""
    if not isinstance(error, TransportError) or getattr(error, "partial", ""):
        return False
    hint = error.classified
    return (isinstance(hint, ClassifiedError) and hint.reason in THROTTLED
            and hint.retryable and not hint.quota)


WaitNotice = Callable[[float, ClassifiedError, int], None]
"""Told before each wait: (seconds, the failure's hints, attempts made so far)."""


class PatientTransport:
    """agents.Transport over ``inner`` (normally a FailoverTransport) that waits out
    throttling (module doc). ``resting()``: seconds the shared store still rests the
    inner transport's routes (0 when none); ``notice``: told before each wait (the runner
    shows it to the user); ``sleep``/``clock``: injectable for tests."""

    def __init__(self, inner: Transport, *, patience: Patience | None = None,
                 resting: Callable[[], float] = lambda: 0.0,
                 notice: WaitNotice | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self.patience = patience or Patience()
        self.resting = resting
        self.notice = notice
        self._sleep = sleep
        self._clock = clock

    @property
    def profile(self) -> Any:
        return self.inner.profile

    def build_payload(self, request: ModelRequest) -> dict:
        return self.inner.build_payload(request)

    def complete(self, request: ModelRequest, *, on_text: Callable[[str], None],
                 should_stop: Callable[[], bool] = lambda: False) -> ModelResponse:
        """``inner.complete``, tried again after each throttled failure until it returns,
        fails otherwise, or the patience is spent (the last TransportError is raised).
        Raises TurnCancelled when the user stops the turn during a wait. The billed failed
        attempts of every try ride on the result or on the error raised (a stop during a
        wait loses them: nothing records a TurnCancelled's earlier failures)."""
        patience = self.patience
        billed: list = []

        def attempt() -> ModelResponse:
            try:
                response = self.inner.complete(request, on_text=on_text,
                                               should_stop=should_stop)
            except TransportError as error:
                billed.extend(error.billed)
                error.billed = tuple(billed)
                raise
            return replace(response, billed_before=(*billed, *response.billed_before)) \
                if billed else response

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception()
            return patience.wait(state.attempt_number, hint=error.classified.retry_after,
                                 resting=max(0.0, self.resting()))

        def give_up(state: RetryCallState) -> bool:
            hint = state.outcome.exception().classified.retry_after
            return (state.idle_for + (state.upcoming_sleep or 0.0) > patience.total
                    or (hint is not None and hint > patience.max_hint))

        def before_sleep(state: RetryCallState) -> None:
            if self.notice is not None:
                self.notice(state.upcoming_sleep, state.outcome.exception().classified,
                            state.attempt_number)

        def sleep(seconds: float) -> None:
            end = self._clock() + seconds
            while (left := end - self._clock()) > 0:
                if should_stop():
                    raise TurnCancelled("stopped by the user while the provider was "
                                        "throttling")
                self._sleep(min(STOP_POLL_SECONDS, left))

        retrying = Retrying(retry=retry_if_exception(throttled), wait=wait, stop=give_up,
                            before_sleep=before_sleep, sleep=sleep, reraise=True)
        return retrying(attempt)


def routes_resting(failover: Any, clock: Callable[[], float] = time.time) -> Callable[[], float]:
    """For a FailoverTransport: a callable giving the seconds until its first route is out
    of its shared cooldown (key and provider rests both count; 0 when one is usable now).
    One store look-up per call."""

    def resting() -> float:
        scopes = [s for r in failover.routes for s in (r.key_scope, r.provider_scope)]
        known = failover.store.known(scopes)
        now = clock()
        return max(0.0, min(max(known.get(r.key_scope, 0.0), known.get(r.provider_scope, 0.0))
                            - now for r in failover.routes))

    return resting
