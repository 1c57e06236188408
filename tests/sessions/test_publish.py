"""The event publisher (sessions/events.py): what a process publishes reaches the channel
layer in commit order per group, batched, and through Redis in one pipelined round trip per
batch; a live run.events batch reaches the socket as one frame per event, in order.

The Redis tests run in services mode (REDIS_URL; the real pub/sub channel layer)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import pytest
from channels.layers import get_channel_layer

from sessions import events
from sessions.events import _coalesce_batch, group_publish, session_group


def test_a_batch_keeps_each_groups_order_and_merges_consecutive_events():
    def event(group, n):
        return (group, {"type": "run.event", "event": {"seq": n}, "sent_at": float(n)})

    items = [event("a", 1), event("b", 1), event("a", 2),
             ("a", {"type": "force.close"}), event("a", 3), event("b", 2)]
    out = _coalesce_batch(items)
    assert out == [
        ("a", {"type": "run.events", "events": [{"seq": 1}, {"seq": 2}], "sent_at": 1.0}),
        ("a", {"type": "force.close"}),
        ("a", {"type": "run.event", "event": {"seq": 3}, "sent_at": 3.0}),
        ("b", {"type": "run.events", "events": [{"seq": 1}, {"seq": 2}], "sent_at": 1.0}),
    ]


def test_a_batch_longer_than_the_cap_is_split_in_order():
    lane = [("g", {"type": "run.event", "event": {"seq": n}, "sent_at": 0.0})
            for n in range(events.MAX_BATCH_EVENTS + 5)]
    out = _coalesce_batch(lane)
    assert [len(m["events"]) for _, m in out] == [events.MAX_BATCH_EVENTS, 5]
    assert [e["seq"] for _, m in out for e in m["events"]] == list(range(len(lane)))


def test_a_layer_without_redis_internals_is_sent_one_message_at_a_time():
    from channels.layers import InMemoryChannelLayer

    assert events._redis_sender(InMemoryChannelLayer()) is None


@pytest.mark.services
def test_events_of_many_groups_reach_redis_in_order_in_pipelined_batches(settings):
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"].startswith("channels_redis.pubsub"), \
        "services tests need REDIS_URL"
    layer = get_channel_layer()
    groups = [session_group(900_000 + n) for n in range(5)]
    publisher = events._publisher()
    calls: list[int] = []

    async def sender_in_use():
        # The pipelined sender is the one the publisher picked for this layer (a
        # channels-redis whose internals changed would fall back to one PUBLISH each).
        return publisher._sender(layer)

    sender = asyncio.run_coroutine_threadsafe(sender_in_use(), publisher.loop).result(5)
    assert sender is not events._one_by_one

    def counting(original):
        async def wrapped(layer, items):
            calls.append(len(items))
            await original(layer, items)
        return wrapped

    publisher._senders[id(layer)] = (layer, counting(sender))

    async def scenario() -> dict[str, list[int]]:
        channel = await layer.new_channel()
        for group in groups:
            await layer.group_add(group, channel)
        await asyncio.sleep(0.2)  # subscribed before anything is published
        for n in range(1, 101):
            for group in groups:
                group_publish(group, {"seq": n, "type": "text.delta", "group": group})
        seen: dict[str, list[int]] = {g: [] for g in groups}
        while sum(len(v) for v in seen.values()) < 500:
            message = await asyncio.wait_for(layer.receive(channel), timeout=10)
            batch = message["events"] if message["type"] == "run.events" else [message["event"]]
            for event in batch:
                seen[event["group"]].append(event["seq"])
        for group in groups:
            await layer.group_discard(group, channel)
        return seen

    try:
        # On a thread of its own: an earlier test in the same process may have left an event
        # loop running on this one, where async_to_sync refuses to run (failed in CI).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            seen = pool.submit(asyncio.run, scenario()).result(60)
    finally:
        publisher._senders[id(layer)] = (layer, sender)
    assert all(v == list(range(1, 101)) for v in seen.values())
    # 500 events left in far fewer sends than events: batches, one pipeline each.
    assert sum(calls) < 500 and len(calls) < 100
