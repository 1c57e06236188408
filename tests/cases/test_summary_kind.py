"""Issue 11 item 4: a summary is a summary by its Message.kind, never by its text. A user
who types the compaction marker writes an ordinary message, through real turns on the
simulator and a real `/compact` whose summariser fails (the deterministic fallback is
where a mistaken summary would show: its text would be quoted as "Earlier summary")."""

from __future__ import annotations

import pytest

from agents.context.compaction import SUMMARY_PREFIX
from simulator.faults import Fault
from simulator.script import Reply, Script, ToolCallSpec
from sessions.models import Message
from sessions.rendering import transcript_context
from sessions.services import workspace_path
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-3-haiku-20240307"
TYPED = f"{SUMMARY_PREFIX}giraffe notes, please read big.txt"


def reader(request):
    if not request.tool_names:  # the summariser (no tools offered)
        return Reply(text="Summary: reads of big.txt.")
    if request.tool_results:
        return Reply(text="Read it.")
    return Reply(text="Reading.", tool_calls=(
        ToolCallSpec(name="read_file", input={"path": "big.txt"}),))


def test_a_user_typing_the_summary_marker_is_not_a_summary(chat, simulator, use_provider,
                                                           alice):
    use_provider("simulator", MODEL=MODEL)
    simulator.state.script = Script(reader)
    session, _ = chat("please read big.txt, round 0")
    (workspace_path(session) / "big.txt").write_text(
        "\n".join(f"line {i}: filler text about topic zebra number {i}" for i in range(1_600)))
    for text in (TYPED, "please read big.txt, round 2", "please read big.txt, round 3",
                 "please read big.txt, round 4"):
        session, turn = chat(text, session=session)
        assert turn.status == "completed", turn.error
    typed = Message.objects.get(session=session, role="user", content=TYPED)
    assert typed.kind == ""
    page = transcript_context(session=session, user=alice)
    shown = [i["item"] for i in page["items"] if i["kind"] == "message"
             and i["item"]["message"]["content"] == TYPED]
    assert shown and shown[0]["message"]["kind"] == ""

    simulator.state.faults.push(Fault(kind="prompt_too_long"))  # the summariser fails
    session, turn = chat("/compact", session=session)
    assert turn.status == "completed", turn.error
    assert events(session, "compaction")[-1].payload["kind"] == "fallback"
    summary = Message.objects.get(session=session, active=True, kind="summary")
    # The typed message is one of the user's requests, not an earlier summary.
    assert "Earlier summary:" not in summary.content
    assert "giraffe notes" in summary.content.split("User requests in the dropped span:")[1]
    # The marker the user typed made no row a summary; only the compaction's row is one.
    assert Message.objects.filter(session=session, kind="summary").count() == 1
