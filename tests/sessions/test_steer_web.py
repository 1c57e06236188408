"""Steering from the web (issue 12 item 4): the /steer/ view, the "steer" socket frame, and
how a queued and a landed correction are drawn (live events and the reloaded page alike)."""

from __future__ import annotations

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from sessions.models import RunEvent, Turn
from sessions.rendering import event_html
from sessions.services import session_create, turn_start, turn_steer
from sessions.steer import STEER
from sessions.tasks import turn_run_task
from tests.sessions.test_consumers import communicator, cookie_for, run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice", team="red")


def test_the_steer_view_stores_a_correction_and_refuses_bad_input(alice, login):
    session = session_create(user=alice)
    client = login(alice)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="steer-button"' in page and "steer.js" in page and "Alt+Enter" in page

    response = client.post(f"/sessions/{session.pk}/steer/", {"text": "use python"},
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'id="turn-status"' in response.content.decode()
    steer = Turn.objects.get(session=session)
    assert (steer.kind, steer.status, steer.input_text) == (STEER, "queued", "use python")
    session.refresh_from_db()
    assert session.title == "use python"  # the first message names the session either way

    for text in ("   ", "/prune"):
        bad = client.post(f"/sessions/{session.pk}/steer/", {"text": text},
                          HTTP_HX_REQUEST="true")
        assert bad.status_code == 400 and 'id="composer-error"' in bad.content.decode()
    assert Turn.objects.filter(session=session).count() == 1
    # Reloaded while it waits: the bubble says it is a correction.
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert f'id="queued-{steer.pk}"' in page and "queued-steer" in page


def test_another_user_cannot_steer(alice, make_user, login):
    session = session_create(user=alice)
    client = login(make_user("mallory"))
    response = client.post(f"/sessions/{session.pk}/steer/", {"text": "hi"})
    assert response.status_code == 404
    assert not Turn.objects.filter(session=session).exists()


def test_the_steer_frame_queues_a_correction(client, alice):
    session = session_create(user=alice)
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(session.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        await ws.send_json_to({"type": "steer", "text": "/compact"})
        assert "slash command" in (await ws.receive_json_from(timeout=2))["payload"]["reason"]
        await ws.send_json_to({"type": "steer", "text": "smaller steps please"})
        frame = await ws.receive_json_from(timeout=2)
        assert frame["type"] == "steer.queued" and "queued-steer" in frame["html"]
        await ws.disconnect()
    run(scenario)
    assert Turn.objects.get(session=session).kind == STEER


def test_a_landed_correction_is_drawn_in_the_transcript(alice, login, simulator):
    """After landing (at stream end, sent by the scripted model mid-reply), the page shows
    the correction as a user message labelled as such and the skipped call as not run, and
    no queued bubble or usage footer for the correction's own turn row."""
    session = session_create(user=alice)

    def policy(request):
        if request.last_user_text == "only list, do not delete":
            return Reply(text="Listing only.")
        turn_steer(session=session, user=alice, text="only list, do not delete")
        return Reply(text="Deleting.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": "rm -f README.md"}),))

    simulator.state.script = Script(policy)
    turn_start(session=session, user=alice, text="clean the workspace")
    turn_run_task.apply(args=[session.pk])

    queued = RunEvent.objects.get(session=session, type="steer.queued")
    html = event_html({"type": queued.type, "payload": queued.payload, "seq": queued.seq})
    assert f'id="queued-{queued.payload["turn_id"]}"' in html
    page = login(alice).get(f"/sessions/{session.pk}/").content.decode()
    assert "correction, sent while the turn ran" in page
    assert "not run: steered" in page
    assert "queued-steer" not in page
    assert page.count('class="usage"') == 1  # one turn ran; the correction is part of it
