"""Fault injection: a FIFO of failures the simulator answers instead of (or inside) a reply,
and the providers' error bodies.

Each request consumes at most one fault, the first queued one whose ``endpoint`` matches.
HTTP-status faults become the real error body of the endpoint's API; stream faults
("stream_cut", "stream_error") are carried out by the API modules while streaming. Which SDK
exception each one surfaces as is listed in /work/shared/reference/sdk-notes.md.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

Endpoint = Literal["anthropic", "openai"]
FAULT_KINDS = ("rate_limit", "overloaded", "server_error", "auth", "prompt_too_long",
               "stream_cut", "stream_error", "bad_request", "quota", "refusal", "no_usage")
"""``bad_request``: an HTTP error (``status``, default 400) with ``message`` as the body's
message (history-shape, content-policy, unknown-model bodies...). ``quota``: billing /
quota exhaustion (Anthropic 400 credit balance; OpenAI 429 insufficient_quota).
``refusal``: HTTP 200 whose reply is a refusal (Anthropic ``stop_reason: "refusal"`` with no
content; OpenAI ``message.refusal``), billed as usual (case B27). ``no_usage``: an OpenAI
stream that ends without its usage chunk even when ``include_usage`` was asked (B28)."""
STREAM_KINDS = ("stream_cut", "stream_error", "refusal", "no_usage")
"""Faults carried out by the API modules while answering (not as an HTTP error)."""

# kind -> (anthropic status, anthropic type, openai status, openai type, openai code, message)
_HTTP_FAULTS: dict[str, tuple[int, str, int, str, str | None, str]] = {
    "rate_limit": (429, "rate_limit_error", 429, "requests", "rate_limit_exceeded",
                   "Number of request tokens has exceeded your per-minute rate limit "
                   "(simulated)"),
    "overloaded": (529, "overloaded_error", 503, "server_error", None, "Overloaded"),
    "server_error": (500, "api_error", 500, "server_error", None, "Internal server error"),
    "auth": (401, "authentication_error", 401, "invalid_request_error", "invalid_api_key",
             "invalid x-api-key"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One injected failure.

    - ``kind``: one of FAULT_KINDS.
    - ``endpoint``: "anthropic" or "openai" to fire only there; None for either.
    - ``retry_after`` / ``retry_after_ms``: header values sent with it (strings, seconds /
      milliseconds or an HTTP date), for 429 and 529.
    - ``message`` / ``error_type`` / ``code``: override the body (e.g. error_type
      "insufficient_quota" for a non-retryable OpenAI 429).
    - ``after_events``: for "stream_cut", how many argument deltas of the tool call are sent
      before the connection is closed; for "stream_error", how many text deltas precede the
      error event.
    - ``prompt_tokens``: for "prompt_too_long", the token count to report (default: the
      context window plus 5,310).
    - ``status``: for "bad_request", the HTTP status (default 400).
    - ``api_key`` / ``model``: fire only on requests made with this key / for this model
      (credential rotation and model fallback tests).
    """

    kind: str
    endpoint: Endpoint | None = None
    retry_after: str | None = None
    retry_after_ms: str | None = None
    message: str | None = None
    error_type: str | None = None
    code: str | None = None
    after_events: int = 2
    prompt_tokens: int | None = None
    status: int | None = None
    api_key: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fault:
        """Build from the /_sim/faults JSON body. Raises ValueError/TypeError on bad input."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("retry_after", "retry_after_ms"):
            if known.get(key) is not None:
                known[key] = str(known[key])
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def headers(self) -> dict[str, str]:
        out = {}
        if self.retry_after is not None:
            out["retry-after"] = self.retry_after
        if self.retry_after_ms is not None:
            out["retry-after-ms"] = self.retry_after_ms
        return out


@dataclass(slots=True)
class FaultQueue:
    """Thread-safe FIFO of faults; ``take`` pops the first one matching the endpoint."""

    _items: deque[Fault] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def push(self, fault: Fault) -> None:
        with self._lock:
            self._items.append(fault)

    def take(self, endpoint: Endpoint, *, api_key: str | None = None,
             model: str | None = None) -> Fault | None:
        with self._lock:
            for fault in self._items:
                if (fault.endpoint in (None, endpoint)
                        and fault.api_key in (None, api_key) and fault.model in (None, model)):
                    self._items.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def pending(self) -> list[Fault]:
        with self._lock:
            return list(self._items)


def anthropic_error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    """The Messages API error envelope."""
    return {"type": "error", "error": {"type": error_type, "message": message},
            "request_id": request_id}


def openai_error_body(message: str, error_type: str, param: str | None,
                      code: str | None) -> dict[str, Any]:
    """The OpenAI error envelope."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def http_fault(fault: Fault, endpoint: Endpoint, request_id: str,
               window: int) -> tuple[int, dict[str, str], dict[str, Any]] | None:
    """(status, headers, body) for a fault answered as an HTTP error, or None when the fault
    acts on the stream instead (stream_cut, and stream_error on a streaming request is left to
    the caller)."""
    if fault.kind == "prompt_too_long":
        tokens = fault.prompt_tokens if fault.prompt_tokens is not None else window + 5310
        if endpoint == "anthropic":
            message = fault.message or f"prompt is too long: {tokens} tokens > {window} maximum"
            return 400, {}, anthropic_error_body("invalid_request_error", message, request_id)
        message = fault.message or (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages.")
        return 400, {}, openai_error_body(message, "invalid_request_error", "messages",
                                          fault.code or "context_length_exceeded")
    if fault.kind == "bad_request":
        status = fault.status or 400
        message = fault.message or "Bad request (simulated)"
        if endpoint == "anthropic":
            return status, fault.headers(), anthropic_error_body(
                fault.error_type or "invalid_request_error", message, request_id)
        return status, fault.headers(), openai_error_body(
            message, fault.error_type or "invalid_request_error", None, fault.code)
    if fault.kind == "quota":
        if endpoint == "anthropic":
            return 400, {}, anthropic_error_body(
                "invalid_request_error", fault.message or (
                    "Your credit balance is too low to access the Anthropic API. Please go to "
                    "Plans & Billing to upgrade or purchase credits."), request_id)
        return 429, fault.headers(), openai_error_body(
            fault.message or "You exceeded your current quota, please check your plan and "
                             "billing details.", "insufficient_quota", None, "insufficient_quota")
    if fault.kind in ("refusal", "no_usage"):
        return None
    kind = "overloaded" if fault.kind == "stream_error" else fault.kind
    if kind not in _HTTP_FAULTS:
        return None
    a_status, a_type, o_status, o_type, o_code, message = _HTTP_FAULTS[kind]
    message = fault.message or message
    if endpoint == "anthropic":
        return a_status, fault.headers(), anthropic_error_body(
            fault.error_type or a_type, message, request_id)
    return o_status, fault.headers(), openai_error_body(
        message, fault.error_type or o_type, None, fault.code or o_code)
