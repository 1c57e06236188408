"""A provider that names every tool call "call_0" (llama.cpp's server, some gateways), turn
after turn, through the real path: the worker keeps the repaired history between turns, and
no request may carry one tool_use id twice (Anthropic and the simulator reject it with a
400, which would cost a failed request and a strict repair every turn)."""

from __future__ import annotations

import pytest

from sessions.models import Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task
from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice")


def test_a_provider_reusing_call_0_every_turn_never_sends_a_duplicate_id(alice, simulator):
    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results and request.last_user_text.startswith("read"):
            return Reply(text="read it")
        return Reply(text="reading", tool_calls=(
            ToolCallSpec(name="read_file", input={"path": "notes.md"}, id="call_0"),))

    simulator.state.script = Script(policy)
    session = session_create(user=alice)
    for n in range(4):
        turn = turn_start(session=session, user=alice, text=f"read the notes ({n})")
        turn_run_task.apply(args=[session.pk])
        turn.refresh_from_db()
        assert turn.status == Turn.Status.COMPLETED, turn.error
    requests = [r for r in simulator.state.requests if r.body.get("messages")]
    assert requests and all(r.status == 200 for r in requests), [
        (r.status, (r.error or "")[:200]) for r in requests if r.status != 200]
    last = requests[-1].body["messages"]
    ids = [b["id"] for m in last if isinstance(m["content"], list)
           for b in m["content"] if b.get("type") == "tool_use"]
    assert len(ids) == 4 and len(set(ids)) == 4, ids
