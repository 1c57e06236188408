"""B27 refusals, B28 usage-less streams, B17 empty replies, B18 empty tool names: real turns
on the simulator."""

from __future__ import annotations

import json

import pytest

from simulator.faults import Fault
from simulator.script import Reply, Script, ScriptRule, ToolCallSpec
from sessions.models import Message, Turn, UsageRecord
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)


def test_b27_refusal_is_shown_as_one_billed_once_and_the_user_can_rephrase(chat, simulator):
    simulator.state.faults.push(Fault(kind="refusal"))
    session, turn = chat("something the model refuses")
    assert turn.status == Turn.Status.COMPLETED
    assert events(session, "turn.finished")[-1].payload["status"] == "refused"
    refusal = Message.objects.get(session=session, role="assistant")
    assert refusal.kind == "refusal" and refusal.content == ""  # a field, not invented text
    assert UsageRecord.objects.filter(session=session).count() == 1
    assert len(simulator.state.requests) == 1  # never resent
    session, turn = chat("a rephrased request", session=session)
    assert turn.status == Turn.Status.COMPLETED
    sent = simulator.state.requests[-1].body["messages"]
    assert all(m["role"] == "user" for m in sent)  # the empty refusal is not replayed
    assert "(empty)" not in json.dumps(sent)


def test_b27_refusal_is_rendered_visibly(chat, simulator, login, alice):
    simulator.state.faults.push(Fault(kind="refusal"))
    session, _ = chat("refuse me")
    page = login(alice).get(f"/sessions/{session.pk}/").content.decode()
    assert "declined to answer" in page and "refused" in page


def test_b27_openai_refusal_field_is_kept_as_a_refusal(chat, simulator, use_provider):
    use_provider("simulator-openai")
    simulator.state.faults.push(Fault(kind="refusal", message="Cannot help (test)"))
    session, turn = chat("refuse me")
    assert events(session, "turn.finished")[-1].payload["status"] == "refused"
    assert Message.objects.get(session=session, role="assistant").kind == "refusal"


def test_b28_a_stream_without_usage_records_a_flagged_estimate(chat, simulator, use_provider):
    use_provider("simulator-openai")
    simulator.state.faults.push(Fault(kind="no_usage"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.COMPLETED
    record = UsageRecord.objects.get(session=session)
    assert record.estimated and record.input_tokens > 100 and record.output_tokens > 0
    assert events(session, "usage")[-1].payload["estimated"] is True
    session, _ = chat("again", session=session)  # with usage: not flagged
    assert not UsageRecord.objects.filter(session=session).order_by("-id").first().estimated


def test_b17_empty_assistant_turn_is_never_replayed_as_invented_text(chat, simulator):
    simulator.state.script = Script([ScriptRule(user="first", reply=Reply(text="")),
                                     ScriptRule(reply=Reply(text="fine"))])
    session, turn = chat("first message")
    assert turn.status == Turn.Status.COMPLETED
    session, turn = chat("second message", session=session)
    assert turn.status == Turn.Status.COMPLETED
    body = simulator.state.requests[-1].body
    assert "(empty)" not in json.dumps(body)
    texts = json.dumps(body["messages"])
    assert "first message" in texts and "second message" in texts


def test_b17_empty_reply_on_a_strict_openai_server(chat, simulator, use_provider):
    use_provider("simulator-openai")
    simulator.state.script = Script([ScriptRule(user="first", reply=Reply(text="")),
                                     ScriptRule(reply=Reply(text="fine"))])
    session, _ = chat("first message")
    session, turn = chat("second message", session=session)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert "(empty)" not in json.dumps(simulator.state.requests[-1].body)


def test_b18_two_empty_tool_names_in_a_row_end_the_turn_honestly(chat, simulator, settings):
    settings.HERMES = {**settings.HERMES, "MAX_ITERATIONS": 10}
    simulator.state.script = Script([ScriptRule(reply=Reply(text="calling", tool_calls=(
        ToolCallSpec(name="", input={"path": "x"}),)))])
    session, turn = chat("read x")
    assert turn.status == Turn.Status.COMPLETED
    finished = events(session, "turn.finished")[-1].payload
    assert finished["status"] == "empty_tool_name"
    assert len(simulator.state.requests) == 2 == finished["iterations"]
    results = Message.objects.filter(session=session, role="tool")
    assert results.count() == 2 and all(r.is_error for r in results)  # pairing held
    assert all("read_file" not in r.content for r in results)  # no catalogue
    assert "empty name" in finished["text"]
