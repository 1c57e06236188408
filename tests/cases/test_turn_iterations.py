"""Issue 11 item 8: Turn.iterations is written: the iterations the turn's budget charged
(one per model reply, refunds given back: sessions/runner.py _charged), summed over resumes (a
column nobody wrote is either wired or removed). A real turn on the simulator: one tool call,
then the answer."""

from __future__ import annotations

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)


def reader(request):
    if request.tool_results:
        return Reply(text="Done.")
    return Reply(text="Looking.", tool_calls=(
        ToolCallSpec(name="terminal", input={"command": "echo hi"}),))


def test_turn_iterations_count_the_model_replies(chat, simulator):
    simulator.state.script = Script(reader)
    session, turn = chat("say hi through the terminal")
    assert turn.status == "completed", turn.error
    finished = events(session, "turn.finished")[-1].payload
    assert turn.iterations == 2 == finished["iterations"] == len(simulator.state.requests)
    session, second = chat("once more", session=session)
    assert second.iterations == 2  # per turn, not per session
