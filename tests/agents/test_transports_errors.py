"""The error classifier and the retry policy (pure; real SDK exception objects)."""

from __future__ import annotations

import anthropic
import httpx
import httpx2
import pytest

from agents.errors import TransportError, TurnCancelled
from agents.transports.errors import (ClassifiedError, FailoverReason, ProviderHTTPError,
                                      StreamErrorEvent, StreamIncomplete, classify,
                                      classify_response, parse_retry_after)
from agents.transports.retry import RetryPolicy, call_with_retries

R = FailoverReason
REQUEST = httpx2.Request("POST", "http://provider.test/v1/messages")


def a_error(status: int, kind: str, message: str, headers: dict | None = None):
    """What the anthropic SDK raises for an HTTP error answer."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    response = httpx2.Response(status, headers=headers or {}, json=body, request=REQUEST)
    client = anthropic.Anthropic(api_key="x", base_url="http://provider.test", max_retries=0)
    return client._make_status_error(str(body), body=body, response=response)


def test_anthropic_sdk_errors_classify_by_what_the_sdk_raises():
    rate = a_error(429, "rate_limit_error", "rate limit (test)", {"retry-after": "20"})
    assert isinstance(rate, anthropic.RateLimitError)
    assert classify(rate) == ClassifiedError(
        reason=R.RATE_LIMIT, message="rate limit (test)", status=429, retryable=True,
        rotate_credential=True, fallback=True, retry_after=20.0)
    overloaded = a_error(529, "overloaded_error", "Overloaded")
    assert isinstance(overloaded, anthropic.OverloadedError)
    assert (classify(overloaded).reason, classify(overloaded).retryable) == (R.OVERLOADED, True)
    server = classify(a_error(500, "api_error", "Internal server error"))
    assert (server.reason, server.retryable) == (R.SERVER_ERROR, True)


def test_error_event_inside_a_200_stream_reads_the_kind_from_the_body():
    event = a_error(200, "overloaded_error", "Overloaded")
    assert type(event) is anthropic.APIStatusError
    classified = classify(event)
    assert (classified.reason, classified.retryable, classified.status) == (R.OVERLOADED, True, 529)


@pytest.mark.parametrize("message", [
    "prompt is too long: 201234 tokens > 200000 maximum",
    "input length and max_tokens exceed context limit: 190000 + 16000 > 200000, decrease "
    "input length or max_tokens and try again",
])
def test_anthropic_context_overflow_means_compress_not_retry(message):
    classified = classify(a_error(400, "invalid_request_error", message))
    assert (classified.reason, classified.compress, classified.retryable) == (
        R.CONTEXT_OVERFLOW, True, False)


@pytest.mark.parametrize("status,body", [
    (400, {"error": {"message": "This model's maximum context length is 128000 tokens. However,"
                                " your messages resulted in 130500 tokens.",
                     "type": "invalid_request_error", "param": "messages",
                     "code": "context_length_exceeded"}}),
    (400, "This model's maximum context length is 65536 tokens. However, you requested 70000 "
          "tokens (61808 in the messages, 8192 in the completion)."),
    (400, {"error": {"code": "1210", "message": "tokens in request more than max tokens allowed"}}),
    (None, "Request requires approximately 278000 tokens, but the largest known context limit "
           "in this combo is 272000 tokens."),
])
def test_b25_overflow_bodies_of_every_provider_classify_as_context_overflow(status, body):
    classified = classify_response(status, body)
    assert (classified.reason, classified.compress, classified.retryable) == (
        R.CONTEXT_OVERFLOW, True, False)


def test_a_proxy_413_asks_for_compression():
    classified = classify(ProviderHTTPError(413, "Request Entity Too Large", {}))
    assert (classified.reason, classified.compress) == (R.PAYLOAD_TOO_LARGE, True)


@pytest.mark.parametrize("message", [
    "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "toolu_T1, toolu_T2. Each `tool_use` block must have a corresponding `tool_result` block "
    "in the next message.",
    "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_T9.",
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
    "messages.0: all messages must have non-empty content except for the optional final "
    "assistant message",
])
def test_history_shape_400s_ask_for_repair_never_a_resend(message):
    classified = classify(a_error(400, "invalid_request_error", message))
    assert (classified.reason, classified.history_shape, classified.retryable) == (
        R.FORMAT_ERROR, True, False)


def test_thinking_signature_is_a_history_shape_error():
    classified = classify(a_error(400, "invalid_request_error",
                                  "messages.1.content.0: Invalid `signature` in `thinking` block"))
    assert (classified.reason, classified.history_shape) == (R.THINKING_SIGNATURE, True)


def test_b07_breakpoint_limit_has_its_own_reason():
    classified = classify(a_error(400, "invalid_request_error",
                                  "A maximum of 4 blocks with cache_control may be provided. "
                                  "Found 5."))
    assert (classified.reason, classified.retryable) == (R.CACHE_BREAKPOINT_LIMIT, False)


@pytest.mark.parametrize("status,kind,reason", [
    (401, "authentication_error", R.AUTH), (403, "permission_error", R.AUTH_PERMANENT),
    (404, "not_found_error", R.MODEL_NOT_FOUND), (402, "billing_error", R.BILLING),
    (400, "invalid_request_error", R.FORMAT_ERROR),
])
def test_deterministic_failures_are_not_retried(status, kind, reason):
    classified = classify(a_error(status, kind, "no (test)"))
    assert (classified.reason, classified.retryable) == (reason, False)
    assert classify(a_error(401, "authentication_error", "bad key")).rotate_credential


def test_openai_shapes_quota_and_content_policy_are_final():
    quota = classify(ProviderHTTPError(429, {"error": {
        "message": "quota (test)", "type": "insufficient_quota",
        "code": "insufficient_quota"}}, {}))
    assert (quota.reason, quota.retryable, quota.fallback) == (R.BILLING, False, True)
    policy = classify(ProviderHTTPError(400, {"error": {
        "message": "flagged", "code": "content_policy_violation"}}, {}))
    assert (policy.reason, policy.retryable) == (R.CONTENT_POLICY_BLOCKED, False)
    unavailable = classify(ProviderHTTPError(503, {"error": {"message": "busy"}}, {}))
    assert (unavailable.reason, unavailable.retryable) == (R.OVERLOADED, True)
    stream = classify(StreamErrorEvent({"error": {"message": "Overloaded",
                                                  "type": "overloaded_error"}}))
    assert (stream.reason, stream.retryable) == (R.OVERLOADED, True)


def test_cuts_timeouts_and_early_ends_are_retryable():
    cut = classify(httpx2.RemoteProtocolError("peer closed connection"))
    assert (cut.reason, cut.retryable) == (R.CONNECTION, True)
    assert classify(httpx.RemoteProtocolError("peer closed")).reason is R.CONNECTION
    assert classify(httpx.ReadTimeout("slow")).reason is R.TIMEOUT
    assert classify(anthropic.APITimeoutError(request=REQUEST)).reason is R.TIMEOUT
    assert classify(anthropic.APIConnectionError(request=REQUEST)).reason is R.CONNECTION
    assert classify(StreamIncomplete("eof")).reason is R.STREAM_INCOMPLETE


def test_retry_after_headers_in_all_three_forms():
    assert parse_retry_after({"retry-after-ms": "4321", "retry-after": "9"}) == 4.321
    assert parse_retry_after({"Retry-After": "20"}) == 20.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"},
                             now=1445412480.0) == 30.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after(None) is None


class Flaky:
    """An attempt function failing with ``errors`` in turn, then answering "ok"."""

    def __init__(self, *errors: BaseException, text: str = ""):
        self.errors = list(errors)
        self.calls = 0
        self.text = text

    def __call__(self, tap):
        self.calls += 1
        if self.text:
            tap(self.text)
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


FAST = RetryPolicy(base_delay=0.001, max_delay=0.002, jitter=0.0, max_retry_after=30.0)


def test_retryable_failures_are_retried_with_the_server_hint_honoured():
    sleeps: list[float] = []
    flaky = Flaky(a_error(429, "rate_limit_error", "slow down", {"retry-after-ms": "7"}),
                  a_error(529, "overloaded_error", "Overloaded"))
    assert call_with_retries(flaky, on_text=lambda t: None, policy=FAST,
                             sleep=sleeps.append) == "ok"
    assert flaky.calls == 3
    assert sleeps == [0.007, 0.002]


def test_three_attempts_at_most_then_transport_error():
    flaky = Flaky(*[a_error(500, "api_error", "boom") for _ in range(5)])
    with pytest.raises(TransportError) as caught:
        call_with_retries(flaky, on_text=lambda t: None, policy=FAST, sleep=lambda s: None)
    assert flaky.calls == 3 and caught.value.attempts == 3
    assert caught.value.classified.reason is R.SERVER_ERROR


def test_deterministic_failure_fails_in_one_attempt():
    flaky = Flaky(a_error(401, "authentication_error", "bad key"))
    with pytest.raises(TransportError) as caught:
        call_with_retries(flaky, on_text=lambda t: None, policy=FAST, sleep=lambda s: None)
    assert flaky.calls == 1 and caught.value.classified.reason is R.AUTH


def test_hint_above_the_cap_fails_over_instead_of_sleeping():
    sleeps: list[float] = []
    flaky = Flaky(a_error(429, "rate_limit_error", "slow", {"retry-after": "120"}))
    with pytest.raises(TransportError) as caught:
        call_with_retries(flaky, on_text=lambda t: None, policy=FAST, sleep=sleeps.append)
    assert sleeps == [] and caught.value.classified.fallback


def test_no_retry_once_text_reached_the_user_and_the_partial_is_kept():
    shown: list[str] = []
    flaky = Flaky(httpx2.RemoteProtocolError("cut"), text="Hello")
    with pytest.raises(TransportError) as caught:
        call_with_retries(flaky, on_text=shown.append, policy=FAST, sleep=lambda s: None)
    assert flaky.calls == 1 and shown == ["Hello"] and caught.value.partial == "Hello"


def test_bugs_and_cancellation_propagate_unclassified():
    with pytest.raises(KeyError):
        call_with_retries(Flaky(KeyError("bug")), on_text=lambda t: None, policy=FAST)
    with pytest.raises(TurnCancelled):
        call_with_retries(Flaky(TurnCancelled("stop")), on_text=lambda t: None, policy=FAST)
