"""Serialise a request body into the canonical prefix blocks the prompt cache hashes.

Order is tools → system → messages, one unit per tool definition, per system block and per
message content block (Anthropic prompt-caching docs). Each unit's bytes are canonical JSON
(sorted keys, no whitespace) of the block without its ``cache_control`` marker, plus its role
and whether it opens a message, so moving a breakpoint never changes a prefix but any byte
change in the content does. Token costs come from ``simulator.tokenizer``. Validation
is not done here (``simulator.validation`` runs first).
"""

from __future__ import annotations

import json
from typing import Any

from simulator.cache import CacheBlock
from simulator.tokenizer import count_tokens

MESSAGE_OVERHEAD_TOKENS = 4
"""Role framing billed once per message (on its first block)."""
TOOL_BLOCK_OVERHEAD_TOKENS = 3
"""Framing of a tool_use / tool_result block beyond its payload."""
IMAGE_TOKENS = 1600
"""Flat cost of an image block (a ~1.2 megapixel image is about 1,600 tokens)."""


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, compact separators, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _strip_marker(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _ttl(block: dict[str, Any]) -> str | None:
    marker = block.get("cache_control")
    if not isinstance(marker, dict):
        return None
    return "1h" if marker.get("ttl") == "1h" else "5m"


def content_text(content: Any) -> str:
    """The text of a tool_result ``content`` / message ``content`` (string or block list);
    non-text blocks contribute nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return ""


def anthropic_block_tokens(block: dict[str, Any]) -> int:
    """Billed tokens of one Anthropic content block (without message framing)."""
    kind = block.get("type")
    if kind == "text":
        return count_tokens(str(block.get("text", "")))
    if kind == "tool_use":
        return (count_tokens(str(block.get("name", ""))) + TOOL_BLOCK_OVERHEAD_TOKENS
                + count_tokens(json.dumps(block.get("input", {}), ensure_ascii=False)))
    if kind == "tool_result":
        content = block.get("content", "")
        images = sum(1 for b in content if isinstance(b, dict) and b.get("type") == "image") \
            if isinstance(content, list) else 0
        return (count_tokens(content_text(content)) + TOOL_BLOCK_OVERHEAD_TOKENS
                + images * IMAGE_TOKENS)
    if kind == "image":
        return IMAGE_TOKENS
    if kind in ("thinking", "redacted_thinking"):
        return count_tokens(str(block.get("thinking", block.get("data", ""))))
    return count_tokens(canonical(_strip_marker(block)).decode())


def anthropic_blocks(body: dict[str, Any]) -> list[CacheBlock]:
    """Canonical blocks of a Messages API body (assumed valid)."""
    blocks: list[CacheBlock] = []
    for tool in body.get("tools") or []:
        data = _strip_marker(tool)
        blocks.append(CacheBlock(data=canonical(["tool", data]),
                                 tokens=count_tokens(canonical(data).decode()), ttl=_ttl(tool)))
    system = body.get("system")
    if isinstance(system, str) and system:
        system = [{"type": "text", "text": system}]
    for block in system or []:
        blocks.append(CacheBlock(data=canonical(["system", _strip_marker(block)]),
                                 tokens=count_tokens(str(block.get("text", ""))),
                                 ttl=_ttl(block)))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for i, block in enumerate(content or []):
            tokens = anthropic_block_tokens(block) + (MESSAGE_OVERHEAD_TOKENS if i == 0 else 0)
            blocks.append(CacheBlock(
                data=canonical([message.get("role"), i == 0, _strip_marker(block)]),
                tokens=tokens, ttl=_ttl(block)))
    return blocks


def has_envelope_markers(body: dict[str, Any]) -> bool:
    """True when a chat-completions body carries ``cache_control`` on content parts (an
    envelope gateway in front of Anthropic: explicit caching instead of automatic)."""
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(isinstance(p, dict) and "cache_control" in p
                                             for p in content):
            return True
    return False


def openai_blocks(body: dict[str, Any]) -> list[CacheBlock]:
    """Canonical blocks of a chat-completions body. Automatic (OpenAI): the last block
    carries an implicit 5m breakpoint because OpenAI caches every prompt. Envelope (the body
    has ``cache_control`` parts, ``has_envelope_markers``): only the marked parts are
    breakpoints, and, as the gateways do, a marker on an assistant message that is only
    tool calls or on a tool message is dropped (hermes-facts §3). A string content and a
    one-text-part list hash the same (the gateway converts both to one text block), so a
    part that gains or loses a marker never changes the prefix."""
    explicit = has_envelope_markers(body)
    blocks: list[CacheBlock] = []
    for tool in body.get("tools") or []:
        blocks.append(CacheBlock(data=canonical(["tool", tool]),
                                 tokens=count_tokens(canonical(tool).decode())))
    for message in body.get("messages") or []:
        role = message.get("role")
        units: list[tuple[Any, int, str | None]] = []
        content = message.get("content")
        honoured = explicit and role in ("system", "user") or (
            explicit and role == "assistant" and bool(content))
        if isinstance(content, str) and content:
            units.append((content, count_tokens(content), None))
        elif isinstance(content, list):
            for part in content:
                tokens = IMAGE_TOKENS if part.get("type") == "image_url" else \
                    count_tokens(str(part.get("text", "")))
                unit = (part.get("text") if part.get("type") == "text"
                        and isinstance(part.get("text"), str) else _strip_marker(part))
                units.append((unit, tokens, _ttl(part) if honoured else None))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            units.append((call, TOOL_BLOCK_OVERHEAD_TOKENS
                          + count_tokens(str(function.get("name", "")))
                          + count_tokens(str(function.get("arguments", ""))), None))
        if not units:
            units.append(("", 0, None))
        for i, (unit, tokens, ttl) in enumerate(units):
            extra = [message.get("tool_call_id")] if role == "tool" else []
            blocks.append(CacheBlock(data=canonical([role, i == 0, unit, *extra]),
                                     tokens=tokens + (MESSAGE_OVERHEAD_TOKENS if i == 0 else 0),
                                     ttl=ttl))
    if explicit:
        return blocks
    if blocks:
        last = blocks[-1]
        blocks[-1] = CacheBlock(data=last.data, tokens=last.tokens, ttl="5m")
    return blocks
