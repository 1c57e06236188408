"""agents/pricing.py: four buckets × their own rates, unknown never a partial sum, sources.

The fixture PUBLISHED holds providers' published list prices (USD per million tokens) as
stated on their pricing pages: Anthropic (https://www.anthropic.com/pricing#api and
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing: 5-minute cache
writes 1.25× input, 1-hour writes 2× input, reads 0.1× input) and OpenAI
(https://openai.com/api/pricing: cached input; no charge for writing the cache). Typed here
on purpose, independently of the library, so a wrong library row would fail the test.
"""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import genai_prices
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.pricing import (
    BUCKETS, LIBRARY_VERSION, OPERATOR, Buckets, RateOverride, Rates, call_price,
    cost_compute, override_validate, rates_resolve, rates_worst_input, self_hosted_overrides,
    uncached_equivalent)

D = Decimal
AT = datetime(2026, 11, 20, tzinfo=timezone.utc)

PUBLISHED = {
    ("anthropic", "claude-sonnet-4-5"): {"input": D("3"), "output": D("15"),
                                         "cache_read": D("0.30"), "cache_write_5m": D("3.75"),
                                         "cache_write_1h": D("6")},
    ("anthropic", "claude-opus-4-1"): {"input": D("15"), "output": D("75"),
                                       "cache_read": D("1.50"), "cache_write_5m": D("18.75"),
                                       "cache_write_1h": D("30")},
    ("anthropic", "claude-haiku-4-5"): {"input": D("1"), "output": D("5"),
                                        "cache_read": D("0.10"), "cache_write_5m": D("1.25"),
                                        "cache_write_1h": D("2")},
    ("openai", "gpt-4o"): {"input": D("2.50"), "output": D("10"), "cache_read": D("1.25"),
                           "cache_write_5m": None, "cache_write_1h": None},
    ("openai", "gpt-4.1"): {"input": D("2"), "output": D("8"), "cache_read": D("0.50"),
                            "cache_write_5m": None, "cache_write_1h": None},
}


@pytest.mark.parametrize(("route", "bucket"),
                         [(route, b) for route in PUBLISHED for b in BUCKETS])
def test_each_bucket_at_its_published_rate(route, bucket):
    provider, model = route
    published = PUBLISHED[route][bucket]
    # 100K tokens: below every prompt-size tier, so the list rate applies
    cost = call_price(provider, model, Buckets(**{bucket: 100_000}), at=AT)
    if published is None:  # OpenAI publishes no cache-write rate: unknown, never $0 guessed
        assert cost.usd is None
        assert cost.unknown_reason == f"no {bucket} rate for {model}"
    else:
        assert cost.usd == published / 10
        assert cost.source == f"genai-prices {LIBRARY_VERSION} {provider}/{model}"
        assert cost.fetched_at is not None and cost.unknown_reason == ""


def test_a_whole_anthropic_call_is_the_sum_of_its_buckets():
    call = Buckets(input=1_200, output=850, cache_read=40_000, cache_write_5m=3_000,
                   cache_write_1h=2_000)
    cost = call_price("anthropic", "claude-sonnet-4-5", call, at=AT)
    expected = (D(1_200) * 3 + D(850) * 15 + D(40_000) * D("0.3") + D(3_000) * D("3.75")
                + D(2_000) * 6) / 1_000_000
    assert cost.usd == expected == D("0.0516")
    assert set(cost.by_bucket) == set(BUCKETS)


def test_tiers_apply_past_the_threshold_to_every_token():
    """Sonnet 4.5 past a 200K prompt: every token at the higher tier (library's tier table)."""
    small = call_price("anthropic", "claude-sonnet-4-5", Buckets(input=200_000, output=1), at=AT)
    large = call_price("anthropic", "claude-sonnet-4-5", Buckets(input=200_001, output=1), at=AT)
    assert small.usd == (D(200_000) * 3 + 15) / 1_000_000
    assert large.usd == (D(200_001) * 6 + D("22.5")) / 1_000_000
    # the threshold counts the whole prompt, cached parts included
    mixed = call_price("anthropic", "claude-sonnet-4-5",
                       Buckets(input=1_000, cache_read=250_000), at=AT)
    assert mixed.usd == (D(1_000) * 6 + D(250_000) * D("0.6")) / 1_000_000


def test_unknown_model_is_unknown_with_reason_never_zero():
    cost = call_price("anthropic", "claude-nonexistent-9", Buckets(input=10, output=5), at=AT)
    assert cost.usd is None and cost.unknown_reason == "no rate for claude-nonexistent-9"
    cost = call_price("vllm-unlisted", "whatever", Buckets(input=10), at=AT)
    assert cost.usd is None and "no rate for whatever" == cost.unknown_reason


def test_one_unpriced_bucket_makes_the_whole_call_unknown():
    """OpenAI has no cache-write rate: a call reporting one is unknown, not the partial sum
    of its other buckets."""
    cost = call_price("openai", "gpt-4o", Buckets(input=100, output=100, cache_write_5m=1),
                      at=AT)
    assert cost.usd is None
    assert cost.unknown_reason == "no cache_write_5m rate for gpt-4o"


def test_empty_usage_costs_zero_even_without_rates_for_its_buckets():
    assert call_price("openai", "gpt-4o", Buckets(), at=AT).usd == D(0)


