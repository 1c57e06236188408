"""B21, B22: a stream that dies after text was shown keeps that text as an incomplete
assistant message, names the interrupted tool call, and never runs it; repeated 529s fall
back to another provider. Real turns on the simulator through the real SDKs."""

from __future__ import annotations

import pytest

from simulator.faults import Fault
from simulator.script import Reply, Script, ScriptRule
from sessions.models import Message, Turn, UsageRecord
from sessions.services import workspace_path
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "The weather today is sunny with a light breeze from the west and no rain at all."


@pytest.mark.parametrize("provider", ["simulator", "simulator-openai"])
def test_b21_cut_during_a_tool_call_keeps_the_text_and_names_the_call(
        chat, simulator, use_provider, provider):
    use_provider(provider)
    simulator.state.script = Script([ScriptRule(reply=Reply(text="plain"))])
    simulator.state.faults.push(Fault(kind="stream_cut"))  # "I'll write the file." + cut
    session, turn = chat("write the notes")
    assert turn.status == Turn.Status.FAILED
    kept = Message.objects.get(session=session, role="assistant")
    assert kept.kind == "incomplete" and kept.content == "I'll write the file."
    assert not kept.tool_calls  # the half-built call is never stored...
    assert not (workspace_path(session) / "notes.md").exists()  # ...nor run
    failed = events(session, "turn.failed")[-1].payload
    assert failed["interrupted_tool"] == "write_file" and failed["partial_kept"]
    assert "write_file" in failed["reason"] and "not run" in failed["reason"]
    assert len(simulator.state.requests) == 1  # text was shown: no silent retry


@pytest.mark.parametrize("provider", ["simulator", "simulator-openai"])
def test_b22_error_event_after_two_deltas_keeps_the_partial_text(chat, simulator,
                                                                 use_provider, provider):
    use_provider(provider)
    simulator.state.script = Script([ScriptRule(reply=Reply(text=LONG))])
    simulator.state.faults.push(Fault(kind="stream_error", after_events=2))
    session, turn = chat("weather?")
    assert turn.status == Turn.Status.FAILED
    kept = Message.objects.get(session=session, role="assistant")
    assert kept.kind == "incomplete" and kept.content and LONG.startswith(kept.content)
    assert kept.content != LONG
    # The next turn replays the kept text as ordinary assistant text and goes on.
    simulator.state.script = Script([ScriptRule(reply=Reply(text="again"))])
    session, turn = chat("go on", session=session)
    assert turn.status == Turn.Status.COMPLETED
    assert kept.content in str(simulator.state.requests[-1].body["messages"])


def test_b22_repeated_529s_fall_back_to_another_provider(chat, simulator, use_provider):
    use_provider("simulator", FALLBACK_PROVIDERS=[("simulator-openai", "")])
    for _ in range(3):
        simulator.state.faults.push(Fault(kind="overloaded", endpoint="anthropic"))
    session, turn = chat("hello there")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    statuses = [(r.endpoint, r.status) for r in simulator.state.requests]
    assert statuses == [("anthropic", 529)] * 3 + [("openai", 200)]
    record = UsageRecord.objects.get(session=session)
    assert record.provider == "simulator-openai"
    failover = events(session, "provider.failover")[-1].payload
    assert failover["reason"] == "overloaded" and "simulator-openai" in failover["next"]
    finished = events(session, "turn.finished")[-1].payload
    assert finished["iterations"] == 1  # the fallback did not cost an iteration
    assert "simulator-openai" in ", ".join(finished["usage"]["served_by"])
