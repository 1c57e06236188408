"""A provider call that fails after the provider began to answer it is billed: its stream
opened (message_start reported the input and cache buckets), then the connection was cut or
an error event came. Before, such an attempt recorded nothing: a retried cut, a failed-over
route or a failed turn was spend no cost line, no spend page and no cap saw. Real turns on
the simulator through the real Anthropic SDK, the retry, failover, patience and budget
layers as the runner wires them."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.utils import timezone

from accounts.budgets import budget_spent
from accounts.templatetags.money import usd
from agents.context.tokens import estimate_payload_tokens, estimate_text_tokens
from accounts.models import SpendReservation, Team
from accounts.services import budget_set
from sessions.models import Message, Turn, UsageRecord
from simulator.faults import Fault
from simulator.script import Reply, Script, ScriptRule, ToolCallSpec
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "The weather today is sunny with a light breeze from the west and no rain at all."


def start_buckets(recorded) -> tuple[int, int, int]:
    """(input, cache read, cache write) the simulator's message_start reported for a
    recorded request (its final usage has the same input buckets)."""
    usage = recorded.usage
    return (usage["input_tokens"], usage["cache_read_input_tokens"],
            usage["cache_creation_input_tokens"])


def buckets(record: UsageRecord) -> tuple[int, int, int]:
    return (record.input_tokens, record.cache_read_tokens,
            record.cache_write_5m_tokens + record.cache_write_1h_tokens)


@pytest.fixture
def capped(make_user, alice):
    """A daily cap on alice's team, so every call is reserved and settled."""
    boss = make_user("boss", team="red", role="admin")
    return budget_set(actor=boss, scope="team", team=Team.objects.get(name="red"),
                      period="day", limit="5")


def test_a_cut_retried_without_visible_text_is_recorded_and_counted(chat, simulator, capped):
    """A tool-call reply cut mid-arguments (no text shown) is retried by the transport; the
    cut attempt gets its own record (input and cache as message_start reported, output as
    far as reported), priced at its route, in the turn's cost line and against the cap."""
    simulator.state.script = Script([
        ScriptRule(reply=Reply(text="Done."), tool_result="."),
        ScriptRule(reply=Reply(tool_calls=(ToolCallSpec(
            name="write_file", input={"path": "notes.md", "content": "x" * 400}),)))])
    simulator.state.faults.push(Fault(kind="stream_cut", endpoint="anthropic", after_events=1))
    session, turn = chat("write the notes")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert [r.status for r in simulator.state.requests][:2] == [200, 200]
    cut, retried = simulator.state.requests[:2]
    assert cut.fault == "stream_cut" and retried.fault is None
    records = list(UsageRecord.objects.filter(turn=turn).order_by("id"))
    assert len(records) == len(simulator.state.requests)  # every billed attempt, once
    failed = records[0]
    assert failed.raw.get("failed") is True and failed.estimated is False
    assert buckets(failed) == start_buckets(cut)  # reported, not a guess
    assert failed.output_tokens == 1  # what message_start reported; no message_delta came
    assert failed.provider == "simulator" and failed.cost_usd is not None
    assert failed.cost_usd > 0
    assert not records[1].raw.get("failed")
    finished = events(session, "turn.finished")[-1].payload["usage"]
    assert finished["calls"] == len(records)
    assert Decimal(finished["cost_usd"]) == sum(r.cost_usd for r in records)
    assert budget_spent(capped, now=timezone.now()) == sum(r.cost_usd for r in records)
    assert not SpendReservation.objects.exists()
    usage_events = events(session, "usage")
    assert len(usage_events) == len(records)
    assert Decimal(usage_events[0].payload["cost_usd"]) == failed.cost_usd


def test_an_error_event_after_text_fails_the_turn_and_keeps_text_and_usage(
        chat, simulator, capped):
    """An error event after two text deltas: no retry (the text was shown), the turn fails;
    the text and the billed attempt's record are kept, in one write, and the cap saw it."""
    simulator.state.script = Script([ScriptRule(reply=Reply(text=LONG))])
    simulator.state.faults.push(Fault(kind="stream_error", after_events=2))
    session, turn = chat("weather?")
    assert turn.status == Turn.Status.FAILED
    assert len(simulator.state.requests) == 1
    kept = Message.objects.get(session=session, role="assistant")
    assert kept.kind == "incomplete" and LONG.startswith(kept.content)
    record = UsageRecord.objects.get(turn=turn)
    assert record.raw.get("failed") is True
    assert buckets(record) == start_buckets(simulator.state.requests[0])
    assert record.cost_usd is not None and record.cost_usd > 0
    assert budget_spent(capped, now=timezone.now()) == record.cost_usd
    assert not SpendReservation.objects.exists()


