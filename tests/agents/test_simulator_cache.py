"""Prompt-cache accounting of the simulator: the PromptCache class directly, and the usage the
anthropic SDK and httpx read back over HTTP."""

from __future__ import annotations


import anthropic
import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import CacheBlock, PromptCache, SimClock, SimulatorServer


def blocks(*sizes: int, marks: dict[int, str] | None = None, salt: str = "") -> list[CacheBlock]:
    marks = marks or {}
    return [CacheBlock(data=f"block-{i}{salt if i == 0 else ''}".encode(), tokens=size,
                       ttl=marks.get(i)) for i, size in enumerate(sizes)]


def usage(outcome) -> tuple[int, int, int, int]:
    return (outcome.input_tokens, outcome.cache_read_input_tokens,
            outcome.cache_write_5m_tokens, outcome.cache_write_1h_tokens)


def test_same_prefix_twice_writes_then_reads() -> None:
    cache = PromptCache(SimClock())
    request = blocks(1000, 500, 30, marks={1: "5m"})
    assert usage(cache.process(request)) == (30, 0, 1500, 0)
    assert usage(cache.process(request)) == (30, 1500, 0, 0)


def test_any_byte_change_in_the_prefix_misses() -> None:
    cache = PromptCache(SimClock())
    cache.process(blocks(1000, 500, 30, marks={1: "5m"}))
    changed = blocks(1000, 500, 30, marks={1: "5m"}, salt="Current time: 10:00:17")
    assert usage(cache.process(changed)) == (30, 0, 1500, 0)


def test_ttl_expiry_and_refresh_on_hit() -> None:
    clock = SimClock()
    cache = PromptCache(clock)
    request = blocks(2000, 10, marks={0: "5m"})
    cache.process(request)
    clock.advance(299)
    assert usage(cache.process(request))[1] == 2000  # hit, refreshed to t=599
    clock.advance(299)
    assert usage(cache.process(request))[1] == 2000
    clock.advance(300)
    assert usage(cache.process(request)) == (10, 0, 2000, 0)


def test_one_hour_ttl_outlives_five_minutes_and_is_reported_apart() -> None:
    clock = SimClock()
    cache = PromptCache(clock)
    request = blocks(1500, 600, 40, marks={0: "1h", 1: "5m"})
    assert usage(cache.process(request)) == (40, 0, 600, 1500)
    clock.advance(1800)
    assert usage(cache.process(request)) == (40, 1500, 600, 0)
    clock.advance(3601)
    assert usage(cache.process(request)) == (40, 0, 600, 1500)


def test_prefix_below_minimum_length_is_never_cached() -> None:
    cache = PromptCache(SimClock(), min_cacheable_tokens=1024)
    short = blocks(600, 400, 5, marks={1: "5m"})
    assert usage(cache.process(short)) == (1005, 0, 0, 0)
    assert usage(cache.process(short)) == (1005, 0, 0, 0)
    cache.min_cacheable_tokens = 1000
    assert usage(cache.process(short)) == (5, 0, 1000, 0)


def test_lookback_reaches_twenty_blocks_back_and_no_further() -> None:
    cache = PromptCache(SimClock())
    sizes = [1100] + [10] * 40
    cache.process(blocks(*sizes[:2], marks={1: "5m"}))
    near = blocks(*sizes[:22], marks={21: "5m"})  # previous breakpoint 20 blocks back
    assert usage(cache.process(near))[1] == 1110
    far_cache = PromptCache(SimClock())
    far_cache.process(blocks(*sizes[:2], marks={1: "5m"}))
    far = blocks(*sizes[:23], marks={22: "5m"})  # 21 blocks back: not found
    assert usage(far_cache.process(far)) == (0, 0, 1320, 0)


