"""Error classification: a provider failure → a reason plus recovery hints.

The loop reads booleans (retryable, compress, rotate credential, fall back, repair the
history) and never re-classifies (seed, "Providers: ... the part that didn't"; hermes-facts
§12 FailoverReason). The table keys on what the SDKs really raise (sdk-notes.md): the
anthropic SDK's status errors, its UNWRAPPED httpx2 error for a stream cut, the base
``APIStatusError`` for an error event inside a 200 stream; httpx errors and bodies for the
OpenAI-compatible path. Deterministic failures are never retryable.

Not here: the retry loop itself (agents/transports/retry.py) and any wire shape.
"""

from __future__ import annotations

import email.utils
import enum
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx

try:  # the anthropic SDK 2.x speaks through httpx2; its stream cuts arrive unwrapped
    import httpx2
    _HTTP_TIMEOUTS: tuple[type[BaseException], ...] = (httpx.TimeoutException,
                                                       httpx2.TimeoutException)
    _HTTP_TRANSPORT: tuple[type[BaseException], ...] = (httpx.TransportError,
                                                        httpx2.TransportError)
    _HTTP_STATUS: tuple[type[BaseException], ...] = (httpx.HTTPStatusError,
                                                     httpx2.HTTPStatusError)
except ImportError:  # pragma: no cover - older anthropic SDKs use httpx itself
    _HTTP_TIMEOUTS = (httpx.TimeoutException,)
    _HTTP_TRANSPORT = (httpx.TransportError,)
    _HTTP_STATUS = (httpx.HTTPStatusError,)


class FailoverReason(enum.Enum):
    """Why a provider call failed (hermes-facts §12, plus three Hermes Web names:
    ``connection`` for cuts and refused connections, ``cache_breakpoint_limit`` for the
    "A maximum of 4 blocks with cache_control" 400, ``stream_incomplete`` for a stream that
    closed without its final event)."""

    AUTH = "auth"
    AUTH_PERMANENT = "auth_permanent"
    BILLING = "billing"
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    STREAM_INCOMPLETE = "stream_incomplete"
    CONTEXT_OVERFLOW = "context_overflow"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    MODEL_NOT_FOUND = "model_not_found"
    PROVIDER_POLICY_BLOCKED = "provider_policy_blocked"
    CONTENT_POLICY_BLOCKED = "content_policy_blocked"
    FORMAT_ERROR = "format_error"
    THINKING_SIGNATURE = "thinking_signature"
    CACHE_BREAKPOINT_LIMIT = "cache_breakpoint_limit"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassifiedError:
    """A classified provider failure.

    - ``retryable``: the SAME payload may be sent again after a delay.
    - ``compress``: the context is too big; compact (or lower max_tokens), then retry.
    - ``rotate_credential`` / ``fallback``: try another key / another provider or model.
    - ``retry_after``: the server's hint in seconds (retry-after-ms, retry-after seconds or
      HTTP date), None when absent.
    - ``history_shape``: the provider rejected the transcript's shape (tool_use/tool_result
      pairing, role order, empty content, thinking replay): repair, retry once, never
      resend the same payload (cases B01, B02, B17, B20).
    - ``status``: the HTTP status, None when there was none (cut, or an error event in a
      200 stream).
    """

    reason: FailoverReason
    message: str
    status: int | None = None
    retryable: bool = False
    compress: bool = False
    rotate_credential: bool = False
    fallback: bool = False
    retry_after: float | None = None
    history_shape: bool = False


