"""The default cache strategy (agents/cache_strategy.py): pure rules, exhaustively."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.cache_strategy import (TTL_1H_S, TTL_5M_S, SessionRhythm, choose_cache_strategy,
                                   long_gaps, warm_beats_cold)

gaps = st.lists(st.floats(min_value=0, max_value=3 * TTL_1H_S, allow_nan=False), max_size=30)
tokens = st.integers(min_value=0, max_value=2_000_000)


@st.composite
def rhythms(draw):
    history = draw(tokens)
    return SessionRhythm(gaps_s=tuple(draw(gaps)), prompt_tokens=draw(tokens),
                         history_tokens=history,
                         prunable_tokens=draw(st.integers(min_value=0, max_value=history)),
                         burst_growth_tokens=draw(tokens),
                         burst_requests=draw(st.floats(min_value=0, max_value=500)))


@given(rhythms())
def test_the_message_tier_is_kept_for_an_hour_only_after_a_gap_an_hour_survives(rhythm):
    chosen = choose_cache_strategy(rhythm)
    if chosen.message_ttl == "1h":
        assert long_gaps(rhythm.gaps_s)
    # TTLs never increase along system -> messages (the planner's order rule).
    assert not (chosen.message_ttl == "1h" and chosen.prompt_ttl == "5m")
    assert chosen.reason


@given(rhythms())
def test_a_burst_with_only_short_gaps_pays_the_cheaper_write_everywhere(rhythm):
    short = SessionRhythm(**{**{f: getattr(rhythm, f) for f in rhythm.__slots__},
                             "gaps_s": tuple(min(g, TTL_5M_S) for g in rhythm.gaps_s) or (1.0,)})
    chosen = choose_cache_strategy(short)
    assert (chosen.prompt_ttl, chosen.message_ttl) == ("5m", "5m")


@given(rhythms(), st.integers(min_value=1, max_value=100_000))
def test_more_to_prune_never_makes_keeping_warm_more_attractive(rhythm, extra):
    more = SessionRhythm(gaps_s=rhythm.gaps_s, prompt_tokens=rhythm.prompt_tokens,
                         history_tokens=rhythm.history_tokens,
                         prunable_tokens=min(rhythm.history_tokens,
                                             rhythm.prunable_tokens + extra),
                         burst_growth_tokens=rhythm.burst_growth_tokens,
                         burst_requests=rhythm.burst_requests)
    if not warm_beats_cold(rhythm):
        assert not warm_beats_cold(more)


def test_the_arithmetic_on_two_sessions():
    # 100K history, 80K of it old tool output, 40 requests a burst: prune when cold.
    bulky = SessionRhythm(gaps_s=(900.0,), history_tokens=100_000, prunable_tokens=80_000,
                          burst_growth_tokens=30_000, burst_requests=40)
    assert not warm_beats_cold(bulky)  # warm 22.5K+10K+320K vs cold 25K
    assert choose_cache_strategy(bulky).message_ttl == "5m"
    # The same history with little to prune: keeping it warm costs 0.75*30K + 10K + 1.6K
    # = 34.1K against a rewrite of 1.25*96K = 120K.
    lean = SessionRhythm(gaps_s=(900.0,), history_tokens=100_000, prunable_tokens=4_000,
                         burst_growth_tokens=30_000, burst_requests=4)
    assert warm_beats_cold(lean)
    assert choose_cache_strategy(lean).message_ttl == "1h"


def test_no_gap_yet_assumes_a_human_paced_session_and_gaps_over_an_hour_keep_nothing():
    first = choose_cache_strategy(SessionRhythm())
    assert (first.prompt_ttl, first.message_ttl, first.prune_on_cold_resume) == ("1h", "5m", True)
    overnight = choose_cache_strategy(SessionRhythm(gaps_s=(30.0, 5 * TTL_1H_S)))
    assert (overnight.prompt_ttl, overnight.message_ttl) == ("5m", "5m")
