"""Webhook services: create, rotate, delete, and receive a delivery.

``webhook_receive`` is the whole inbound path (issue 12 item 7), in this order:
unknown or disabled token → 404 (nothing logged: there is no webhook to log it on);
body over WEBHOOKS["MAX_BODY_BYTES"] → 413; headers and HMAC signature, then the replay
window (agents/webhook_signature.py) → 400/401; a body that is not UTF-8 JSON → 400;
over the per-webhook rate → 429; a delivery id already accepted, or the same signed
timestamp and body already accepted under any delivery id (a replay of a captured request
with a changed, unsigned X-Hermes-Delivery header: finding F2) → 200 "duplicate" (the
sender's retry is answered, no second turn). Both checks are backed by unique constraints
on the accepted rows, so two copies racing still make one turn. Only then is anything stored beyond the log:
the delivery row and an unattended Turn (origin="webhook") built from the registered scaffold
plus the payload, in one transaction, the turn enqueued on commit.

Every refusal after the token is known is logged as a WebhookDelivery with its reason and
status but never its body; that log is itself bounded per webhook and window
(WEBHOOKS["REJECT_LOG_LIMIT"]) so a flood of garbage cannot fill the database.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from agents.cache import register_stable_prefix
from agents.messages import Message as AgentMessage
from agents.unattended import webhook_message
from agents.webhook_signature import SIGNATURE, Verdict, replay_key, verify
from sessions.models import Session, Turn
from sessions.services import turn_start
from webhooks.models import Webhook, WebhookDelivery

log = logging.getLogger("hermes.webhooks")
HEX_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]+)")
"""A signature in the right form whatever its length: "sha256=deadbeef" was sent, and signed
wrongly (a truncated digest, another hash), rather than missing."""

MAX_INSTRUCTIONS_CHARS = 10_000


@dataclass(frozen=True)
class Reception:
    """What the view answers: ``status`` (HTTP) and a small JSON ``body``."""

    status: int
    body: dict = field(default_factory=dict)


def webhooks_targeting(session: Session) -> list[str]:
    """One sentence per webhook of ``session``, for the session's delete confirmation
    (sessions/hooks.py DeletionHook.describe): it is deleted with the session."""
    return [f"Webhook “{name}” delivers to this session: it will be deleted and its URL "
            "answers 404 from then on."
            for name in Webhook.objects.filter(session=session).order_by("name")
            .values_list("name", flat=True)]


def _new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def webhook_create(*, user, session: Session, name: str, instructions: str = "") -> Webhook:
    """A webhook on ``session`` (which must be the user's own: ValidationError otherwise,
    and for a blank/long name or over-long instructions). The secret is on the returned
    row; show it to the owner once."""
    name = (name or "").strip()
    errors = {}
    if session.owner_id != user.pk:
        errors["session"] = "Only the session's owner can add a webhook."
    if not name:
        errors["name"] = "Give the webhook a name."
    elif len(name) > 100:
        errors["name"] = "A name can be at most 100 characters."
    if len(instructions or "") > MAX_INSTRUCTIONS_CHARS:
        errors["instructions"] = f"At most {MAX_INSTRUCTIONS_CHARS:,} characters."
    if errors:
        raise ValidationError(errors)
    return Webhook.objects.create(session=session, name=name,
                                  instructions=(instructions or "").strip(),
                                  token=secrets.token_urlsafe(24), secret=_new_secret())


def webhook_rotate(*, webhook: Webhook) -> Webhook:
    """Replace the secret (the old one stops verifying at once). Returns the row with the
    new secret."""
    webhook.secret = _new_secret()
    webhook.rotated_at = timezone.now()
    webhook.save(update_fields=["secret", "rotated_at"])
    return webhook


def webhook_delete(*, webhook: Webhook) -> None:
    """Delete the webhook and its delivery log (turns it made stay in the session)."""
    webhook.delete()


def _window_count(key: str, window: int) -> int:
    """Increment and return a fixed-window counter in the cache (Redis in services mode,
    so every process shares it). Keyed by the webhook's random token, never its row id, so a
    recreated database can never inherit another webhook's count."""
    slot = f"{key}:{int(timezone.now().timestamp()) // window}"
    cache.add(slot, 0, timeout=window * 2)
    try:
        return cache.incr(slot)
    except ValueError:  # evicted between add and incr
        cache.set(slot, 1, timeout=window * 2)
        return 1


def _refuse(hook: Webhook, status: int, reason: str, *, delivery_id: str, size: int,
            outcome: str = WebhookDelivery.Outcome.REJECTED) -> Reception:
    conf = settings.WEBHOOKS
    if _window_count(f"webhook-rejects:{hook.token}", conf["RATE_WINDOW_SECONDS"]) <= \
            conf["REJECT_LOG_LIMIT"]:
        WebhookDelivery.objects.create(webhook=hook, delivery_id=delivery_id[:100],
                                       outcome=outcome, status_code=status,
                                       reason=reason[:200], body_bytes=size)
    else:
        log.warning("webhook %s: refusal not logged (log limit): %s", hook.pk, reason)
    return Reception(status, {"ok": False, "error": reason})