class StreamErrorEvent(Exception):
    """An error object inside a stream that began with HTTP 200 (OpenAI-compatible path;
    the anthropic SDK raises its base APIStatusError instead). ``body`` is the JSON."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        super().__init__(json.dumps(body)[:500])
        self.body = body


class StreamIncomplete(Exception):
    """The stream closed cleanly but without its final event (message_stop / finish_reason
    / [DONE]): treat like a cut, never as a normal finish (case B22)."""


class ProviderHTTPError(Exception):
    """A non-2xx answer on the OpenAI-compatible path, body already read."""

    def __init__(self, status: int, body: Any, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}: {str(body)[:500]}")
        self.status = status
        self.body = body
        self.headers = headers


PROVIDER_ERRORS: tuple[type[BaseException], ...] = (
    anthropic.APIError, *_HTTP_TRANSPORT, *_HTTP_STATUS, StreamErrorEvent, StreamIncomplete,
    ProviderHTTPError)
"""Exceptions that mean "the provider call failed"; anything else is a bug and propagates."""

_TYPE_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
    "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
    # OpenAI-shape types and codes seen in stream error objects
    "server_error": 500, "insufficient_quota": 429, "rate_limit_exceeded": 429,
    "context_length_exceeded": 400,
}

# Context overflow bodies differ by provider (case B25); matched on the message alone so a
# router that strips the status still classifies.
_OVERFLOW = re.compile(
    r"prompt is too long|input length and max_tokens exceed context limit"
    r"|maximum context length|context_length_exceeded|context window"
    r"|tokens in request more than max tokens allowed|largest known context limit"
    r"|request entity too large|too many tokens", re.IGNORECASE)
_HISTORY_SHAPE = re.compile(
    r"tool_use` ids were found without `tool_result`|unexpected `tool_use_id`"
    r"|must be a response to a preceding message with 'tool_calls'"
    r"|must be followed by tool messages|roles must alternate|first message must use"
    r"|must have non-empty content|tool_call_id|tool_result", re.IGNORECASE)
_THINKING = re.compile(r"signature`? in `?thinking|thinking` or `redacted_thinking",
                       re.IGNORECASE)
_BREAKPOINT_LIMIT = re.compile(r"maximum of \d+ blocks with cache_control", re.IGNORECASE)
_BILLING = re.compile(r"insufficient_quota|billing|credit balance|credits|quota",
                      re.IGNORECASE)
_CONTENT_POLICY = re.compile(r"content[_ ]policy|content[_ ]filter|safety system",
                             re.IGNORECASE)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None
                      ) -> float | None:
    """Seconds to wait per ``retry-after-ms``, then ``retry-after`` (seconds or HTTP date);
    None when absent or unparsable (case B23)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        return max(0.0, float(lower["retry-after-ms"]) / 1000)
    except (KeyError, TypeError, ValueError):
        pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - (time.time() if now is None else now))


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(type, code, message) of an A-shape or O-shape error body; "" when absent."""
    if isinstance(body, (bytes, str)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            body = json.loads(text)
        except ValueError:
            return "", "", text
    if not isinstance(body, Mapping):
        return "", "", "" if body is None else str(body)
    error = body.get("error", body)
    if not isinstance(error, Mapping):
        return "", "", str(error)
    code = error.get("code")
    return (str(error.get("type") or ""), "" if code is None else str(code),
            str(error.get("message") or ""))


def classify_response(status: int | None, body: Any, *,
                      headers: Mapping[str, str] | None = None) -> ClassifiedError:
    """Classify an HTTP error answer (or an error event, ``status`` None) by status, error
    type/code and message. Rules from hermes-facts §12 and cases B01, B07, B17, B20,
    B22, B23, B25, B27."""
    etype, code, message = _error_fields(body)
    text = f"{etype} {code} {message}"
    if status in (None, 200):  # an error event in a stream: the body names the kind
        status = _TYPE_STATUS.get(etype) or _TYPE_STATUS.get(code)
    shown = message or etype or f"HTTP {status}"
    hint = parse_retry_after(headers)

    def make(reason: FailoverReason, **hints: Any) -> ClassifiedError:
        return ClassifiedError(reason=reason, message=shown, status=status, **hints)

    if _BREAKPOINT_LIMIT.search(text):
        return make(FailoverReason.CACHE_BREAKPOINT_LIMIT)
    if status == 413 or etype == "request_too_large":
        return make(FailoverReason.PAYLOAD_TOO_LARGE, compress=True)
    if _OVERFLOW.search(text) or code == "1210":
        return make(FailoverReason.CONTEXT_OVERFLOW, compress=True)
    if _THINKING.search(text):
        return make(FailoverReason.THINKING_SIGNATURE, history_shape=True)
    if status == 401:
        return make(FailoverReason.AUTH, rotate_credential=True, fallback=True)
    if status == 402 or (status in (403, 404, 429) and _BILLING.search(text)
                         and etype != "rate_limit_error"):
        return make(FailoverReason.BILLING, fallback=True)
    if status == 403:
        return make(FailoverReason.AUTH_PERMANENT, fallback=True)
    if status == 404:
        return make(FailoverReason.MODEL_NOT_FOUND, fallback=True)
    if status == 429:
        if etype == "overloaded_error":
            return make(FailoverReason.OVERLOADED, retryable=True, fallback=True,
                        retry_after=hint)
        return make(FailoverReason.RATE_LIMIT, retryable=True, rotate_credential=True,
                    fallback=True, retry_after=hint)
    if _CONTENT_POLICY.search(text):
        return make(FailoverReason.CONTENT_POLICY_BLOCKED, fallback=True)
    if status in (408, 504) or etype == "timeout_error":
        return make(FailoverReason.TIMEOUT, retryable=True, retry_after=hint)
    if status is not None and status >= 500:
        if etype == "invalid_request_error":  # a 5xx whose body is request validation
            return make(FailoverReason.FORMAT_ERROR)
        reason = (FailoverReason.OVERLOADED if status in (503, 529)
                  else FailoverReason.SERVER_ERROR)
        return make(reason, retryable=True, fallback=True, retry_after=hint)
    if status == 409:
        return make(FailoverReason.SERVER_ERROR, retryable=True, retry_after=hint)
    if status is not None and 400 <= status < 500:
        return make(FailoverReason.FORMAT_ERROR,
                    history_shape=bool(_HISTORY_SHAPE.search(text)))
    return make(FailoverReason.UNKNOWN, retryable=True)


def classify(exc: BaseException) -> ClassifiedError:
    """Classify an exception raised while calling a provider.

    Keys (sdk-notes.md): anthropic ``APIStatusError`` and subclasses by status and body
    (the base class with a 200 response is an error event mid-stream: the body names the
    kind); ``APIConnectionError`` / ``APITimeoutError``; raw httpx/httpx2 transport errors
    (a stream cut is NOT wrapped by the anthropic SDK); ``ProviderHTTPError`` and
    ``StreamErrorEvent`` from the OpenAI-compatible path; ``StreamIncomplete``. Anything
    else is ``unknown`` (retryable, per hermes-facts §12; callers only retry
    ``PROVIDER_ERRORS`` so bugs still propagate).
    """
    if isinstance(exc, anthropic.APIStatusError):
        return classify_response(exc.status_code, exc.body, headers=exc.response.headers)
    if isinstance(exc, ProviderHTTPError):
        return classify_response(exc.status, exc.body, headers=exc.headers)
    if isinstance(exc, _HTTP_STATUS):
        response = exc.response  # type: ignore[attr-defined]
        return classify_response(response.status_code, response.text, headers=response.headers)
    if isinstance(exc, StreamErrorEvent):
        return classify_response(None, exc.body)
    if isinstance(exc, (anthropic.APITimeoutError, *_HTTP_TIMEOUTS)):
        return ClassifiedError(reason=FailoverReason.TIMEOUT, message=str(exc) or "timed out",
                               retryable=True)
    if isinstance(exc, (anthropic.APIConnectionError, *_HTTP_TRANSPORT)):
        return ClassifiedError(reason=FailoverReason.CONNECTION,
                               message=str(exc) or type(exc).__name__, retryable=True,
                               fallback=True)
    if isinstance(exc, StreamIncomplete):
        return ClassifiedError(reason=FailoverReason.STREAM_INCOMPLETE, message=str(exc),
                               retryable=True)
    return ClassifiedError(reason=FailoverReason.UNKNOWN, message=str(exc) or type(exc).__name__,
                           retryable=True)
