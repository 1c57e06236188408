"""Fallback providers and credential pools: one Transport over an ordered list of routes.

A route is (provider profile, model, key label, transport). The classifier's hints decide
what happens after a failure that the route's own retry policy gave up on (seed, "Providers:
... the part that didn't"; issue 10, build 1):

- ``rotate_credential`` (a throttled or rejected key): the next key of the same provider.
- ``fallback`` (overloaded, server errors, quota, unknown model, content policy, bad
  certificate, a retry-after above the cap): the next provider/model, skipping the rest of
  this provider's keys when the failure is the provider's (overloaded, 5xx), not the key's.
- anything else (overflow, history shape, format errors): raised at once; those are the
  loop's to recover, and another provider would reject the same payload.

Cooldowns: a throttled key or an overloaded provider is put to rest in a shared store (the
database in the app: every worker sees it), for max(server hint, 30 s × 2^strikes) capped at
15 min, escalating on repeated throttling; a success clears both the key's and the
provider's rows. Quota and auth failures rest the key for an hour. Routes at rest are skipped
while another is available. All routes are tried within ONE iteration: a fallback never costs
the turn an extra iteration (the seed's "fair turn").

Not here: classification (errors.py), wire shapes (the route transports), storage
(sessions/provider_state.py implements ``CooldownStore``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from agents import Transport
from agents.errors import TransportError
from agents.messages import BilledAttempt, ModelRequest, ModelResponse
from agents.transports.errors import ClassifiedError, FailoverReason
from agents.wording import served_label

COOLDOWN_BASE_SECONDS = 30.0
COOLDOWN_MAX_SECONDS = 900.0
LONG_COOLDOWN_SECONDS = 3600.0
"""A key out of quota or rejected stays at rest this long (it will not heal in seconds)."""
_PROVIDER_WIDE = frozenset({FailoverReason.OVERLOADED, FailoverReason.SERVER_ERROR,
                            FailoverReason.TIMEOUT, FailoverReason.CONNECTION,
                            FailoverReason.STREAM_INCOMPLETE, FailoverReason.MODEL_NOT_FOUND,
                            FailoverReason.CERTIFICATE, FailoverReason.CONTENT_POLICY_BLOCKED})
"""Failures of the endpoint or the model, not of one key: the provider's other keys are
skipped."""


class CooldownStore(Protocol):
    """Shared rest periods, by scope ("provider:<name>" or "key:<name>:<label>"); times are
    epoch seconds."""

    def until(self, scope: str) -> float | None:
        """When ``scope`` may be tried again, None when it is not resting."""
        ...

    def known(self, scopes: list[str]) -> dict[str, float]:
        """The rest's end (epoch seconds, possibly past) of every scope in ``scopes`` that
        has a row: one look-up per call instead of one per scope."""
        ...

    def strike(self, scope: str, *, base: float, reason: str) -> float:
        """Rest ``scope`` for max(``base``, 30 s × 2^strikes) capped at 15 min (strikes =
        consecutive strikes before this one); returns the rest's end."""
        ...

    def clear(self, scope: str) -> None:
        """A success: forget the scope's strikes and rest."""
        ...


class MemoryCooldowns:
    """A process-local CooldownStore (tests, and where no database is wired in)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._rows: dict[str, tuple[float, int]] = {}
        self._clock = clock

    def until(self, scope: str) -> float | None:
        row = self._rows.get(scope)
        return row[0] if row and row[0] > self._clock() else None

    def known(self, scopes: list[str]) -> dict[str, float]:
        return {s: self._rows[s][0] for s in scopes if s in self._rows}

    def strike(self, scope: str, *, base: float, reason: str) -> float:
        strikes = self._rows.get(scope, (0.0, 0))[1]
        until = self._clock() + cooldown_seconds(base, strikes)
        self._rows[scope] = (until, strikes + 1)
        return until

    def clear(self, scope: str) -> None:
        self._rows.pop(scope, None)


def _named(billed: tuple[BilledAttempt, ...], route: Route) -> tuple[BilledAttempt, ...]:
    """``billed`` with the attempts no layer named yet attributed to ``route``."""
    return tuple(b if b.provider else replace(b, provider=route.provider, model=route.model,
                                              credential=route.credential) for b in billed)


def cooldown_seconds(hint: float, strikes: int) -> float:
    """Rest length in seconds: max(``hint``, 30 × 2^``strikes``), at most 15 min (a server
    hint longer than that is honoured as given)."""
    return max(hint, min(COOLDOWN_MAX_SECONDS, COOLDOWN_BASE_SECONDS * 2 ** strikes))


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One way to serve a request: ``provider`` (profile name), ``model``, ``credential``
    (the key's label, never the secret; "" for keyless endpoints) and its ``transport``."""

    provider: str
    model: str
    credential: str
    transport: Transport

    @property
    def key_scope(self) -> str:
        return f"key:{self.provider}:{self.credential}"

    @property
    def provider_scope(self) -> str:
        return f"provider:{self.provider}"

    def label(self) -> str:
        """How the user sees this route: provider, model and key label."""
        return served_label(self.provider, self.model, self.credential)


