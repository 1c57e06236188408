"""The simulator's tokenizer: realistic chars-per-token by script, deterministic, and its
token pieces rebuild the text exactly."""

from __future__ import annotations

import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

import agents.messages
from simulator.tokenizer import count_tokens, tokenize

PROSE = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity. The "
    "harness keeps a session's history in the database and replays it to the provider on "
    "every iteration. When the conversation grows beyond the configured threshold, the "
    "compactor summarises the middle of the transcript and keeps the protected head and tail "
    "unchanged, so the cached prefix moves only once per compaction.")
ZH = ("人工智能是计算机科学的一个分支，它企图了解智能的实质，并生产出一种新的能以人类智能相似的方式"
      "做出反应的智能机器。该领域的研究包括机器人、语言识别、图像识别、自然语言处理和专家系统等。")
JA = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所で泣いていた。"
KO = "대한민국은 동아시아의 한반도 남부에 위치한 민주공화국이다. 수도는 서울특별시이다."


def ratio(text: str) -> float:
    return len(text) / count_tokens(text)


def test_english_prose_is_about_four_chars_per_token() -> None:
    assert 3.8 <= ratio(PROSE) <= 4.8


def test_code_is_denser_than_prose() -> None:
    source = inspect.getsource(agents.messages)
    assert 2.7 <= ratio(source) <= 3.6
    assert ratio(source) < ratio(PROSE)


def test_cjk_and_hangul_are_about_one_token_per_one_to_one_and_a_half_chars() -> None:
    for text in (ZH, JA, KO):
        assert 1.0 <= ratio(text) <= 1.5, text


def test_fullwidth_costs_more_than_ascii_and_emoji_are_not_free() -> None:
    assert count_tokens("ABC123") == 2
    assert count_tokens("ＡＢＣ１２３") == 6
    assert count_tokens("👍") >= 1 and count_tokens("🎉🎉🎉🎉") >= 4
    assert count_tokens("") == 0


def test_deterministic_and_monotone_in_repetition() -> None:
    assert count_tokens(PROSE) == count_tokens(PROSE)
    assert count_tokens(PROSE + " " + PROSE) > count_tokens(PROSE)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_pieces_rebuild_the_text_and_never_outnumber_the_count(text: str) -> None:
    pieces = tokenize(text)
    assert "".join(pieces) == text
    assert all(pieces)
    assert len(pieces) <= count_tokens(text)
