"""Token estimates and their calibration against billed usage.

Every context gate (prune, compaction, the breaker's verdict) is downstream of one number: how
large the next request will be. This module computes a rough, script-aware estimate over the
exact wire payload a transport would send, and a ``Calibrator`` that corrects it with the
provider's billed prompt count (seed, "The number that fires all of this is wrong";
hermes-facts §4 "Token estimator" and "Calibration baseline").

What does not belong here: deciding *what* to compact or prune (agents/context/compaction.py,
agents/context/prune.py), the breaker's verdict (agents/context/breaker.py), and any storage. The Django side
persists ``Calibrator.to_dict()`` in ``Session.usage_anchor``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.messages import Message, ToolSpec, common_prefix

# Per-character token weights, per tokenizer family and script (case B13). Sources:
# - ASCII: hermes-facts §4, rough tokens = ceil(chars / 4), for every family (prose runs at
#   ~0.21/char on both tokenizers, so this over-counts English ~1.2x, on the safe side).
# - Fullwidth ASCII forms (U+FF01..FF5E): case B13 pins estimate("ＡＢＣ１２３") == 2.
# - Every other script: fitted on tests/agents/corpus/scripts.json against the real
#   cl100k_base and o200k_base tokenizers (bpe-openai, vocabularies bundled), with a 5%
#   deliberate over-count so compaction fires before the provider refuses; the per-script
#   test holds each within ±20%. "cl100k" is the default and the proxy for Anthropic's
#   tokenizer (not published; its CJK density is close to cl100k's); "o200k" is OpenAI's
#   gpt-4o / 4.1 family, about 1.5x denser on CJK and 3-4x on Devanagari, Arabic and Thai.
#   Calibration against billed usage (Calibrator below) corrects the rest per session.
# - Unknown scripts: UTF-8 bytes / 4 (B13's "other non-Latin text by UTF-8 bytes").
ASCII_TOKENS_PER_CHAR = 0.25
OTHER_TOKENS_PER_UTF8_BYTE = 0.25
JOINER_TOKENS = 1.0
"""U+FE0F (emoji presentation) and U+200D (zero-width joiner): about one token each."""
SCRIPT_WEIGHTS: dict[str, dict[str, float]] = {
    "cl100k": {"han": 1.22, "kana": 1.17, "hangul": 1.42, "emoji": 2.84, "cyrillic": 0.54,
               "arabic": 0.83, "devanagari": 1.26, "thai": 0.98},
    "o200k": {"han": 0.82, "kana": 0.82, "hangul": 0.81, "emoji": 1.89, "cyrillic": 0.27,
              "arabic": 0.31, "devanagari": 0.28, "thai": 0.41},
}
"""Tokens per character by tokenizer family and script (see the comment above)."""
DEFAULT_FAMILY = "cl100k"
IMAGE_TOKENS = 1_600
"""Flat cost of one image block (hermes-facts §4: 1,600 in the code)."""

SKIPPED_KEYS = frozenset({"signature", "encrypted_content", "cache_control"})
"""Wire keys whose values are not priced as prompt text: thinking signatures and encrypted
reasoning blobs (seed: replay blobs overstate the estimate several times) and cache markers
(so moving a breakpoint never changes the estimate)."""

PAYLOAD_KEYS = ("system", "tools", "messages")
"""The parts of a request body that are prompt tokens; model, max_tokens, stream are not."""

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _script(cp: int) -> str | None:
    if (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF
            or 0x20000 <= cp <= 0x2FA1F or 0x3000 <= cp <= 0x303F or 0xFF00 <= cp <= 0xFF65):
        return "han"  # ideographs and CJK punctuation
    if 0x3040 <= cp <= 0x30FF or 0x31F0 <= cp <= 0x31FF or 0xFF66 <= cp <= 0xFF9F:
        return "kana"
    if 0xAC00 <= cp <= 0xD7AF or 0x1100 <= cp <= 0x11FF or 0x3130 <= cp <= 0x318F:
        return "hangul"
    if (0x1F000 <= cp <= 0x1FAFF or 0x2600 <= cp <= 0x27BF or 0x2B00 <= cp <= 0x2BFF
            or 0x2300 <= cp <= 0x23FF):
        return "emoji"
    if 0x0400 <= cp <= 0x052F:
        return "cyrillic"
    if 0x0600 <= cp <= 0x06FF or 0x0750 <= cp <= 0x077F:
        return "arabic"
    if 0x0900 <= cp <= 0x097F:
        return "devanagari"
    if 0x0E00 <= cp <= 0x0E7F:
        return "thai"
    return None


def _char_weight(ch: str, weights: dict[str, float]) -> float:
    cp = ord(ch)
    if 0xFF01 <= cp <= 0xFF5E:
        return ASCII_TOKENS_PER_CHAR
    if cp in (0xFE0F, 0x200D):
        return JOINER_TOKENS
    script = _script(cp)
    if script is not None:
        return weights[script]
    return len(ch.encode("utf-8")) * OTHER_TOKENS_PER_UTF8_BYTE


def _text_weight(text: str, family: str = DEFAULT_FAMILY) -> float:
    if text.isascii():
        return len(text) * ASCII_TOKENS_PER_CHAR
    weights = SCRIPT_WEIGHTS.get(family, SCRIPT_WEIGHTS[DEFAULT_FAMILY])
    non_ascii = 0
    weight = 0.0
    for run in _NON_ASCII.findall(text):
        non_ascii += len(run)
        weight += sum(_char_weight(ch, weights) for ch in run)
    return (len(text) - non_ascii) * ASCII_TOKENS_PER_CHAR + weight


def estimate_text_tokens(text: str, family: str = DEFAULT_FAMILY) -> int:
    """Rough tokens for ``text`` under tokenizer ``family`` ("cl100k" or "o200k"; unknown
    names use the default): ceil of the summed per-character weights (SCRIPT_WEIGHTS).
    ``estimate_text_tokens("ABC123") == 2`` (B13)."""
    return math.ceil(_text_weight(text, family))


def _strip(value: Any, images: list[int]) -> Any:
    """A copy of a wire value without unpriced keys; image blocks are counted and removed."""
    if isinstance(value, dict):
        kind = value.get("type")
        if kind in ("image", "image_url", "input_image"):
            images.append(1)
            return None
        if kind == "redacted_thinking":
            return {"type": kind}
        return {k: _strip(v, images) for k, v in value.items() if k not in SKIPPED_KEYS}
    if isinstance(value, list):
        kept = (_strip(v, images) for v in value)
        return [v for v in kept if v is not None]
    return value


def estimate_payload_tokens(payload: dict[str, Any], family: str = DEFAULT_FAMILY) -> int:
    """Rough prompt tokens of a transport's wire body (``Transport.build_payload``).

    Measures the compact JSON of ``system``, ``tools`` and ``messages`` (keys and punctuation
    included: they are the per-message envelope), leaving out thinking signatures, encrypted
    reasoning blobs, redacted-thinking data and cache markers; each image block counts
    ``IMAGE_TOKENS``. Works for both Anthropic and OpenAI shapes. Returns tokens (int >= 0).
    """
    images: list[int] = []
    parts = {k: _strip(payload[k], images) for k in PAYLOAD_KEYS if payload.get(k)}
    text = json.dumps(parts, ensure_ascii=False, separators=(",", ":")) if parts else ""
    return estimate_text_tokens(text, family) + IMAGE_TOKENS * len(images)


def estimate_message_tokens(message: Message) -> int:
    """Rough tokens of one transcript message as replayed: its wire text, tool-call names and
    arguments, plus a 10-token envelope (hermes-facts §4: +10 overhead per message).
    Reasoning is never replayed, so it is not counted."""
    weight = _text_weight(message.wire_text)
    for call in message.tool_calls:
        # Arguments are the raw JSON text; a row written by older code may hold the object.
        arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(
            call.arguments, ensure_ascii=False, separators=(",", ":"))
        weight += _text_weight(call.name) + _text_weight(arguments) + 4
    return math.ceil(weight) + 10


def prefix_fingerprint(*, system: str, tools: Iterable[ToolSpec], messages: Sequence[Message],
                       route: str = "") -> str:
    """sha256 hex over the priced prefix: route (model/provider), system prompt, tool schemas
    and the replayed fields of ``messages`` (role, wire text, tool_call_id, tool calls), as in
    hermes' usage anchor (hermes-facts §4). Reasoning and display-only content are excluded."""
    digest = hashlib.sha256()
    head = {"route": route, "system": system,
            "tools": [[t.name, t.description, t.input_schema] for t in tools]}
    digest.update(json.dumps(head, sort_keys=True, ensure_ascii=False).encode())
    for m in messages:
        row = [m.role, m.wire_text, m.tool_call_id, [c.to_dict() for c in m.tool_calls]]
        digest.update(b"\x1e" + json.dumps(row, ensure_ascii=False).encode())
    return digest.hexdigest()