def test_self_hosted_routes_are_free_by_operator():
    cost = call_price("ollama", "llama3.1", Buckets(input=10_000, output=2_000),
                      overrides=self_hosted_overrides(), at=AT)
    assert cost.usd == D(0) and cost.source == OPERATOR


def test_an_override_replaces_the_library_bucket_by_bucket():
    stamp = datetime(2026, 11, 1, tzinfo=timezone.utc)
    negotiated = RateOverride(provider="anthropic", model="claude-sonnet-4-5", input=D("2"),
                              updated_at=stamp)
    rates, _ = rates_resolve("anthropic", "claude-sonnet-4-5", overrides=(negotiated,), at=AT)
    assert rates.input == D("2") and rates.output == D("15")  # the rest from the library
    assert rates.source == OPERATOR and rates.fetched_at == stamp


def test_an_exact_override_wins_over_a_route_wide_one():
    wide = RateOverride(provider="openrouter", input=D("1"), output=D("1"))
    exact = RateOverride(provider="openrouter", model="m", input=D("9"), output=D("9"))
    rates, _ = rates_resolve("openrouter", "m", overrides=(wide, exact))
    assert rates.input == D("9")
    rates, _ = rates_resolve("openrouter", "other", overrides=(wide, exact))
    assert rates.input == D("1")


def test_the_simulator_is_priced_as_the_model_it_stands_for():
    sim = call_price("simulator", "hermes-simulator", Buckets(input=100_000), at=AT)
    assert sim.usd == D("0.3") and "anthropic/claude-sonnet-4-5" in sim.source


@pytest.mark.parametrize("bad", [
    ("nosuch", {"input": "1"}), ("openai", {"input": "-1"}), ("openai", {"output": "abc"}),
    ("openai", {"input": "NaN"}), ("openai", {"input": "Infinity"})])
def test_override_validation_refuses_bad_input(bad):
    provider, values = bad
    with pytest.raises(ValueError):
        override_validate(provider, values)


def test_override_validation_accepts_and_converts():
    assert override_validate("vllm", {"input": "0", "output": "0.5"})["output"] == D("0.5")


def test_uncached_equivalent_and_worst_input():
    call = Buckets(input=1, output=2, cache_read=3, cache_write_5m=4, cache_write_1h=5)
    assert uncached_equivalent(call) == Buckets(input=13, output=2)
    rates = Rates(input=D(3), output=D(15), cache_write_5m=D("3.75"), cache_write_1h=D(6))
    assert rates_worst_input(rates) == D(6)
    assert rates_worst_input(Rates(output=D(1))) is None


counts = st.integers(min_value=0, max_value=5_000_000)
buckets_st = st.builds(Buckets, counts, counts, counts, counts, counts)
rate_st = st.one_of(st.none(), st.decimals(min_value=0, max_value=200, places=3))
rates_st = st.builds(Rates, rate_st, rate_st, rate_st, rate_st, rate_st, st.just("t"),
                     st.none(), st.just("m"))


@settings(max_examples=300, deadline=None)
@given(buckets_st, rates_st)
def test_cost_is_non_negative_or_unknown(call, rates):
    cost = cost_compute(call, rates)
    assert cost.usd is None or cost.usd >= 0


@settings(max_examples=300, deadline=None)
@given(buckets_st, buckets_st, rates_st)
def test_cost_is_additive_over_calls_and_buckets(a, b, rates):
    """price(a + b) = price(a) + price(b) at fixed rates; unknown when either is unknown."""
    both, left, right = cost_compute(a + b, rates), cost_compute(a, rates), cost_compute(b, rates)
    if left.usd is None or right.usd is None:
        assert both.usd is None
    else:
        assert both.usd == left.usd + right.usd
        parts = [cost_compute(Buckets(**{k: getattr(a, k)}), rates).usd for k in BUCKETS]
        assert sum(parts, D(0)) == left.usd


@settings(max_examples=300, deadline=None)
@given(buckets_st, rates_st)
def test_unknown_exactly_when_a_non_empty_bucket_lacks_a_rate(call, rates):
    missing = [b for b in BUCKETS if getattr(call, b) and rates.rate(b) is None]
    cost = cost_compute(call, rates)
    assert (cost.usd is None) == bool(missing)
    if missing:
        assert all(b in cost.unknown_reason for b in missing)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 150_000), st.integers(0, 50_000), st.integers(0, 150_000),
       st.integers(0, 40_000), st.integers(0, 40_000),
       st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"]))
def test_agrees_with_the_library_own_calculator(inp, out, read, w5, w1, model):
    """Our bucket-by-bucket sum equals genai_prices.calc_price on the same call (it takes an
    inclusive input total, so the disjoint buckets are added back up)."""
    ours = call_price("anthropic", model,
                      Buckets(input=inp, output=out, cache_read=read, cache_write_5m=w5,
                              cache_write_1h=w1), at=AT)
    theirs = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=inp + read + w5 + w1, output_tokens=out,
                           cache_read_tokens=read, cache_write_tokens=w5 + w1,
                           cache_write_1h_tokens=w1),
        model, provider_id="anthropic", genai_request_timestamp=AT)
    assert ours.usd == theirs.total_price


def test_no_network_snapshot_is_in_use():
    """Prices come from the bundled data of the pinned version, never an auto-update."""
    from genai_prices import data_snapshot

    assert data_snapshot.get_snapshot().from_auto_update is False