def test_caches_are_per_namespace() -> None:
    cache = PromptCache(SimClock())
    request = blocks(1200, marks={0: "5m"})
    cache.process(request, namespace="model-a")
    assert usage(cache.process(request, namespace="model-b")) == (0, 0, 1200, 0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 900), st.sampled_from([None, None, "5m", "1h"])),
                min_size=1, max_size=30),
       st.lists(st.integers(0, 400), max_size=4))
def test_buckets_always_add_up_to_the_prompt(spec: list, advances: list[int]) -> None:
    clock = SimClock()
    cache = PromptCache(clock)
    request = [CacheBlock(data=str(i).encode(), tokens=t, ttl=ttl)
               for i, (t, ttl) in enumerate(spec)]
    total = sum(t for t, _ in spec)
    for step in [0, *advances]:
        clock.advance(step)
        outcome = cache.process(request)
        assert outcome.total_input_tokens == total
        assert min(usage(outcome)) >= 0


# --- over HTTP ---------------------------------------------------------------------------

SYSTEM = "You are Hermes, a careful agent. " * 200  # about 1,400 tokens




def _ask(client: anthropic.Anthropic, system: str, ttl: str = "5m", text: str = "hi"):
    control = {"type": "ephemeral", "ttl": ttl}
    return client.messages.create(
        model="claude-sim", max_tokens=64,
        system=[{"type": "text", "text": system, "cache_control": control}],
        messages=[{"role": "user", "content": text}]).usage


def test_sdk_sees_write_then_read_then_miss_on_byte_change(client: anthropic.Anthropic) -> None:
    first = _ask(client, SYSTEM)
    assert first.cache_creation_input_tokens > 1024 and first.cache_read_input_tokens == 0
    assert first.cache_creation.ephemeral_5m_input_tokens == first.cache_creation_input_tokens
    second = _ask(client, SYSTEM, text="another question")
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    assert second.input_tokens < 20  # only the uncached user message
    changed = _ask(client, SYSTEM.replace("careful", "Careful", 1))
    assert changed.cache_read_input_tokens == 0
    assert changed.cache_creation_input_tokens == first.cache_creation_input_tokens


def test_sdk_ttl_expiry_on_the_simulator_clock(client: anthropic.Anthropic,
                                               sim: SimulatorServer) -> None:
    _ask(client, SYSTEM, ttl="1h")
    sim.state.clock.advance(301)
    assert _ask(client, SYSTEM, ttl="1h").cache_read_input_tokens > 1024
    httpx.post(f"{sim.url}/_sim/clock", json={"advance": 3601},
               headers=sim.control_headers).raise_for_status()
    expired = _ask(client, SYSTEM, ttl="1h")
    assert expired.cache_read_input_tokens == 0
    assert expired.cache_creation.ephemeral_1h_input_tokens > 1024
    short = _ask(client, "Too short to cache.")
    assert (short.cache_creation_input_tokens, short.cache_read_input_tokens) == (0, 0)


def test_streaming_usage_matches_non_streaming(client: anthropic.Anthropic) -> None:
    _ask(client, SYSTEM)
    with client.messages.stream(
            model="claude-sim", max_tokens=64,
            system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": "hi"}]) as stream:
        streamed = stream.get_final_message().usage
    again = _ask(client, SYSTEM)
    assert streamed.model_dump() == again.model_dump()


def test_openai_reports_cached_tokens_inside_prompt_tokens(sim: SimulatorServer) -> None:
    body = {"model": "gpt-sim", "messages": [{"role": "system", "content": SYSTEM},
                                             {"role": "user", "content": "hi"}]}
    first = httpx.post(f"{sim.url}/v1/chat/completions", json=body).json()["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    body["messages"] += [{"role": "assistant", "content": "ok"},
                         {"role": "user", "content": "more"}]
    second = httpx.post(f"{sim.url}/v1/chat/completions", json=body).json()["usage"]
    assert second["prompt_tokens_details"]["cached_tokens"] == first["prompt_tokens"]
    assert second["prompt_tokens"] > second["prompt_tokens_details"]["cached_tokens"]
