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
- ``visible_markup(html) -> SafeString``: sanitised HTML (the chat's rendered Markdown) with
  the same spans in its text and the plain escapes inside its tags (a link's title).
- ``visible_spec() -> str``: the set and the names as JSON for static/chat.js, which escapes
  streamed text the same way in the browser (the page carries it; no second list in JS).
- ``visible_line(text, max_length)``: ``visible_text`` cut to a column's length, and
  ``VisibleCharField``, the model field that stores short display text (session titles,
  team, schedule and webhook names) through it: the one exception to "display only", for
  text that is nothing but display (see the field's docstring for why at save time).
"""

from __future__ import annotations

import json
import re

from django.db import models
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


_TAG = re.compile(r"""<(?:[^>"']|"[^"]*"|'[^']*')*>""")
"""One tag of serialised HTML, quoted attribute values (which may hold ">") included."""


def visible_markup(html: str) -> SafeString:
    """Sanitised, serialised HTML (nh3's output, sessions/rendering.py markdown_html: text
    already escaped, every attribute quoted) with each hidden or control character in its
    text replaced by the ``<span class="ctl">`` of ``visible_html``, and inside a tag (an
    attribute value such as a link's title) by the plain ``⟨NAME⟩``. Markdown and nh3 keep
    such characters as they are, so a reply's U+202E would otherwise reach the page raw;
    ordinary right-to-left letters are not in the set and stay as they are."""
    if not has_hidden(html):
        return mark_safe(html)
    out, end = [], 0
    for tag in _TAG.finditer(html):
        out.append(_spans(html[end:tag.start()]))
        out.append(visible_text(tag.group()))
        end = tag.end()
    out.append(_spans(html[end:]))
    return mark_safe("".join(out))


def _spans(text: str) -> str:
    """Already-escaped HTML text with each hidden character as its marked span."""
    return _HIDDEN.sub(lambda m: f'<span class="ctl" title="hidden character">'
                                 f"⟨{_name(m.group())}⟩</span>", text)


def visible_spec() -> str:
    """The set and names above as JSON for the browser (static/chat.js ``visibleNodes``):
    ``{"pattern": JavaScript regex source of the character class, for the "u" flag (every
    character as ``\\u{hex}``), "names": {code point: short name}}``. Derived from
    ``_HIDDEN`` itself, so the page and the server can never disagree on which characters
    are shown."""
    body = _HIDDEN.pattern[1:-1]  # "[" ... "]": single characters and "a-b" ranges
    pattern = "[" + "".join(c if c == "-" else f"\\u{{{ord(c):x}}}" for c in body) + "]"
    return json.dumps({"pattern": pattern, "names": {ord(c): n for c, n in _NAMES.items()}},
                      separators=(",", ":"))


def visible_line(text: str, max_length: int | None = None) -> str:
    """``visible_text(text)`` cut to at most ``max_length`` characters, never inside an
    escape (a ``⟨U+202E⟩`` is kept whole or dropped whole), for a column of that length."""
    shown = visible_text(text)
    if max_length is None or len(shown) <= max_length:
        return shown
    cut = shown[:max_length]
    opened = cut.rfind("⟨")
    if opened > cut.rfind("⟩") and _ESCAPE.match(shown, opened):  # an escape cut in two
        cut = cut[:opened]
    return cut


_ESCAPE = re.compile(r"⟨(?:[A-Z]{2,3}|U\+[0-9A-F]{4,6})⟩")


class VisibleCharField(models.CharField):
    """A CharField for short text that people or the model choose and other people read
    (a session's title, a team's name, a schedule's or webhook's name): its value is stored
    through ``visible_line``, so every hidden or control character is stored as its visible
    escape (``⟨U+202E⟩``) and the value fits ``max_length``.

    Why at save time, not at display: such text is shown in many places (pages, the admin,
    the live-update payloads static/chat.js draws, search results read with raw SQL, the
    browser tab's title, notifications, CSV file names), and one that forgot the display
    helper would let a U+202E reverse what a reviewer reads. Neutralised where it is
    stored, no display can forget it. The text is display-only (never sent to a model,
    never run), so nothing depends on the raw characters. Every ORM write goes through it:
    ``save``/``create``/``bulk_create`` (``pre_save``, which also updates the instance) and
    ``QuerySet.update`` (``get_prep_value``). Rows written before it were escaped by a data
    migration."""

    def pre_save(self, model_instance, add):
        value = getattr(model_instance, self.attname)
        if isinstance(value, str):
            value = visible_line(value, self.max_length)
            setattr(model_instance, self.attname, value)
        return value

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return visible_line(value, self.max_length) if isinstance(value, str) else value


def visible_rows_migration(app_label: str, model_name: str, field_name: str):
    """A RunPython function that stores the existing values of a ``VisibleCharField``
    (``app_label.model_name.field_name``) through ``visible_line``: rows written before the
    field neutralised them. Reads in chunks; writes only the rows that change."""

    def migrate(apps, schema_editor):
        model = apps.get_model(app_label, model_name)
        length = model._meta.get_field(field_name).max_length
        changed = {pk: visible_line(value, length) for pk, value in
                   model.objects.values_list("pk", field_name).iterator(chunk_size=2000)
                   if value and has_hidden(value)}
        for pk, value in changed.items():
            model.objects.filter(pk=pk).update(**{field_name: value})

    return migrate
