"""Cache markers as both wire shapes spell them (Anthropic Messages, and chat-completions
envelopes that carry Anthropic's ``cache_control`` on content parts)."""

from __future__ import annotations

from agents.messages import Breakpoint, Message


def cache_control(ttl: str) -> dict[str, str]:
    """The marker for one breakpoint: 5m is the default TTL, so only 1h is spelled out
    (Anthropic prompt caching docs)."""
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def scaffold_split(message: Message, mark: Breakpoint | None) -> int | None:
    """The char offset where a user message splits into [scaffold, tail]: its
    ``stable_prefix_len`` (stored, so the same on every request), else the planner's
    ``split_at``; None when either part would be blank (the API rejects blank blocks)."""
    split = message.stable_prefix_len
    if split is None and mark is not None:
        split = mark.split_at
    text = message.wire_text
    if split is None or not 0 < split < len(text):
        return None
    return split if text[:split].strip() and text[split:].strip() else None
