"""B11 and issue 10 defect 7: the summariser through real compactions on the simulator.
Its output cap is the model's, a summary call that overflows falls back to a deterministic
note and the event and `/compact` say so, and its input is not cut past ~160K chars."""

from __future__ import annotations

import pytest

from agents.context.compaction import (SUMMARISER_INPUT_MAX_CHARS, CompactionPlan,
                               build_summary_request)
from agents.messages import Message as AgentMessage
from simulator.faults import Fault
from simulator.script import Reply, Script
from simulator.script import ToolCallSpec
from agents.context.tokens import estimate_text_tokens
from sessions.events import event_to_dict
from sessions.models import Message
from sessions.rendering import event_html
from sessions.services import workspace_path
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-3-haiku-20240307"  # 4,096 output tokens, on a profile whose cap is 64,000


def reader(request):
    if not request.tool_names:  # the summariser (no tools offered)
        return Reply(text="Summary: the user read big.txt several times (topic zebra).")
    if request.tool_results:
        return Reply(text="Read it.")
    return Reply(text="Reading.", tool_calls=(
        ToolCallSpec(name="read_file", input={"path": "big.txt"}),))


@pytest.fixture
def long_session(chat, simulator, use_provider):
    use_provider("simulator", MODEL=MODEL)
    simulator.state.configure(output_caps={MODEL: 4_096})
    simulator.state.script = Script(reader)
    session, _ = chat("please read big.txt, round 0")
    (workspace_path(session) / "big.txt").write_text(
        "\n".join(f"line {i}: filler text about topic zebra number {i}" for i in range(1_600)))
    for n in range(1, 5):
        session, turn = chat(f"please read big.txt, round {n}", session=session)
        assert turn.status == "completed", turn.error
    return session


def test_defect7_summary_output_cap_is_the_models(long_session, chat, simulator):
    session, turn = chat("/compact", session=long_session)
    summary_calls = [r for r in simulator.state.requests if not r.body.get("tools")]
    assert summary_calls and all(r.status == 200 for r in summary_calls)
    assert summary_calls[-1].body["max_tokens"] <= 4_096
    compaction = events(session, "compaction")[-1].payload
    assert compaction["kind"] == "summary" and not compaction["error"]
    assert events(session, "turn.finished")[-1].payload["text"] == "/compact done."


def test_b11_a_summary_call_that_overflows_falls_back_and_says_so(long_session, chat,
                                                                  simulator):
    simulator.state.faults.push(Fault(kind="prompt_too_long"))  # the summary request's
    session, turn = chat("/compact", session=long_session)
    assert turn.status == "completed"
    compaction = events(session, "compaction")[-1].payload
    assert compaction["kind"] == "fallback" and "prompt is too long" in compaction["error"]
    report = events(session, "turn.finished")[-1].payload["text"]
    assert "summariser failed" in report and "deterministic" in report
    summary = Message.objects.get(session=session, active=True, kind="summary")
    assert "summariser was unavailable" in summary.content
    shown = event_html(event_to_dict(events(session, "compaction")[-1]))  # the live UI
    assert "The summariser failed" in shown and "Older messages were summarised" not in shown
    # The session goes on after the fallback.
    session, turn = chat("please read big.txt, round 9", session=session)
    assert turn.status == "completed", turn.error


def test_defect7_summariser_input_keeps_160k_chars_when_the_window_allows():
    middle = tuple(AgentMessage(role="user" if i % 2 == 0 else "assistant",
                                content=f"message {i} " + "lorem ipsum dolor " * 110)
                   for i in range(100))  # ~200,000 rendered chars, no tool output
    plan = CompactionPlan(head=(), middle=middle, tail=(), middle_tokens=50_000,
                          total_tokens=50_000)
    request = build_summary_request(plan, model="m", window=1_000_000, model_max_output=8_000,
                                    estimate_text=estimate_text_tokens)
    prompt = request.messages[0].content
    assert SUMMARISER_INPUT_MAX_CHARS * 0.95 < len(prompt) < SUMMARISER_INPUT_MAX_CHARS * 1.05
