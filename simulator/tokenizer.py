"""The simulator's deterministic tokenizer: the ground truth for "how many tokens is this".

A real BPE vocabulary is not available offline, so this module imitates one in aggregate. It is
what the simulator bills (usage fields, prompt-too-long, minimum cacheable length) and what
streaming splits text into, so the harness's own estimator is calibrated against it. It holds
no knowledge of requests or caching; see ``simulator.prefix`` for what gets counted.

Rules (each regex piece below yields the stated number of tokens):

- ASCII word (letters, with one optional leading space): 1 token up to 6 letters; 7-10
  letters are 1 or 2 tokens decided by a CRC of the word (common long words are whole BPE
  merges, rarer ones split); longer words add 1 token per further 4 letters. camelCase and
  snake_case split into words, so code comes out denser than prose.
- digits: 1 token per 3 (cl100k-style number chunking).
- ASCII punctuation run (optional leading space): 1 token per 2 characters.
- whitespace run: 1 token per 8 characters (indentation merges).
- Han ideographs: 7 tokens per 10 characters (ceil per run), i.e. about 1.4 chars/token.
- kana and Hangul: 8 tokens per 10 characters (about 1.25 chars/token).
- fullwidth forms and CJK punctuation: 1 token per character.
- anything else (Cyrillic, Greek, Arabic, Devanagari, accented Latin, emoji): 1 token per
  4 UTF-8 bytes, ceil per run (Cyrillic about 2 chars/token inside words, an emoji 1 token).

Measured aggregate (fixtures in tests/agents/test_simulator_tokenizer.py): English prose 4.4
chars/token, Python source (agents/messages.py) 3.2, Chinese 1.35, Japanese 1.05, Korean
1.1, Russian 1.6.
"""

from __future__ import annotations

import math
import re
import zlib

_PIECE = re.compile(
    r"(?P<han>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)"
    r"|(?P<kana>[\u3040-\u30ff\u31f0-\u31ff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]+)"
    r"|(?P<full>[\u3000-\u303f\uff00-\uffef]+)"
    r"|(?P<word> ?(?:[A-Z]?[a-z]+|[A-Z]+(?![a-z])))"
    r"|(?P<num>[0-9]+)"
    r"|(?P<space>\s+)"
    r"|(?P<punct> ?[!-/:-@\[-`{-~]+)"
    r"|(?P<other>[^\x00-\x7f\s\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+)"
    r"|(?P<ctrl>[\x00-\x1f\x7f])"
)


def _word_tokens(word: str) -> int:
    letters = len(word.strip())
    if letters <= 6:
        return 1
    if letters <= 10:
        return 1 + (zlib.crc32(word.strip().lower().encode()) % 3 == 0)
    return 2 + math.ceil((letters - 10) / 4)


def _piece_tokens(kind: str, piece: str) -> int:
    if kind == "word":
        return _word_tokens(piece)
    if kind == "num":
        return math.ceil(len(piece) / 3)
    if kind == "punct":
        return math.ceil(len(piece.lstrip(" ")) / 2)
    if kind == "space":
        return math.ceil(len(piece) / 8)
    if kind == "han":
        return math.ceil(len(piece) * 0.7)
    if kind == "kana":
        return math.ceil(len(piece) * 0.8)
    if kind == "other":
        return math.ceil(len(piece.encode("utf-8")) / 4)
    return len(piece)  # full, ctrl: one per character


def count_tokens(text: str) -> int:
    """Tokens in ``text`` under the rules in the module docstring. Deterministic, >= 0;
    ``count_tokens("") == 0``."""
    total = 0
    for match in _PIECE.finditer(text):
        kind = match.lastgroup or "ctrl"
        total += _piece_tokens(kind, match.group())
    return total


def tokenize(text: str) -> list[str]:
    """Split ``text`` into token strings: ``"".join(tokenize(t)) == t`` and
    ``len(tokenize(t)) <= count_tokens(t)`` (equal except where one character is worth more
    than one token, e.g. an emoji). A piece worth k tokens is cut into k nearly equal slices;
    used to stream text one token per delta."""
    out: list[str] = []
    for match in _PIECE.finditer(text):
        piece = match.group()
        k = _piece_tokens(match.lastgroup or "ctrl", piece)
        k = min(k, len(piece))  # never split inside a character
        if k <= 1:
            out.append(piece)
            continue
        step, extra = divmod(len(piece), k)
        start = 0
        for i in range(k):
            end = start + step + (1 if i < extra else 0)
            out.append(piece[start:end])
            start = end
    return out
