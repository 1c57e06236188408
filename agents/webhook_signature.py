"""Inbound webhook authentication: HMAC-SHA256 over timestamp and body, and a replay window.

The sender signs ``f"{timestamp}.".encode() + body`` with the webhook's secret and sends

    X-Hermes-Timestamp: <unix seconds>
    X-Hermes-Signature: sha256=<hex digest>
    X-Hermes-Delivery:  <an id unique per delivery, 1-100 chars of [A-Za-z0-9._:-]>

(the Stripe/Slack scheme: the timestamp is inside the signed bytes, so a captured request
cannot be replayed later with a fresh timestamp). The digest is compared with
``hmac.compare_digest`` (constant time). A timestamp more than ``window`` seconds from now, in
either direction, is refused.

Within the window the caller dedupes on two keys: the delivery id (a sender's retry) and
``replay_key`` (a digest of the signed bytes). The delivery id is NOT signed, so it alone
cannot stop a replay: a captured request re-sent with a new X-Hermes-Delivery header would
verify (security finding F2). The replay key covers exactly what the signature covers, so a
captured request, whatever its unsigned headers say, maps to the same key and is run at most
once; the caller must keep keys at least ``window`` seconds (both directions: 2 x window is
the span a timestamp stays acceptable). Consequence for senders: two deliveries with the same
timestamp second and byte-identical body are one delivery; put an event id in the body.
Pure: no clock, no storage; the caller passes ``now`` and does the dedupe.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

REPLAY_WINDOW_SECONDS = 300
"""Five minutes either side of now: the common choice (Stripe, Slack) and well inside the
memory of delivery ids and replay keys, which the delivery log keeps for good."""

DELIVERY_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")
SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")


@dataclass(frozen=True, slots=True)
class Verdict:
    """``ok`` or the reason and the HTTP status to answer with (400 malformed headers,
    401 bad signature or stale timestamp)."""

    ok: bool
    status: int = 200
    reason: str = ""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Hermes-Signature header value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def replay_key(timestamp: str, body: bytes) -> str:
    """The dedupe key of one signed request: hex SHA-256 (64 chars) of the bytes the
    signature covers, ``timestamp + "." + body``. Equal for every copy of a captured request,
    whatever unsigned headers (X-Hermes-Delivery) were changed; different when the timestamp
    or any body byte differs (which breaks the signature anyway). Call it only after
    ``verify`` passed, so the key names a request the secret's holder sent."""
    return hashlib.sha256(timestamp.encode() + b"." + body).hexdigest()


def verify(*, secret: str, timestamp: str | None, signature: str | None,
           delivery_id: str | None, body: bytes, now: float,
           window: int = REPLAY_WINDOW_SECONDS) -> Verdict:
    """Check one delivery's headers against ``secret``; the order is headers, signature,
    then freshness (the timestamp is only trusted once the signature covers it)."""
    if not delivery_id or not DELIVERY_ID.fullmatch(delivery_id):
        return Verdict(False, 400, "missing or malformed X-Hermes-Delivery header")
    if not timestamp or not timestamp.isdigit() or len(timestamp) > 12:
        return Verdict(False, 400, "missing or malformed X-Hermes-Timestamp header "
                                   "(unix seconds)")
    match = SIGNATURE.fullmatch(signature or "")
    if match is None:
        return Verdict(False, 401, "missing or malformed X-Hermes-Signature header "
                                   "(sha256=<hex>)")
    expected = sign(secret, timestamp, body)[len("sha256="):]
    if not hmac.compare_digest(expected, match.group(1).lower()):
        return Verdict(False, 401, "signature does not match")
    if abs(now - int(timestamp)) > window:
        return Verdict(False, 401, f"timestamp outside the {window} s replay window")
    return Verdict(True)