def _signature_verdict(verdict: Verdict, signature: str | None) -> Verdict:
    """``verdict``, with a clearer reason when the signature was refused for its form but is
    ``sha256=`` and hex of the wrong length: it is there and does not match, so "missing or
    malformed" would send the sender looking for a header they did send. Only the reason
    changes (status 401, nothing accepted)."""
    value = (signature or "").strip()
    if verdict.ok or verdict.status != 401 or SIGNATURE.fullmatch(value):
        return verdict  # accepted, a header before it refused, or checked against the HMAC
    match = HEX_SIGNATURE.fullmatch(value)
    if match is None:
        return verdict
    return Verdict(False, 401, "signature does not match: X-Hermes-Signature must be "
                               "sha256= and 64 hex digits (HMAC-SHA256); this one has "
                               f"{len(match.group(1))}")


def webhook_receive(*, token: str, headers, body: bytes, now: float | None = None,
                    declared_length: int | None = None) -> Reception:
    """Handle one inbound request (order and outcomes in the module docstring).
    ``headers``: a mapping with case-insensitive lookup (request.headers);
    ``declared_length``: the Content-Length, checked before the body is trusted."""
    conf = settings.WEBHOOKS
    hook = (Webhook.objects.select_related("session").filter(token=token, enabled=True)
            .first() if token else None)
    if hook is None:
        return Reception(404, {"ok": False, "error": "no such webhook"})
    delivery_id = (headers.get("X-Hermes-Delivery") or "").strip()
    size = max(len(body), declared_length or 0)
    if size > conf["MAX_BODY_BYTES"]:
        return _refuse(hook, 413, f"body is {size:,} bytes; the limit is "
                                  f"{conf['MAX_BODY_BYTES']:,}", delivery_id=delivery_id,
                       size=size)
    verdict = verify(secret=hook.secret, timestamp=headers.get("X-Hermes-Timestamp"),
                     signature=headers.get("X-Hermes-Signature"), delivery_id=delivery_id,
                     body=body, now=timezone.now().timestamp() if now is None else now,
                     window=conf["REPLAY_WINDOW_SECONDS"])
    verdict = _signature_verdict(verdict, headers.get("X-Hermes-Signature"))
    if not verdict.ok:
        return _refuse(hook, verdict.status, verdict.reason, delivery_id=delivery_id, size=size)
    try:
        payload = body.decode("utf-8")
        json.loads(payload)
    except (UnicodeDecodeError, ValueError):
        return _refuse(hook, 400, "body is not UTF-8 JSON", delivery_id=delivery_id, size=size)
    # Only now, the signature checked: the key names bytes the secret's holder signed.
    key = replay_key(headers.get("X-Hermes-Timestamp"), body)
    if WebhookDelivery.objects.filter(Q(delivery_id=delivery_id) | Q(replay_key=key),
                                      webhook=hook,
                                      outcome=WebhookDelivery.Outcome.ACCEPTED).exists():
        return _duplicate(hook, delivery_id, size)
    if _window_count(f"webhook-rate:{hook.token}", conf["RATE_WINDOW_SECONDS"]) > \
            conf["RATE_LIMIT"]:
        return _refuse(hook, 429, f"more than {conf['RATE_LIMIT']} deliveries in "
                                  f"{conf['RATE_WINDOW_SECONDS']} s", delivery_id=delivery_id,
                       size=size, outcome=WebhookDelivery.Outcome.RATE_LIMITED)
    built = webhook_message(name=hook.name, instructions=hook.instructions,
                            delivery_id=delivery_id, payload=payload,
                            received_at=timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
    try:
        with transaction.atomic():
            delivery = WebhookDelivery.objects.create(
                webhook=hook, delivery_id=delivery_id, replay_key=key,
                outcome=WebhookDelivery.Outcome.ACCEPTED, status_code=202, body_bytes=size, message_text=built.text,
                stable_chars=built.stable_len)
            turn = turn_start(session=hook.session, user=hook.session.owner,
                              text=built.display, origin="webhook")
            delivery.turn = turn
            delivery.save(update_fields=["turn"])
    except IntegrityError:  # the same id or the same signed bytes accepted concurrently
        return _duplicate(hook, delivery_id, size)
    except ValidationError as exc:
        return _refuse(hook, 422, "; ".join(exc.messages), delivery_id=delivery_id, size=size)
    return Reception(202, {"ok": True, "delivery": delivery_id, "turn_id": turn.pk})


def _duplicate(hook: Webhook, delivery_id: str, size: int) -> Reception:
    """A retry (or replay inside the window, under any delivery id) of an accepted
    delivery: answered 200 so the sender stops retrying, logged through the same bounded log
    as refusals."""
    _refuse(hook, 200, "already accepted; no new turn", delivery_id=delivery_id, size=size,
            outcome=WebhookDelivery.Outcome.DUPLICATE)
    return Reception(200, {"ok": True, "duplicate": True, "delivery": delivery_id})


def webhook_turn_input(turn: Turn) -> AgentMessage | None:
    """The user message of a webhook turn (sessions/inputs.py hook): the delivery's stored
    text, its scaffold re-registered in this process, the scaffold length stored."""
    delivery = WebhookDelivery.objects.filter(turn=turn).first()
    if delivery is None or not delivery.message_text:
        return None
    if delivery.stable_chars:
        register_stable_prefix(delivery.message_text[:delivery.stable_chars])
    return AgentMessage(role="user", content=turn.input_text,
                        sent_content=delivery.message_text,
                        stable_prefix_len=delivery.stable_chars)
