"""FailoverTransport (pure: fake route transports, in-memory cooldowns), the OpenAI
same-role merge (property test) and certificate classification."""

from __future__ import annotations

import ssl

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.errors import TransportError
from agents.messages import Message, ModelRequest, ModelResponse
from agents.transports.errors import ClassifiedError, FailoverReason, classify
from agents.transports.failover import (COOLDOWN_MAX_SECONDS, FailoverTransport,
                                        MemoryCooldowns, Route, cooldown_seconds)
from agents.transports.openai_chat import merge_same_role

R = FailoverReason
REQUEST = ModelRequest(model="m", system="s", messages=(Message(role="user", content="hi"),))


class Fake:
    profile = None

    def __init__(self, *errors: ClassifiedError, partial: str = ""):
        self.errors = list(errors)
        self.calls: list[str] = []
        self.partial = partial

    def build_payload(self, request):
        return {"model": request.model}

    def complete(self, request, *, on_text, should_stop=lambda: False):
        self.calls.append(request.model)
        if self.errors:
            error = TransportError("x", self.errors.pop(0))
            error.partial = self.partial
            raise error
        return ModelResponse(message=Message(role="assistant", content="ok"), usage=None,
                             model=request.model)


def hint(reason, **kw):
    return ClassifiedError(reason=reason, message=reason.value, **kw)


RATE = hint(R.RATE_LIMIT, retryable=True, rotate_credential=True, fallback=True)
BUSY = hint(R.OVERLOADED, retryable=True, fallback=True)
QUOTA = hint(R.BILLING, fallback=True, quota=True)
SHAPE = hint(R.FORMAT_ERROR, history_shape=True)


def chain(*fakes_by_route):
    routes = [Route(provider=p, model=f"{p}-model", credential=k, transport=t)
              for p, k, t in fakes_by_route]
    clock = [1_000.0]
    store = MemoryCooldowns(lambda: clock[0])
    seen = []
    transport = FailoverTransport(routes, store=store, clock=lambda: clock[0],
                                  notice=lambda a, b, h: seen.append((a.label(),
                                                                      b and b.label())))
    return transport, store, clock, seen


def test_a_throttled_key_rotates_to_the_next_key_of_the_same_provider():
    a, b, c = Fake(RATE), Fake(), Fake()
    transport, store, _, seen = chain(("p", "k1", a), ("p", "k2", b), ("q", "", c))
    response = transport.complete(REQUEST, on_text=lambda t: None)
    assert (response.provider, response.credential) == ("p", "k2")
    assert b.calls == ["p-model"] and not c.calls
    assert store.until("key:p:k1") is not None and store.until("provider:p") is None
    assert seen == [("p/p-model (key k1)", "p/p-model (key k2)")]


def test_an_overloaded_provider_skips_its_other_keys_and_falls_back():
    a, b, c = Fake(BUSY), Fake(), Fake()
    transport, store, _, _ = chain(("p", "k1", a), ("p", "k2", b), ("q", "", c))
    assert transport.complete(REQUEST, on_text=lambda t: None).provider == "q"
    assert not b.calls and c.calls == ["q-model"]
    assert store.until("provider:p") is not None


def test_a_resting_route_is_skipped_on_the_next_call_and_success_clears_it():
    a, b = Fake(RATE), Fake()
    transport, store, clock, _ = chain(("p", "k1", a), ("p", "k2", b))
    transport.complete(REQUEST, on_text=lambda t: None)
    transport.complete(REQUEST, on_text=lambda t: None)
    assert len(a.calls) == 1 and len(b.calls) == 2
    clock[0] += COOLDOWN_MAX_SECONDS + 1
    transport.complete(REQUEST, on_text=lambda t: None)
    assert len(a.calls) == 2 and store.until("key:p:k1") is None


@pytest.mark.parametrize("error", [SHAPE, hint(R.CONTEXT_OVERFLOW, compress=True)])
def test_failures_of_the_payload_are_raised_at_once(error):
    a, b = Fake(error), Fake()
    transport, *_ = chain(("p", "", a), ("q", "", b))
    with pytest.raises(TransportError):
        transport.complete(REQUEST, on_text=lambda t: None)
    assert not b.calls


def test_no_fallback_after_text_reached_the_user():
    a, b = Fake(BUSY, partial="Hello"), Fake()
    transport, *_ = chain(("p", "", a), ("q", "", b))
    with pytest.raises(TransportError):
        transport.complete(REQUEST, on_text=lambda t: None)
    assert not b.calls


def test_quota_rests_the_key_for_an_hour_and_everything_failing_raises_the_last():
    a, b = Fake(QUOTA), Fake(BUSY)
    transport, store, clock, _ = chain(("p", "k", a), ("q", "", b))
    with pytest.raises(TransportError) as caught:
        transport.complete(REQUEST, on_text=lambda t: None)
    assert caught.value.classified.reason is R.OVERLOADED
    assert store.until("key:p:k") - clock[0] >= 3_600


def test_cooldowns_escalate_and_honour_a_longer_hint():
    assert [cooldown_seconds(0, n) for n in range(7)] == [30, 60, 120, 240, 480, 900, 900]
    assert cooldown_seconds(2_000, 0) == 2_000


def test_a_bad_certificate_is_deterministic():
    cause = ssl.SSLCertVerificationError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
                                         "failed: self-signed certificate")
    error = httpx.ConnectError(str(cause))
    classified = classify(error)
    assert (classified.reason, classified.retryable, classified.fallback) == (
        R.CERTIFICATE, False, True)


roles = st.sampled_from(["user", "assistant", "assistant+calls", "tool"])


@settings(max_examples=200)
@given(st.lists(roles, max_size=14))
def test_merge_same_role_alternates_and_keeps_every_pair(kinds):
    messages = []
    for i, kind in enumerate(kinds):
        if kind == "assistant+calls":
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}]})
        elif kind == "tool":
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "r"})
        else:
            messages.append({"role": kind, "content": f"{kind} {i}"})
    merged = merge_same_role(messages)
    for a, b in zip(merged, merged[1:]):
        assert not (a["role"] == b["role"] and a["role"] in ("user", "assistant")
                    and not a.get("tool_calls"))
    calls = [c["id"] for m in merged for c in m.get("tool_calls") or ()]
    assert calls == [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    assert [m for m in merged if m["role"] == "tool"] == [m for m in messages
                                                          if m["role"] == "tool"]
    text = " ".join(str(m.get("content")) for m in merged)
    assert all(m["content"] in text for m in messages if m["role"] in ("user",)
               and m.get("content"))
    assert merge_same_role(merged) == merged