class PrefixFingerprinter:
    """``prefix_fingerprint`` computed incrementally: the same hex digest, but a transcript
    that only grew since the last call costs only its new messages (the digest state after
    each message is kept). Messages are matched by value (agents.messages.common_prefix,
    identity first), so an edited or replaced message restarts from the first difference.
    Not thread-safe (one per pipeline)."""

    def __init__(self, *, system: str, tools: Iterable[ToolSpec], route: str = ""):
        head = {"route": route, "system": system,
                "tools": [[t.name, t.description, t.input_schema] for t in tools]}
        first = hashlib.sha256()
        first.update(json.dumps(head, sort_keys=True, ensure_ascii=False).encode())
        self._messages: list[Message] = []
        self._states = [first]

    def fingerprint(self, messages: Sequence[Message]) -> str:
        """The fingerprint of system + tools + ``messages`` (equal to prefix_fingerprint)."""
        keep = common_prefix(messages, self._messages)
        if keep == len(messages):  # a prefix of what was fingerprinted: nothing to redo
            return self._states[keep].hexdigest()
        del self._messages[keep:]
        del self._states[keep + 1:]
        for m in messages[keep:]:
            state = self._states[-1].copy()
            row = [m.role, m.wire_text, m.tool_call_id, [c.to_dict() for c in m.tool_calls]]
            state.update(b"\x1e" + json.dumps(row, ensure_ascii=False).encode())
            self._messages.append(m)
            self._states.append(state)
        return self._states[len(messages)].hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageAnchor:
    """One calibration pair: the rough estimate of a request and the prompt tokens the
    provider billed for it. ``fingerprint``: ``prefix_fingerprint`` of what was priced;
    ``message_count``: how many transcript messages that prefix held (so a resume can
    re-fingerprint the same span); ``created``: epoch seconds, for diagnostics only."""

    rough: int
    billed: int
    fingerprint: str
    message_count: int
    created: float

    def to_dict(self) -> dict[str, Any]:
        return {"rough": self.rough, "billed": self.billed, "fingerprint": self.fingerprint,
                "message_count": self.message_count, "created": self.created}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UsageAnchor:
        return cls(rough=int(data["rough"]), billed=int(data["billed"]),
                   fingerprint=str(data["fingerprint"]),
                   message_count=int(data["message_count"]), created=float(data["created"]))


