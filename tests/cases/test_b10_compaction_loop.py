"""B10: on an incompressible session the breaker trips, the user is told, and no turn runs
more than one compaction. Real turns on the simulator with a 20K window."""

from __future__ import annotations

from collections import Counter

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from sessions.context import breaker_load
from sessions.models import RunEvent, Session
from sessions.rendering import event_html
from sessions.events import event_to_dict
from sessions.services import session_create, workspace_path
from tests.cases.conftest import events

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 20_000


def reader(request):
    if not request.tool_names:
        return Reply(text="Summary: the user keeps reading big.txt.")
    if request.tool_results:
        return Reply(text="Read it.")
    return Reply(text="Reading.", tool_calls=(
        ToolCallSpec(name="read_file", input={"path": "big.txt"}),))


def test_b10_breaker_trips_with_a_notice_and_one_compaction_per_turn(
        chat, alice, simulator, use_provider, settings):
    use_provider("simulator", CONTEXT_WINDOW=WINDOW)
    simulator.state.configure(context_window=WINDOW)
    simulator.state.script = Script(reader)
    home = settings.HERMES["HOME"]
    home.mkdir(parents=True, exist_ok=True)
    # The system prompt alone sits over the 15K threshold: compaction can never get under.
    # Sized with the tool floor of issues 12-13 (delegate, memory, todo, clarify, execute_code):
    # over the threshold, under the window (else an overflow compaction joins the turn).
    (home / "SOUL.md").write_text("You are a careful agent. " * 1_750)
    session = session_create(user=alice)
    (workspace_path(session) / "big.txt").write_text("zebra filler line\n" * 100)
    for n in range(8):
        session, turn = chat(f"please read big.txt, round {n}", session=session)
    assert breaker_load(Session.objects.get(pk=session.pk)).tripped
    per_turn = Counter(e.payload["turn_id"] for e in events(session, "compaction"))
    assert per_turn and max(per_turn.values()) == 1, per_turn  # at most one per turn
    notices = events(session, "compaction.breaker_tripped")
    assert notices, "the user must be told that automatic compaction stopped"
    assert "paused" in event_html(event_to_dict(notices[-1]))
    # Once tripped, later turns run no automatic compaction at all.
    tripped_at = RunEvent.objects.filter(session=session, type="compaction",
                                         payload__reason="threshold").count()
    for n in range(2):
        chat(f"please read big.txt, late round {n}", session=session)
    assert RunEvent.objects.filter(session=session, type="compaction",
                                   payload__reason="threshold").count() == tripped_at
