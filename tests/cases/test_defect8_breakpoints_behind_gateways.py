"""Issue 10 defect 8: breakpoint limits behind gateways. A gateway that adds its own
marker on the tools, the limit learned from its 400 kept in the database (a new process
does not pay the 400 again), a per-endpoint setting, and the 5m-on-tools vs 1h-on-system
conflict recovered by clamping. Real turns on the simulator in gateway mode."""

from __future__ import annotations

import json

import pytest

from sessions.models import BreakpointLimit, Turn
from sessions import runner

pytestmark = pytest.mark.django_db(transaction=True)


def markers(body: dict) -> int:
    return json.dumps(body).count('"cache_control"')


@pytest.fixture(autouse=True)
def fresh_transports():
    runner._transport.cache_clear()  # a transport remembers a clamp; start each test new
    yield
    runner._transport.cache_clear()


def test_defect8_a_gateway_5m_tool_marker_before_a_1h_system_marker_is_clamped(
        chat, simulator, use_provider):
    use_provider("simulator", CACHE_TTL="5m", CACHE_PROMPT_TTL="1h")
    simulator.state.configure(gateway_tool_ttl="5m")
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    first, second = simulator.state.requests
    assert first.status == 400 and "must not come after" in first.error
    assert second.status == 200 and '"1h"' not in json.dumps(second.body["system"])


def test_defect8_learned_limit_is_persisted_and_a_new_process_skips_the_400(
        chat, simulator, use_provider):
    use_provider("simulator", CACHE_TTL="5m")  # counts markers; TTLs fixed at 5m
    simulator.state.configure(gateway_tool_ttl="5m")
    session, turn = chat("hello there")  # 3 of ours + the gateway's: fits
    session, turn = chat("hello again", session=session)  # 4 + 1: the gateway's 400
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert [r.status for r in simulator.state.requests] == [200, 400, 200]
    assert "A maximum of 4" in simulator.state.requests[1].error
    assert BreakpointLimit.objects.get(base_url=simulator.url).limit == 3
    runner._transport.cache_clear()  # what a new worker process starts with
    before = len(simulator.state.requests)
    session, turn = chat("third message", session=session)
    assert [r.status for r in simulator.state.requests[before:]] == [200]
    assert markers(simulator.state.requests[-1].body) == 4  # 3 of ours + the gateway's


def test_defect8_a_per_endpoint_setting_lowers_the_count_for_a_known_proxy(
        chat, simulator, use_provider):
    use_provider("simulator", CACHE_TTL="5m", BREAKPOINT_LIMITS={simulator.url: 2})
    simulator.state.configure(gateway_tool_ttl="5m")
    session, _ = chat("hello there")
    session, turn = chat("hello again", session=session)
    assert turn.status == Turn.Status.COMPLETED
    assert all(r.status == 200 for r in simulator.state.requests)
    assert all(markers(r.body) <= 3 for r in simulator.state.requests)


def test_defect8_the_default_strategy_first_turn_is_clamped_behind_a_5m_gateway(
        chat, simulator):
    """The default strategy keeps a new session's prompt for an hour
    (agents/cache_strategy.py): behind a gateway that adds a 5m tool marker that is a TTL
    order error, learned once and clamped, and the turn completes."""
    simulator.state.configure(gateway_tool_ttl="5m")
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    first, second = simulator.state.requests
    assert first.status == 400 and "must not come after" in first.error
    assert second.status == 200 and '"1h"' not in json.dumps(second.body["system"])
