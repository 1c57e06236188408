"""Counted nouns in text that people (tool cards, flashes) and models (tool results) read.

One helper so "1 lines" cannot come back one f-string at a time: ``plural(1, "line")`` is
"1 line", ``plural(2, "line")`` "2 lines", ``plural(3, "match", "matches")`` "3 matches".
"""

from __future__ import annotations


def plural(count: int, word: str, plural_word: str | None = None) -> str:
    """``count`` with thousands separators, then ``word`` or its plural (``word + "s"`` unless
    ``plural_word`` is given: English adds "es" or changes "y" too often to guess)."""
    return f"{count:,} {word if count == 1 else (plural_word or word + 's')}"
