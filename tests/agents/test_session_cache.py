"""The worker's kept sessions (agents/session_cache.py): both bounds, the recency order, the
byte estimate, and the stamps that make an entry stale. The same cache through real turns and
two workers: tests/sessions/test_bound_sessions.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.messages import Message, ToolCall
from agents.session_cache import (MESSAGE_OVERHEAD_BYTES, STRING_OVERHEAD_BYTES, BoundSession,
                                  SessionCache, entry_bytes, message_bytes)


def entry(size: int, *, turn_id: int = 1, version: int = 0, n: int = 0) -> BoundSession:
    history = tuple(Message(role="user", content=f"m{i}", id=i + 1) for i in range(n))
    return BoundSession(pipeline=None, history=history, version=version, system_prompt="",
                        turn_id=turn_id, size=size)


def test_entry_bound_evicts_the_least_recently_kept():
    cache = SessionCache(max_entries=3, max_bytes=10_000)
    for sid in (1, 2, 3):
        assert cache.keep(sid, entry(10))
    assert cache.take(1) is not None  # taken by a turn ...
    cache.keep(1, entry(10))          # ... and kept again: now the most recent
    cache.keep(4, entry(10))
    assert 2 not in cache and all(s in cache for s in (1, 3, 4))
    assert cache.stats().entries == 3 and cache.stats().bytes == 30


def test_byte_budget_evicts_until_the_new_entry_fits_and_refuses_one_over_it():
    cache = SessionCache(max_entries=100, max_bytes=1_000)
    cache.keep(1, entry(400))
    cache.keep(2, entry(400))
    cache.keep(3, entry(300))  # 1,100 > 1,000: session 1 goes
    assert 1 not in cache and cache.stats().bytes == 700
    assert cache.keep(4, entry(1_001)) is False and 4 not in cache
    cache.keep(2, entry(900))  # a session that grew replaces its own entry, evicting others
    assert 2 in cache and 3 not in cache and cache.stats().bytes == 900
    assert cache.keep(2, entry(5_000)) is False and 2 not in cache  # its stale copy went too


def test_changed_bounds_apply_at_the_next_keep_and_bad_bounds_are_refused():
    cache = SessionCache(max_entries=5, max_bytes=1_000)
    for sid in range(5):
        cache.keep(sid, entry(10))
    cache.keep(9, entry(10), max_entries=2, max_bytes=1_000)
    stats = cache.stats()
    assert (stats.entries, stats.max_entries, stats.max_bytes) == (1, 2, 1_000)
    with pytest.raises(ValueError):
        SessionCache(max_entries=0)
    with pytest.raises(ValueError):
        cache.keep(1, entry(1), max_bytes=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 400),
       st.lists(st.tuples(st.integers(0, 9), st.integers(1, 200), st.booleans()), max_size=60))
def test_the_bounds_hold_after_any_sequence_of_takes_and_keeps(max_entries, max_bytes, ops):
    cache = SessionCache(max_entries=max_entries, max_bytes=max_bytes)
    for sid, size, take in ops:
        if take:
            cache.take(sid)
            assert sid not in cache
        else:
            kept = cache.keep(sid, entry(size))
            assert kept == (size <= max_bytes)
            assert (sid in cache) == kept  # the newest entry is never the one evicted
        stats = cache.stats()
        assert stats.entries <= max_entries and stats.bytes <= max_bytes


def test_usable_only_under_the_same_version_and_when_nobody_served_since():
    kept = entry(10, version=4)
    assert kept.usable(version=4, served_since=False)
    assert not kept.usable(version=5, served_since=False)   # rewritten (compaction, prune, edit)
    assert not kept.usable(version=4, served_since=True)    # another worker served a turn
    assert not kept.usable(version=None, served_since=False)  # the session is gone
    assert entry(10, n=3).last_id == 3 and entry(10).last_id == 0


def test_message_bytes_charges_strings_at_their_width_and_the_fixed_overhead():
    plain = Message(role="user", content="x" * 1000)
    assert message_bytes(plain) == MESSAGE_OVERHEAD_BYTES + STRING_OVERHEAD_BYTES + 1000
    wide = Message(role="user", content="\N{GREEK SMALL LETTER ALPHA}" * 1000)
    assert message_bytes(wide) > message_bytes(plain) + 900  # two bytes a char, not one
    called = Message(role="assistant", content="", tool_calls=(
        ToolCall(id="call_1", name="read_file", arguments='{"path": "a"}'),))
    assert message_bytes(called) > MESSAGE_OVERHEAD_BYTES + 3 * STRING_OVERHEAD_BYTES
    pruned = Message(role="tool", content="y" * 5000, sent_content="[pruned]", tool_call_id="c")
    assert message_bytes(pruned) > 5000  # the full text stays in memory beside the stub


@given(st.lists(st.text(max_size=80), min_size=1, max_size=30), st.integers(0, 30))
def test_an_appended_history_is_estimated_incrementally_to_the_same_total(texts, cut):
    history = tuple(Message(role="user", content=t, id=i + 1) for i, t in enumerate(texts))
    cut = min(cut, len(history))
    before = entry(0)
    before.history = history[:cut]
    before.size = entry_bytes(before.history, system_prompt="sys")
    full = entry_bytes(history, system_prompt="sys")
    assert entry_bytes(history, system_prompt="sys", previous=before) == full
    # A history that does not start with the previous one's messages is estimated afresh
    # (equal copies are the same messages: agents.messages.common_prefix).
    copies = tuple(Message(role="user", content=t + "!", id=i + 1) for i, t in enumerate(texts))
    liar = entry(10**9)
    liar.history = copies[:max(1, cut)]
    assert entry_bytes(history, system_prompt="sys", previous=liar) == full