class Calibrator:
    """Rough-vs-billed calibration for one session (seed pseudo-code, "fire on the projection").

    Use per provider call: ``before_call(rough, fingerprint, message_count)`` with the
    estimate of the exact payload, then ``after_response(billed)`` with
    ``Usage.prompt_tokens`` (None when the provider sent no usage) or ``after_error()``.

    - Every response whose billed count is under ``threshold`` re-anchors the baseline.
    - Backstop 1: a billed count at or over ``threshold`` clears the baseline and sets
      ``over_threshold`` so ``should_compact`` is true until ``on_compacted()``.
    - Backstop 2 (a provider overflow error) is the classifier's ``compress`` hint
      (agents/transports/errors.py); the caller compacts.
    ``threshold`` is in tokens (compaction.compaction_threshold). ``clock`` gives epoch seconds.
    """

    def __init__(self, *, threshold: int, anchor: UsageAnchor | None = None,
                 clock: Callable[[], float] = time.time):
        self.threshold = threshold
        self.anchor = anchor
        self.over_threshold = False
        self._clock = clock
        self._pending: tuple[int, str, int] | None = None

    def projected(self, rough_now: int) -> int:
        """billed_baseline + max(0, rough_now - rough_baseline); ``rough_now`` without one."""
        if self.anchor is None:
            return rough_now
        return self.anchor.billed + max(0, rough_now - self.anchor.rough)

    def should_compact(self, rough_now: int) -> bool:
        """True when the projection reaches the threshold or the last bill was over it."""
        return self.over_threshold or self.projected(rough_now) >= self.threshold

    def before_call(self, *, rough: int, fingerprint: str, message_count: int) -> None:
        """Record the estimate of the payload about to be sent (tokens)."""
        self._pending = (rough, fingerprint, message_count)

    def after_error(self) -> None:
        """The call failed: the pending estimate pairs with nothing."""
        self._pending = None

    def after_response(self, billed_prompt_tokens: int | None) -> UsageAnchor | None:
        """Pair the pending estimate with the billed prompt tokens. Returns the new anchor when
        the prompt fit, else None (no usage, nothing pending, or the backstop fired)."""
        pending, self._pending = self._pending, None
        if pending is None or billed_prompt_tokens is None:
            return None
        if billed_prompt_tokens >= self.threshold:
            self.anchor = None
            self.over_threshold = True
            return None
        rough, fingerprint, count = pending
        self.anchor = UsageAnchor(rough=rough, billed=billed_prompt_tokens,
                                  fingerprint=fingerprint, message_count=count,
                                  created=self._clock())
        self.over_threshold = False
        return self.anchor

    def on_compacted(self) -> None:
        """A compaction or prune rewrote the prefix: the old pair no longer describes it."""
        self.anchor = None
        self.over_threshold = False
        self._pending = None

    def to_dict(self) -> dict[str, Any]:
        """JSON for ``Session.usage_anchor`` (empty anchor → {"anchor": None})."""
        return {"anchor": self.anchor.to_dict() if self.anchor else None,
                "over_threshold": self.over_threshold}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, threshold: int,
                  current_fingerprint: Callable[[int], str],
                  clock: Callable[[], float] = time.time) -> Calibrator:
        """Restore from ``to_dict`` output. ``current_fingerprint(n)`` must return the
        fingerprint of the live prefix with the first ``n`` messages; the anchor is kept only
        when it equals the stored one (hermes-facts §4: restored only if fingerprints match).
        """
        calibrator = cls(threshold=threshold, clock=clock)
        raw = (data or {}).get("anchor")
        if raw:
            anchor = UsageAnchor.from_dict(raw)
            if current_fingerprint(anchor.message_count) == anchor.fingerprint:
                calibrator.anchor = anchor
        calibrator.over_threshold = bool((data or {}).get("over_threshold", False))
        return calibrator
