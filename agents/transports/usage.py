"""Usage normalisation: each provider's usage object → agents.messages.Usage.

Providers disagree on what "input" means: Anthropic reports input EXCLUSIVE of cache reads
and writes; OpenAI-style ``prompt_tokens`` INCLUDES the cached part. Normalising once, here,
into four disjoint buckets makes double-charging a cached token impossible downstream
(seed, "The struct that makes cost accounting possible"; hermes-facts §13; case B28).

Not here: prices and cost (pricing belongs to the accounting side), and estimation when a
provider sent no usage (agents/context/tokens.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.messages import Usage


def _count(value: Any) -> int:
    """A token count from a usage field; None, missing or junk count as 0."""
    return value if isinstance(value, int) and value > 0 else 0


def usage_from_anthropic(raw: Mapping[str, Any]) -> Usage:
    """Normalise an Anthropic Messages ``usage`` object (tokens).

    ``input_tokens`` is already uncached-only; ``cache_read_input_tokens`` → cache read;
    ``cache_creation_input_tokens`` → cache write, split by TTL with
    ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``. When the
    split is absent (older APIs, proxies) the whole write counts as 5m; a split that sums to
    less than the total puts the remainder in 5m.
    """
    write_total = _count(raw.get("cache_creation_input_tokens"))
    split = raw.get("cache_creation")
    write_1h = _count(split.get("ephemeral_1h_input_tokens")) if isinstance(split, Mapping) else 0
    write_5m = _count(split.get("ephemeral_5m_input_tokens")) if isinstance(split, Mapping) else 0
    write_5m += max(0, write_total - write_5m - write_1h)
    return Usage(
        input_tokens=_count(raw.get("input_tokens")),
        output_tokens=_count(raw.get("output_tokens")),
        cache_read_tokens=_count(raw.get("cache_read_input_tokens")),
        cache_write_5m_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
        raw=dict(raw),
    )


def merge_anthropic_stream_usage(start: Mapping[str, Any],
                                 delta: Mapping[str, Any]) -> dict[str, Any]:
    """Combine ``message_start.message.usage`` with the last ``message_delta.usage``.

    The delta's counts are cumulative, so a non-null delta field replaces the start's; null
    fields keep the start's value. Streaming and non-streaming runs of one request then
    normalise identically (case B28).
    """
    merged = dict(start)
    merged.update({k: v for k, v in delta.items() if v is not None})
    return merged


def usage_from_openai(raw: Mapping[str, Any]) -> Usage:
    """Normalise an OpenAI chat-completions ``usage`` object (tokens).

    ``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens`` (and, on routes that
    report it, ``prompt_tokens_details.cache_write_tokens``), so both are subtracted to get
    uncached input. ``completion_tokens`` is output (reasoning included);
    ``completion_tokens_details.reasoning_tokens`` is kept as its breakdown. OpenAI-style
    routes have no TTL tiers: writes count as 5m.
    """
    details = raw.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    cached = _count(details.get("cached_tokens"))
    written = _count(details.get("cache_write_tokens"))
    completion = raw.get("completion_tokens_details")
    reasoning = (_count(completion.get("reasoning_tokens"))
                 if isinstance(completion, Mapping) else 0)
    return Usage(
        input_tokens=max(0, _count(raw.get("prompt_tokens")) - cached - written),
        output_tokens=_count(raw.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_write_5m_tokens=written,
        reasoning_tokens=reasoning,
        raw=dict(raw),
    )
