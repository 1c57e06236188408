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
    CERTIFICATE = "certificate"
    REFUSAL = "refusal"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassifiedError:
    """A classified provider failure: the ONLY place an error body is read (issue 10 defect
    4). Everything downstream (the loop, the runner's recovery, the pipeline, the failover
    chain, the breakpoint memory) reads these hints and never matches strings itself.

    - ``retryable``: the SAME payload may be sent again after a delay.
    - ``compress``: the context is too big; lower max_tokens (when ``output_fits`` says the
      input alone fits) or compact, then retry (cases B11, B25).
    - ``rotate_credential`` / ``fallback``: try another key / another provider or model.
    - ``retry_after``: the server's hint in seconds (retry-after-ms, retry-after seconds or
      HTTP date), None when absent.
    - ``history_shape``: the provider rejected the transcript's shape (tool_use/tool_result
      pairing, role order, empty content, thinking replay): repair, retry once, never
      resend the same payload (cases B01, B02, B17, B20).
    - ``status``: the HTTP status, None when there was none (cut, or an error event in a
      200 stream, unless the body names the kind).
    - ``input_tokens`` / ``context_limit`` / ``output_tokens``: sizes (tokens) parsed from
      an overflow body: the provider's count of the input, the model's window, and the
      output budget the request asked for; None when the body does not say (case B25).
    - ``breakpoint_limit``: for the "A maximum of N blocks with cache_control" 400, the N
      (else None) and ``breakpoints_found`` the F of "Found F"; ``ttl_conflict``: a 1h marker after a 5m one (a gateway added its own
      marker): clamp every TTL to 5m and resend (issue 10 defect 8).
    - ``quota``: billing / quota exhaustion (never retryable; the message says what to do).
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
    input_tokens: int | None = None
    context_limit: int | None = None
    output_tokens: int | None = None
    breakpoint_limit: int | None = None
    breakpoints_found: int | None = None
    ttl_conflict: bool = False
    quota: bool = False

    @property
    def output_fits(self) -> bool:
        """True when the provider's own count says the input alone fits the window, so a
        smaller max_tokens (not a compaction) is the fix (case B25)."""
        return (self.input_tokens is not None and self.context_limit is not None
                and self.input_tokens < self.context_limit)


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
    "context_length_exceeded": 400, "exceed_context_size_error": 400,
}

# Context overflow: narrow phrases, each one a real provider's (error_cases.json), matched on
# the message alone so a router that strips the status still classifies (case B25). Never
# consulted for a 429 (defect 5: "tokens per minute" is a rate limit, not an overflow).
_OVERFLOW = re.compile(
    r"prompt is too long"                                   # Anthropic
    r"|input length and max_tokens exceed context limit"    # Anthropic, input + max_tokens
    r"|maximum context length is \d+"                       # OpenAI, DeepSeek, vLLM, OpenRouter
    r"|context_length_exceeded"                             # OpenAI code
    r"|tokens in request more than max tokens allowed"      # Z.AI / GLM (code 1210)
    r"|largest known context limit"                         # router wrap
    r"|exceeds the available context size"                  # llama.cpp server
    r"|exceed_context_size_error"                           # llama.cpp server type
    r"|input length exceeds the context length"             # Ollama
    r"|prompt too long; exceeded (?:max )?context length"   # Ollama runner
    r"|request entity too large",                           # proxies (413 text)
    re.IGNORECASE)
# Sizes in overflow bodies, (input, limit, output) by group name; first match wins.
_SIZES = (
    re.compile(r"prompt is too long: (?P<input>\d+) tokens > (?P<limit>\d+)", re.I),
    re.compile(r"exceed context limit: (?P<input>\d+) \+ (?P<output>\d+) > (?P<limit>\d+)",
               re.I),
    re.compile(r"maximum context length is (?P<limit>\d+) tokens.{0,80}?requested (?:about )?"
               r"\d+ tokens \((?P<input>\d+) (?:in the messages|of text input)(?:, (?P<output>"
               r"\d+) in the (?:completion|output))?", re.I | re.S),
    re.compile(r"maximum context length is (?P<limit>\d+) tokens and your request has "
               r"(?P<input>\d+) input tokens(?: \((?P<output>\d+) >)?", re.I),
    re.compile(r"maximum context length is (?P<limit>\d+) tokens.{0,40}?(?:resulted in|"
               r"requested) (?:about )?(?P<input>\d+) tokens", re.I | re.S),
    re.compile(r"requires approximately (?P<input>\d+) tokens.{0,80}?context limit in this "
               r"combo is (?P<limit>\d+)", re.I | re.S),
)
_HISTORY_SHAPE = re.compile(
    r"tool_use.{0,3} ids were found without|unexpected .{0,2}tool_use_id"
    r"|must be a response to a prece+ding message with 'tool_calls'"  # OpenAI: "preceeding"
    r"|must be followed by tool messages|did not have response messages"
    r"|roles must alternate|conversation roles must alternate|first message must use"
    r"|must have non-empty content|text content blocks must be non-empty"
    r"|text content blocks must contain non-whitespace"
    r"|'tool_call_id' of '[^']*' not found|unexpected role '\w+' after role"
    r"|INVALID_CHAT_HISTORY", re.IGNORECASE)
_THINKING = re.compile(r"signature`? in `?thinking|thinking` or `redacted_thinking",
                       re.IGNORECASE)
_BREAKPOINT_LIMIT = re.compile(r"maximum of (\d+) blocks with cache_control(?:.*?found (\d+))?",
                               re.IGNORECASE | re.DOTALL)
_TTL_CONFLICT = re.compile(r"ttl='1h' cache_control block must not come after", re.IGNORECASE)
_QUOTA = re.compile(
    r"insufficient_quota|exceeded your current quota|credit balance is too low"
    r"|insufficient credits|insufficient balance|billing|payment required"
    r"|tokens per day \(TPD\)|requests per day \(RPD\)|daily (?:token )?limit",
    re.IGNORECASE)
_CONTENT_POLICY = re.compile(r"content[_ ]policy|content[_ ]filter|content management policy"
                             r"|safety system", re.IGNORECASE)
_MODEL_UNKNOWN = re.compile(r"model.{0,80}(?:does not exist|not found|is not supported"
                            r"|unknown)|invalid model|no such model|model_not_found",
                            re.IGNORECASE | re.DOTALL)
_CERTIFICATE = re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"
                          r"|self[- ]signed certificate|SSL: ", re.IGNORECASE)


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


def _sizes(text: str) -> dict[str, int]:
    for pattern in _SIZES:
        match = pattern.search(text)
        if match:
            return {f"{k}_tokens" if k != "limit" else "context_limit": int(v)
                    for k, v in match.groupdict().items() if v is not None}
    return {}


def _extra_sizes(body: Any) -> dict[str, int]:
    """llama.cpp's server puts the sizes in fields beside the message."""
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return {}
    out = {}
    if isinstance(error.get("n_prompt_tokens"), int):
        out["input_tokens"] = error["n_prompt_tokens"]
    if isinstance(error.get("n_ctx"), int):
        out["context_limit"] = error["n_ctx"]
    return out


