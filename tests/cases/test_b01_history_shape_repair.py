"""B01: a history-shape 400 is repaired and retried once with different bytes, even in a
short session where a compaction would remove nothing. Real turns on the simulator."""

from __future__ import annotations

import json

import pytest

from simulator.faults import Fault
from sessions.models import Turn
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)

B01_BODY = ("messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block "
            "in the next message.")


@pytest.mark.parametrize("provider", ["simulator", "simulator-openai"])
def test_b01_history_shape_400_is_repaired_and_retried_once(chat, simulator, use_provider,
                                                            provider):
    use_provider(provider)
    session, turn = chat("list the files and read README.md")  # two tool calls, answered
    assert turn.status == Turn.Status.COMPLETED
    first = simulator.state.requests[-1].body
    endpoint = "anthropic" if provider == "simulator" else "openai"
    simulator.state.faults.push(Fault(kind="bad_request", endpoint=endpoint,
                                      message=B01_BODY.format(ids="toolu_T1, toolu_T2")))
    before = len(simulator.state.requests)
    session, turn = chat("now say hello", session=session)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    sent = simulator.state.requests[before:]
    assert [r.status for r in sent] == [400, 200]  # repaired, retried ONCE
    assert json.dumps(sent[0].body) != json.dumps(sent[1].body)
    # The retry carries the earlier tool exchanges as text, legal on every provider.
    wire = json.dumps(sent[1].body["messages"])
    assert "tool_use" not in wire and '"tool_calls"' not in wire
    assert "[called terminal" in wire
    assert not events(session, "compaction")
    assert events(session, "history.repaired")
    assert first  # the first turn really used structured tool calls
    assert "tool_use" in json.dumps(first["messages"]) or "tool_calls" in json.dumps(first)


def test_b01_a_second_shape_400_fails_the_turn_without_a_third_send(chat, simulator):
    session, turn = chat("list the files and read README.md")
    for _ in range(3):
        simulator.state.faults.push(Fault(kind="bad_request",
                                          message=B01_BODY.format(ids="toolu_T1")))
    before = len(simulator.state.requests)
    session, turn = chat("now say hello", session=session)
    assert turn.status == Turn.Status.FAILED
    sent = simulator.state.requests[before:]
    bodies = [json.dumps(r.body, sort_keys=True) for r in sent]
    assert len(bodies) == len(set(bodies)) and len(sent) == 2