FailoverNotice = Callable[[Route, Route | None, ClassifiedError], None]
"""Called when a route failed: (failed route, the next route or None, the hints)."""


class FailoverTransport:
    """agents.Transport over ``routes`` (primary first). ``store``: shared cooldowns;
    ``notice``: told about every failover (the runner turns it into an event naming the
    provider and key label); ``clock``: epoch seconds."""

    def __init__(self, routes: list[Route], *, store: CooldownStore | None = None,
                 notice: FailoverNotice | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not routes:
            raise ValueError("a FailoverTransport needs at least one route")
        self.routes = list(routes)
        self.store = store or MemoryCooldowns(clock)
        self.notice = notice
        self._clock = clock
        self._struck: set[str] = set()

    @property
    def profile(self) -> Any:
        return self.routes[0].transport.profile

    def build_payload(self, request: ModelRequest) -> dict:
        """The primary route's body (what the estimator measures)."""
        return self.routes[0].transport.build_payload(request)

    def resting(self, route: Route, known: dict[str, float]) -> bool:
        """True while the route's key or provider is cooling down (``known``: the store's
        rows for this call, from ``CooldownStore.known``)."""
        now = self._clock()
        return any(known.get(s, 0.0) > now for s in (route.key_scope, route.provider_scope))

    def complete(self, request: ModelRequest, *, on_text: Callable[[str], None],
                 should_stop: Callable[[], bool] = lambda: False) -> ModelResponse:
        """Serve ``request`` from the first usable route (see the module doc). The response
        names the route (``provider``, ``credential``). Raises the last TransportError when
        every route failed or is resting, or at once for a failure no other route can fix
        or after text reached the user; TurnCancelled propagates. Billed failed attempts are
        named with their route and carried on (``billed_before`` / ``TransportError.billed``)."""
        known = self.store.known([s for r in self.routes
                                  for s in (r.key_scope, r.provider_scope)])
        candidates = [r for r in self.routes if not self.resting(r, known)] or self.routes[:1]
        skip_provider: str | None = None
        last: TransportError | None = None
        billed: tuple[BilledAttempt, ...] = ()  # earlier routes' billed failures
        for index, route in enumerate(candidates):
            if route.provider == skip_provider:
                continue
            try:
                response = route.transport.complete(replace(request, model=route.model),
                                                    on_text=on_text, should_stop=should_stop)
            except TransportError as error:
                billed += _named(error.billed, route)
                error.billed = billed
                hint = error.classified
                if not isinstance(hint, ClassifiedError) or error.partial:
                    raise
                if not (hint.fallback or hint.rotate_credential or hint.retryable):
                    raise  # deterministic for this payload on any route: the loop's to fix
                self._rest(route, hint)
                last = error
                skip_provider = route.provider if hint.reason in _PROVIDER_WIDE else None
                following = next((r for r in candidates[index + 1:]
                                  if r.provider != skip_provider), None)
                if self.notice is not None:
                    self.notice(route, following, hint)
                continue
            for scope in (route.key_scope, route.provider_scope):
                if scope in known or scope in self._struck:  # a success resets its strikes
                    self.store.clear(scope)
            return replace(response, provider=route.provider, credential=route.credential,
                           billed_before=billed + _named(response.billed_before, route))
        assert last is not None
        raise last

    def _rest(self, route: Route, hint: ClassifiedError) -> None:
        base = hint.retry_after or 0.0
        self._struck.update((route.key_scope, route.provider_scope))
        if hint.quota or hint.reason in (FailoverReason.AUTH, FailoverReason.AUTH_PERMANENT,
                                         FailoverReason.BILLING):
            self.store.strike(route.key_scope, base=LONG_COOLDOWN_SECONDS,
                              reason=hint.reason.value)
        elif hint.reason in _PROVIDER_WIDE:
            self.store.strike(route.provider_scope, base=base, reason=hint.reason.value)
        else:
            self.store.strike(route.key_scope, base=base, reason=hint.reason.value)