QUOTA_ADVICE = ("The provider says this account is out of credit or quota; add credit or "
                "raise the limit in the provider's billing settings, or configure a fallback "
                "provider (HERMES_FALLBACK_PROVIDERS).")
"""Appended to a quota failure so the user knows what to do (case B23)."""


def classify_response(status: int | None, body: Any, *,
                      headers: Mapping[str, str] | None = None) -> ClassifiedError:
    """Classify an HTTP error answer (or an error event, ``status`` None) by status first,
    then error type/code, then narrow message phrases (defect 5). Rules from hermes-facts §12
    and cases B01, B07, B17, B20, B22, B23, B25, B27; each rule has rows in
    error_cases.json."""
    if isinstance(body, (bytes, str)):
        text_body = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            body = json.loads(text_body)
        except ValueError:
            body = text_body
    etype, code, message = _error_fields(body)
    text = f"{etype} {code} {message}"
    if status in (None, 200):  # an error event in a stream: the body names the kind
        status = _TYPE_STATUS.get(etype) or _TYPE_STATUS.get(code)
    shown = message or etype or f"HTTP {status}"
    hint = parse_retry_after(headers)

    def make(reason: FailoverReason, **hints: Any) -> ClassifiedError:
        return ClassifiedError(reason=reason, message=shown, status=status, **hints)

    if status == 429:  # never an overflow, whatever the body says about tokens (defect 5)
        if _QUOTA.search(text):
            return make(FailoverReason.BILLING, fallback=True, quota=True)
        if etype == "overloaded_error":
            return make(FailoverReason.OVERLOADED, retryable=True, fallback=True,
                        retry_after=hint)
        return make(FailoverReason.RATE_LIMIT, retryable=True, rotate_credential=True,
                    fallback=True, retry_after=hint)
    if status == 402 or etype == "billing_error" or (
            status in (400, 403, None) and _QUOTA.search(text)):
        return make(FailoverReason.BILLING, fallback=True, quota=True)
    limit = _BREAKPOINT_LIMIT.search(text)
    if limit:
        return make(FailoverReason.CACHE_BREAKPOINT_LIMIT, breakpoint_limit=int(limit.group(1)),
                    breakpoints_found=int(limit.group(2)) if limit.group(2) else None)
    if _TTL_CONFLICT.search(text):
        return make(FailoverReason.CACHE_BREAKPOINT_LIMIT, ttl_conflict=True)
    if status == 413 or etype == "request_too_large":
        return make(FailoverReason.PAYLOAD_TOO_LARGE, compress=True)
    if (status is None or status < 500 or etype == "invalid_request_error") and (
            _OVERFLOW.search(text) or code == "1210"):
        return make(FailoverReason.CONTEXT_OVERFLOW, compress=True,
                    **{**_sizes(message or text), **_extra_sizes(body)})
    if _THINKING.search(text):
        return make(FailoverReason.THINKING_SIGNATURE, history_shape=True)
    if status == 401:
        return make(FailoverReason.AUTH, rotate_credential=True, fallback=True)
    if _CONTENT_POLICY.search(text) and (status is None or status < 500):
        return make(FailoverReason.CONTENT_POLICY_BLOCKED, fallback=True)
    if status == 403:
        return make(FailoverReason.AUTH_PERMANENT, fallback=True)
    if status == 404 or (status == 400 and _MODEL_UNKNOWN.search(text)):
        return make(FailoverReason.MODEL_NOT_FOUND, fallback=True)
    if status in (408, 504) or etype == "timeout_error":
        return make(FailoverReason.TIMEOUT, retryable=True, retry_after=hint)
    if status is not None and status >= 500:
        if etype == "invalid_request_error":  # a 5xx whose body is request validation
            return make(FailoverReason.FORMAT_ERROR,
                        history_shape=bool(_HISTORY_SHAPE.search(text)))
        reason = (FailoverReason.OVERLOADED if status in (503, 529)
                  else FailoverReason.SERVER_ERROR)
        return make(reason, retryable=True, fallback=True, retry_after=hint)
    if status == 409:
        return make(FailoverReason.SERVER_ERROR, retryable=True, retry_after=hint)
    if status is not None and 400 <= status < 500:
        return make(FailoverReason.FORMAT_ERROR,
                    history_shape=bool(_HISTORY_SHAPE.search(text)))
    if _HISTORY_SHAPE.search(text):  # status stripped by a router: the body still says
        return make(FailoverReason.FORMAT_ERROR, history_shape=True)
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
        chain = f"{exc} {exc.__cause__ or ''} {exc.__context__ or ''}"
        if _CERTIFICATE.search(chain):  # deterministic: retrying cannot fix a bad certificate
            return ClassifiedError(reason=FailoverReason.CERTIFICATE,
                                   message=f"TLS certificate rejected: {chain.strip()[:300]}",
                                   fallback=True)
        return ClassifiedError(reason=FailoverReason.CONNECTION,
                               message=str(exc) or type(exc).__name__, retryable=True,
                               fallback=True)
    if isinstance(exc, StreamIncomplete):
        return ClassifiedError(reason=FailoverReason.STREAM_INCOMPLETE, message=str(exc),
                               retryable=True)
    return ClassifiedError(reason=FailoverReason.UNKNOWN, message=str(exc) or type(exc).__name__,
                           retryable=True)
