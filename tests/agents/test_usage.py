"""Usage normalisation into four disjoint buckets (hermes-facts §13; case B28)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.transports.usage import (merge_anthropic_stream_usage, usage_from_anthropic,
                                     usage_from_openai)

counts = st.integers(min_value=0, max_value=10_000_000)


def price(usage, *, input=3.0, write=3.75, read=0.30, output=15.0) -> float:
    """USD at per-MTok test prices from case B28."""
    return (usage.input_tokens * input + usage.cache_write_tokens * write
            + usage.cache_read_tokens * read + usage.output_tokens * output) / 1_000_000


def test_b28_anthropic_cache_write_is_not_also_input():
    usage = usage_from_anthropic({"input_tokens": 5, "cache_creation_input_tokens": 10000,
                                  "cache_read_input_tokens": 0, "output_tokens": 400})
    assert (usage.input_tokens, usage.cache_write_5m_tokens, usage.output_tokens) == (5, 10000, 400)
    assert round(price(usage), 6) == 0.043515


def test_b28_streaming_usage_merges_to_the_same_buckets():
    start = {"input_tokens": 4, "cache_read_input_tokens": 2400, "output_tokens": 1,
             "cache_creation_input_tokens": None}
    merged = merge_anthropic_stream_usage(start, {"output_tokens": 20, "input_tokens": None})
    usage = usage_from_anthropic(merged)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (4, 2400, 20)
    assert round(price(usage), 6) == 0.001032


def test_b28_openai_prompt_tokens_include_the_cached_part():
    usage = usage_from_openai({"prompt_tokens": 2450, "completion_tokens": 20,
                               "prompt_tokens_details": {"cached_tokens": 2400}})
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (50, 2400, 20)
    assert usage.prompt_tokens == 2450


def test_anthropic_ttl_split_and_unsplit_fallback_to_5m():
    split = usage_from_anthropic({"input_tokens": 1, "cache_creation_input_tokens": 300,
                                  "cache_creation": {"ephemeral_5m_input_tokens": 100,
                                                     "ephemeral_1h_input_tokens": 200}})
    assert (split.cache_write_5m_tokens, split.cache_write_1h_tokens) == (100, 200)
    unsplit = usage_from_anthropic({"input_tokens": 1, "cache_creation_input_tokens": 300})
    assert (unsplit.cache_write_5m_tokens, unsplit.cache_write_1h_tokens) == (300, 0)
    assert unsplit.raw == {"input_tokens": 1, "cache_creation_input_tokens": 300}


def test_openai_reasoning_is_a_breakdown_of_output():
    usage = usage_from_openai({"prompt_tokens": 10, "completion_tokens": 50,
                               "completion_tokens_details": {"reasoning_tokens": 30}})
    assert (usage.output_tokens, usage.reasoning_tokens, usage.input_tokens) == (50, 30, 10)


def test_missing_or_null_fields_count_zero():
    assert usage_from_openai({"prompt_tokens": None}).prompt_tokens == 0
    assert usage_from_anthropic({}).prompt_tokens == 0


@settings(max_examples=150)
@given(uncached=counts, read=counts, write_5m=counts, write_1h=counts, output=counts)
def test_buckets_are_disjoint_and_sum_to_the_billed_prompt(uncached, read, write_5m,
                                                           write_1h, output):
    anthropic = usage_from_anthropic({
        "input_tokens": uncached, "cache_read_input_tokens": read, "output_tokens": output,
        "cache_creation_input_tokens": write_5m + write_1h,
        "cache_creation": {"ephemeral_5m_input_tokens": write_5m,
                           "ephemeral_1h_input_tokens": write_1h}})
    assert anthropic.prompt_tokens == uncached + read + write_5m + write_1h
    assert anthropic.cache_write_1h_tokens == write_1h
    openai = usage_from_openai({"prompt_tokens": uncached + read, "completion_tokens": output,
                                "prompt_tokens_details": {"cached_tokens": read}})
    assert (openai.input_tokens, openai.cache_read_tokens) == (uncached, read)
    assert openai.prompt_tokens == uncached + read
