"""Small phrases that people (tool cards, flashes, cost lines) and models (tool results)
read, each built in one place so two screens cannot word the same thing two ways.

``plural`` so "1 lines" cannot come back one f-string at a time: ``plural(1, "line")`` is
"1 line", ``plural(2, "line")`` "2 lines", ``plural(3, "match", "matches")`` "3 matches".
``served_label`` names the route that answered a provider call.
"""

from __future__ import annotations


def plural(count: int, word: str, plural_word: str | None = None) -> str:
    """``count`` with thousands separators, then ``word`` or its plural (``word + "s"`` unless
    ``plural_word`` is given: English adds "es" or changes "y" too often to guess)."""
    return f"{count:,} {word if count == 1 else (plural_word or word + 's')}"


def served_label(provider: str, model: str, credential: str = "") -> str:
    """How the user sees the route that served a call: "provider/model", plus " (key
    label)" when a named key was used (the label, never the secret). The live cost line,
    the reloaded one and the failover notice all say it this way."""
    key = f" (key {credential})" if credential else ""
    return f"{provider}/{model}{key}"
