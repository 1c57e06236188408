"""A fresh user's finding: the slow demo's three steps all said "running" the moment the
reply arrived, though they run one after another (a reply's calls run segment by segment:
agents/tools/dispatch.py). A card now says "queued" until its call is announced as started
(``tool.called``), on the page (a reload mid-turn) and in the live frames (the socket and
the polling endpoint send the same). Through a real turn: the simulator over HTTP, a real
Celery worker, the real command backend."""

from __future__ import annotations

import time

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from sessions.models import RunEvent, Turn
from sessions.services import session_create, turn_start
from tests.tools.test_clarify_card_status import card_states

pytestmark = pytest.mark.django_db(transaction=True)


def wait_completed(turn, seconds: float = 30) -> None:
    """Wait until the real worker has completed ``turn``."""
    deadline = time.monotonic() + seconds
    while Turn.objects.get(pk=turn.pk).status != Turn.Status.COMPLETED:
        assert time.monotonic() < deadline, "the turn never finished"
        time.sleep(0.1)


def two_steps(request):
    if request.tool_results:
        return Reply(text="Both steps ran.")
    return Reply(text="Two steps, one after the other.", tool_calls=(
        ToolCallSpec(name="terminal", input={"command": "sleep 3; echo one"}),
        ToolCallSpec(name="terminal", input={"command": "echo two > two.txt"})))


def test_a_call_that_has_not_started_says_queued_live_and_after_a_reload(
        make_user, hermes_settings, simulator, worker, login):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}
    simulator.state.script = Script(two_steps)
    alice = make_user("alice")
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="run the two steps")
    client = login(alice)
    deadline = time.monotonic() + 30
    while not RunEvent.objects.filter(session=session, type="tool.called").exists():
        assert time.monotonic() < deadline, "the first step never started"
        time.sleep(0.05)

    # Mid-turn (the first step sleeps 3 s): a reload shows the first running, the second not.
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert card_states(page) == [("running", "running"), ("queued", "queued")]
    assert "Not started yet: it runs after the calls before it." in page

    wait_completed(turn)
    # The live path, as the polling fallback (and a reconnecting socket) replays it: the
    # reply's cards arrive queued, each turns running when its own call starts.
    frames = client.get(f"/sessions/{session.pk}/events/?after=0").json()["events"]
    reply = next(f for f in frames if f["type"] == "message.added"
                 and f["payload"]["message"].get("tool_calls"))
    assert card_states(reply["html"]) == [("queued", "queued"), ("queued", "queued")]
    called = [f for f in frames if f["type"] == "tool.called"]
    assert [card_states(f["html"]) for f in called] == [[("running", "running")]] * 2
    assert frames.index(reply) < frames.index(called[0])
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert card_states(page) == [("done", "done"), ("done", "done")]


def test_a_finished_step_says_done_before_the_steps_after_it_end(
        make_user, hermes_settings, simulator, worker, login):
    """A fresh user's finding: sequential steps stayed "running" until the last one ended
    (a batch's results are stored together). A finished call's ``tool.ended`` rides on the
    next segment's announcement, so its card turns done while the next step runs, with no
    write of its own; the last step's end comes with the results."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}
    simulator.state.script = Script(two_steps)
    alice = make_user("alice")
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="run the two steps")
    client = login(alice)
    wait_completed(turn)
    frames = client.get(f"/sessions/{session.pk}/events/?after=0").json()["events"]
    called = [f for f in frames if f["type"] == "tool.called"]
    ended = [f for f in frames if f["type"] == "tool.ended"]
    first_id = called[0]["payload"]["tool_call"]["id"]
    assert [f["payload"]["tool_call_id"] for f in ended] == [first_id]
    assert called[0]["seq"] < ended[0]["seq"] < called[1]["seq"]
    assert ended[0]["seq"] + 1 == called[1]["seq"]  # one write: no commit of its own
    assert card_states(ended[0]["html"]) == [("done", "done")]
    assert "once the calls after it have run" in ended[0]["html"]


def test_a_call_the_policy_denies_says_denied_live_and_after_a_reload(
        make_user, hermes_settings, simulator, worker, login):
    """A fresh user's finding: a refused call's card said "error" (it never ran). Its result
    now carries the refusal (metadata ``denied``): "denied" in the live frame and on the
    page, the text saying why."""
    from accounts.models import Team

    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}
    simulator.state.script = Script(lambda request: Reply(text="Done.") if request.tool_results
                                    else Reply(text="Trying.", tool_calls=(ToolCallSpec(
                                        name="terminal", input={"command": "sudo whoami"}),)))
    alice = make_user("alice", team="red")
    Team.objects.filter(name="red").update(deny_rules=["sudo *"])
    session = session_create(user=alice)
    turn = turn_start(session=session, user=alice, text="who am i")
    client = login(alice)
    wait_completed(turn)
    frames = client.get(f"/sessions/{session.pk}/events/?after=0").json()["events"]
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["payload"]["message"]["is_error"]
    assert card_states(result["html"]) == [("denied", "denied")]
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert card_states(page) == [("denied", "denied")]
    assert "sudo" in page and "deny rule" in page
