"""B25: context-overflow bodies differ by provider; the size hint is used before compaction
and identical bytes are never resent after an error. Real turns on the simulator."""

from __future__ import annotations

import json

import pytest

from simulator.faults import Fault
from sessions.models import Turn
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)


def _prompt_tokens(record) -> int:
    usage = record.usage
    return (usage["input_tokens"] + usage.get("cache_read_input_tokens", 0)
            + usage.get("cache_creation_input_tokens", 0))


def test_b25_input_fits_so_max_tokens_is_lowered_not_compacted(chat, simulator):
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.COMPLETED
    prompt = _prompt_tokens(simulator.state.requests[-1])
    # The model's real window leaves room for the input but not for 4,096 output tokens.
    simulator.state.configure(context_window=prompt + 1_500)
    before = len(simulator.state.requests)
    session, turn = chat("hello again", session=session)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    sent = simulator.state.requests[before:]
    assert [r.status for r in sent] == [400, 200]
    assert "input length and max_tokens exceed context limit" in sent[0].error
    assert sent[1].body["max_tokens"] < sent[0].body["max_tokens"] == 4096
    assert sent[1].body["messages"] == sent[0].body["messages"]  # only the output budget
    assert not events(session, "compaction")


def test_b25_nothing_to_compact_never_resends_the_same_bytes(chat, simulator):
    simulator.state.faults.push(Fault(kind="prompt_too_long"))
    simulator.state.faults.push(Fault(kind="prompt_too_long"))
    simulator.state.faults.push(Fault(kind="prompt_too_long"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.FAILED
    bodies = [json.dumps(r.body, sort_keys=True) for r in simulator.state.requests]
    assert len(bodies) == len(set(bodies)), "an identical payload was sent twice"
    failed = events(session, "turn.failed")[-1]
    assert "context_overflow" in failed.payload["reason"]


def test_b25_openai_shape_overflow_is_parsed_and_compacted_or_failed_once(
        chat, simulator, use_provider):
    use_provider("simulator-openai")
    simulator.state.faults.push(Fault(kind="prompt_too_long", endpoint="openai"))
    session, turn = chat("hello there")
    # A short session has nothing to compact: the turn fails after ONE request, clearly.
    assert turn.status == Turn.Status.FAILED
    assert len(simulator.state.requests) == 1
    assert "context_overflow" in events(session, "turn.failed")[-1].payload["reason"]