def test_a_cut_then_a_fallback_route_names_the_route_that_billed(chat, simulator,
                                                                 use_provider, capped):
    """A cut on the primary provider, its retries spent on more cuts, then the fallback
    serves: every billed attempt is recorded at the route that billed it."""
    use_provider("simulator", FALLBACK_PROVIDERS=[("simulator-openai", "")])
    simulator.state.script = Script([
        ScriptRule(reply=Reply(text="Done."), tool_result="."),
        ScriptRule(reply=Reply(tool_calls=(ToolCallSpec(
            name="write_file", input={"path": "a.md", "content": "y" * 300}),)))])
    for _ in range(3):
        simulator.state.faults.push(Fault(kind="stream_cut", endpoint="anthropic",
                                          after_events=1))
    session, turn = chat("write it")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    endpoints = [r.endpoint for r in simulator.state.requests]
    assert endpoints[:4] == ["anthropic"] * 3 + ["openai"]
    records = list(UsageRecord.objects.filter(turn=turn).order_by("id"))
    failed = [r for r in records if r.raw.get("failed")]
    assert len(failed) == 3 and {r.provider for r in failed} == {"simulator"}
    assert [buckets(r) for r in failed] == [start_buckets(r) for r in
                                            simulator.state.requests[:3]]
    assert records[3].provider == "simulator-openai" and not records[3].raw.get("failed")
    assert budget_spent(capped, now=timezone.now()) == sum(
        r.cost_usd for r in records if r.cost_usd is not None)
    assert not SpendReservation.objects.exists()


def test_a_cut_chat_completions_stream_is_charged_an_estimate(chat, simulator, use_provider,
                                                              capped, client):
    """A chat-completions route reports usage only in the stream's last chunk: a stream cut
    mid-reply (a tool call cut inside its arguments, no text shown, then retried) used to
    record nothing for the cut attempt though the provider bills the prompt and what it
    generated. It now gets a record flagged ``estimated``: input = the token estimator over
    the posted payload (agents/context/tokens.py), output = the estimate of the arguments
    received; priced, in the turn's cost line, against the cap and on /spend/."""
    use_provider("simulator-openai")
    arguments = {"path": "notes.md", "content": "word " * 400}
    simulator.state.script = Script([
        ScriptRule(reply=Reply(text="Done."), tool_result="."),
        ScriptRule(reply=Reply(tool_calls=(ToolCallSpec(name="write_file",
                                                        input=arguments),)))])
    simulator.state.faults.push(Fault(kind="stream_cut", endpoint="openai", after_events=3))
    session, turn = chat("write the notes")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    cut, retried = simulator.state.requests[:2]
    assert cut.fault == "stream_cut" and retried.fault is None
    records = list(UsageRecord.objects.filter(turn=turn).order_by("id"))
    assert len(records) == len(simulator.state.requests)  # the cut attempt too
    estimate = records[0]
    assert estimate.estimated is True and estimate.raw.get("failed") is True
    assert not any(r.estimated for r in records[1:])  # the others reported their usage
    assert estimate.input_tokens == estimate_payload_tokens(cut.body, "cl100k")
    assert estimate.input_tokens > 0 and estimate.cache_read_tokens == 0
    # Only part of the call's arguments arrived: more than nothing, less than all.
    whole = estimate_text_tokens("write_file" + json.dumps(arguments))
    assert 0 < estimate.output_tokens < whole
    assert estimate.provider == "simulator-openai" and estimate.cost_usd > 0
    total = sum(r.cost_usd for r in records)
    finished = events(session, "turn.finished")[-1].payload["usage"]
    assert finished["calls"] == len(records) and Decimal(finished["cost_usd"]) == total
    assert budget_spent(capped, now=timezone.now()) == total
    assert not SpendReservation.objects.exists()
    assert events(session, "usage")[0].payload["estimated"] is True
    client.force_login(session.owner)
    page = client.get("/spend/").content.decode()
    assert f'id="spend-total">{usd(total)}<' in page
    assert f" · {len(records)} calls · " in page
