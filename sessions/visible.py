"""Visible-safe text: what a reviewer reads must look like what runs.

A command or file content can carry characters that render as nothing, or that change how
the text around them is drawn: bidirectional controls (U+202A–U+202E, U+2066–U+2069,
U+200E/U+200F, U+061C: "Trojan Source"), zero-width and other format characters (every
Unicode "Cf" character, the tag characters U+E0000–U+E007F among them), variation selectors
and invisible fillers (used to smuggle text to a model), line/paragraph separators, CR, every
other C0/C1 control character, DEL and ESC (the start of ANSI escape sequences). Shown raw,
``echo ok⟨U+202E⟩ fr- mr`` reads as something else, and a file's hidden instruction is
invisible on the approval card.

This module is the one place such characters are turned into visible escapes: ``⟨CR⟩``,
``⟨ESC⟩``, ``⟨NUL⟩``, ``⟨BS⟩``, ``⟨VT⟩``, ``⟨FF⟩``, ``⟨DEL⟩``, else ``⟨U+XXXX⟩`` (the code
point). Newline and tab stay as they are (they are visible in a ``<pre>``). Display only:
callers escape a copy for the page; what runs is never changed here.

- ``visible_text(text) -> str``: plain text with the escapes (one-line summaries, tool card
  arguments).
- ``visible_html(text) -> SafeString``: HTML-escaped text with each escape wrapped in
  ``<span class="ctl">`` so it stands apart from the same characters typed literally.
- ``has_hidden(text) -> bool``: does ``text`` hold any such character (the card's warning,
  "contains hidden control characters").
"""

from __future__ import annotations

import re

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

HIDDEN_WARNING = "contains hidden control characters"
"""The words of the warning a card shows when ``has_hidden`` is true for anything on it."""

_NAMES = {"\x00": "NUL", "\x08": "BS", "\x0b": "VT", "\x0c": "FF", "\r": "CR",
          "\x1b": "ESC", "\x7f": "DEL"}
"""Short names for the control characters people know by name; others are U+XXXX."""

_HIDDEN = re.compile(
    "["
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 (not tab, newline), DEL, C1; CR and ESC among them
    # Unicode "Cf" (format) characters, every one (tests/approvals checks against
    # unicodedata): soft hyphen, Arabic marks, bidi controls, zero-width, BOM, tags...
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\u2028\u2029"  # line and paragraph separators
    # invisible but not "Cf": combining grapheme joiner, Hangul fillers, Khmer inherent
    # vowels, variation selectors (one per byte hides a whole message after a character)
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef"
    "]")


def _name(char: str) -> str:
    return _NAMES.get(char) or f"U+{ord(char):04X}"


def has_hidden(text: str) -> bool:
    """True when ``text`` holds a character ``visible_text`` would escape."""
    return bool(text) and _HIDDEN.search(text) is not None


def visible_text(text: str) -> str:
    """``text`` with every hidden or control character replaced by ``⟨NAME⟩`` (see the
    module docstring); plain text, to be HTML-escaped by the template as usual."""
    return _HIDDEN.sub(lambda m: f"⟨{_name(m.group())}⟩", text or "")


def visible_html(text: str) -> SafeString:
    """``text`` HTML-escaped, each hidden or control character replaced by
    ``<span class="ctl" title="hidden character">⟨NAME⟩</span>``."""
    out, end = [], 0
    for match in _HIDDEN.finditer(text or ""):
        out.append(escape(text[end:match.start()]))
        out.append(f'<span class="ctl" title="hidden character">⟨{_name(match.group())}⟩'
                   f"</span>")
        end = match.end()
    out.append(escape((text or "")[end:]))
    return mark_safe("".join(out))
