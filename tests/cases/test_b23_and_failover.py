"""B23 (retry-after above the cap, quota), credential pools and fallbacks with shared
cooldowns (issue 10 build 1), the consecutive-error cap (build 2) and same-role merging on
strict servers (defect 6): real turns on the simulator."""

from __future__ import annotations

import time

import pytest

from simulator.faults import Fault
from agents.transports.errors import QUOTA_ADVICE
from sessions.models import Message, ProviderCooldown, Turn, UsageRecord
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)

POOL = {"simulator": [("alpha", "key-a"), ("beta", "key-b")]}


def test_b23_a_retry_after_above_the_cap_fails_clearly_without_sleeping(chat, simulator):
    simulator.state.faults.push(Fault(kind="rate_limit", retry_after="120"))
    started = time.monotonic()
    session, turn = chat("hello there")
    assert time.monotonic() - started < 30  # the 120 s hint was not slept on
    assert turn.status == Turn.Status.FAILED
    assert len(simulator.state.requests) == 1
    assert "rate_limit" in events(session, "turn.failed")[-1].payload["reason"]


def test_b23_a_retry_after_above_the_cap_fails_over(chat, simulator, use_provider):
    use_provider("simulator", FALLBACK_PROVIDERS=[("simulator-openai", "")])
    simulator.state.faults.push(Fault(kind="rate_limit", retry_after="120",
                                      endpoint="anthropic"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert [r.endpoint for r in simulator.state.requests] == ["anthropic", "openai"]
    rest = ProviderCooldown.objects.get(scope="key:simulator:")
    assert rest.until.timestamp() - time.time() > 100  # the server's hint is honoured


@pytest.mark.parametrize("provider", ["simulator", "simulator-openai"])
def test_b23_quota_is_final_and_says_what_to_do(chat, simulator, use_provider, provider):
    use_provider(provider)
    simulator.state.faults.push(Fault(kind="quota"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.FAILED
    assert len(simulator.state.requests) == 1  # never retried
    reason = events(session, "turn.failed")[-1].payload["reason"]
    assert "billing" in reason and QUOTA_ADVICE in reason


def test_a_throttled_key_rotates_rests_in_the_database_and_is_skipped_next_turn(
        chat, simulator, use_provider):
    use_provider("simulator", KEY_POOLS=POOL)
    for _ in range(3):  # the route's own retries back off on key-a, then it rotates
        simulator.state.faults.push(Fault(kind="rate_limit", api_key="key-a"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert [r.api_key for r in simulator.state.requests] == ["key-a"] * 3 + ["key-b"]
    assert UsageRecord.objects.get(session=session).credential == "beta"
    failover = events(session, "provider.failover")[-1].payload
    assert "key alpha" in failover["text"] and "key beta" in failover["text"]
    assert "key-a" not in str(failover) and "key-b" not in str(failover)  # never the secret
    assert ProviderCooldown.objects.filter(scope="key:simulator:alpha").exists()
    # Another turn (any worker: the rest is a row) goes straight to the rested-out key.
    session, turn = chat("hello again", session=session)
    assert simulator.state.requests[-1].api_key == "key-b"


def test_cooldowns_escalate_on_repeated_throttling_and_reset_on_success(
        chat, simulator, use_provider):
    use_provider("simulator", KEY_POOLS=POOL)
    lengths = []
    for round_ in range(2):
        ProviderCooldown.objects.filter(scope="key:simulator:alpha").update(
            until="2000-01-01T00:00:00Z")  # rest over, strikes kept
        for _ in range(3):
            simulator.state.faults.push(Fault(kind="rate_limit", api_key="key-a"))
        chat(f"round {round_}")
        row = ProviderCooldown.objects.get(scope="key:simulator:alpha")
        lengths.append(row.until.timestamp() - time.time())
    assert row.strikes == 2 and lengths[1] > lengths[0] * 1.5
    ProviderCooldown.objects.filter(scope="key:simulator:alpha").update(
        until="2000-01-01T00:00:00Z")
    chat("round ok")  # alpha serves again: its strikes are reset
    assert simulator.state.requests[-1].api_key == "key-a"
    assert not ProviderCooldown.objects.filter(scope="key:simulator:alpha").exists()


def test_deterministic_failures_fail_in_one_attempt(chat, simulator):
    simulator.state.faults.push(Fault(kind="bad_request", status=404, error_type="not_found_error",
                                      message="model: no-such-model"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.FAILED
    assert len(simulator.state.requests) == 1
    assert "model_not_found" in events(session, "turn.failed")[-1].payload["reason"]


def test_build2_consecutive_model_errors_are_capped(chat, simulator):
    # Overflows the classifier can only answer with compaction: the cap ends the turn.
    for _ in range(10):
        simulator.state.faults.push(Fault(kind="prompt_too_long"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.FAILED
    assert len(simulator.state.requests) <= 3


def test_defect6_same_role_messages_merge_on_a_strict_server(chat, simulator, use_provider):
    use_provider("simulator-openai")
    for _ in range(3):
        simulator.state.faults.push(Fault(kind="server_error", endpoint="openai"))
    session, turn = chat("first try")
    assert turn.status == Turn.Status.FAILED
    session, turn = chat("second try", session=session)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    roles = [m["role"] for m in simulator.state.requests[-1].body["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:]))
    user = simulator.state.requests[-1].body["messages"][-1]["content"]
    assert "first try" in user and "second try" in user
    assert Message.objects.filter(session=session, role="user").count() == 2  # rows intact


def test_defect6_the_simulator_rejects_what_strict_templates_reject(simulator):
    import httpx

    body = {"model": "m", "messages": [{"role": "user", "content": "a"},
                                       {"role": "user", "content": "b"}]}
    answer = httpx.post(f"{simulator.url}/v1/chat/completions", json=body)
    assert answer.status_code == 400
    assert "roles must alternate" in answer.json()["error"]["message"]
