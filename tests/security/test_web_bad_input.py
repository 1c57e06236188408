"""Issue 8, finding 12: crashes on bad input. ``events/?after=²`` was a 500 (str.isdigit
accepts "²", int() rejects it); a websocket frame holding a lone surrogate, or nested
100,000 levels deep, closed the socket with 1011 and a traceback; a NUL in a websocket
message was accepted while the HTTP form rejects the same text.

Now: every bad ``after`` is a 400 with a reason; every bad frame gets an error frame and the
socket STAYS OPEN (the next good frame is served); a NUL is refused with the HTTP form's own
message. Real consumer through hermes_web.asgi, real views through the test client."""

from __future__ import annotations

import json
import logging

import pytest

from sessions.consumers import MAX_FRAME_CHARS
from sessions.events import event_append
from sessions.models import Turn
from sessions.services import session_create
from tests.security.web_sockets import (APPS, communicator, cookie_for, memory_layer,  # noqa: F401
                                        run)

pytestmark = pytest.mark.django_db(transaction=True, available_apps=APPS)


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice")


@pytest.fixture
def chat(alice):
    session = session_create(user=alice, title="Alice's chat")
    event_append(session_id=session.pk, type="text.delta", payload={"turn_id": 1, "text": "x"})
    return session


@pytest.mark.parametrize("after", ["²", "١٢", "٣", "-1", "+1", "1.5", " 1", "1e3", "",
                                   "9" * 30, str(2**63), "0x10", "\x00"])
def test_bad_after_is_a_400_with_a_reason(client, alice, chat, after):
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    response = client.get(f"/sessions/{chat.pk}/events/", {"after": after})
    assert response.status_code == 400
    assert "non-negative integer" in response.json()["error"]


@pytest.mark.parametrize(("after", "count"), [("0", 1), ("1", 0), (str(2**63 - 1), 0)])
def test_good_after_still_works(client, alice, chat, after, count):
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    response = client.get(f"/sessions/{chat.pk}/events/", {"after": after})
    assert response.status_code == 200
    assert len(response.json()["events"]) == count


BAD_FRAMES = {
    "lone surrogate in the text": ('{"type": "message", "text": "hi \\ud800 there"}',
                                   "lone surrogate"),
    "lone surrogate in a key": ('{"type": "hello", "\\udfff": 1}', "lone surrogate"),
    "invalid JSON": ('{"type": "message", "text": ', "not valid JSON"),
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "nested object 100,000 deep": ('{"a":' * 100_000 + "1" + "}" * 100_000,
                                   "nested too deeply"),
    "oversized": (json.dumps({"type": "message", "text": "x" * MAX_FRAME_CHARS}),
                  "frames are limited"),
    "not an object": ("[1, 2, 3]", "JSON object"),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_bad_frame_gets_an_error_frame_and_the_socket_stays_usable(client, alice, chat, name,
                                                                   caplog):
    frame, reason = BAD_FRAMES[name]
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await ws.send_to(text_data=frame)
        reply = await ws.receive_json_from(timeout=5)
        assert reply["type"] == "error" and reason in reply["payload"]["reason"], reply
        assert "Traceback" not in reply["payload"]["reason"]
        # Still open and serving: the replay of the stored event arrives.
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        assert (await ws.receive_json_from(timeout=3))["seq"] == 1
        await ws.disconnect()
    with caplog.at_level(logging.ERROR):
        run(scenario)
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert Turn.objects.count() == 0


def test_nul_is_refused_on_the_socket_as_on_the_form(client, alice, chat):
    cookie = cookie_for(client, alice)
    http = client.post(f"/sessions/{chat.pk}/messages/", {"text": "hello\x00world"},
                       headers={"HX-Request": "true"})
    assert http.status_code == 400
    assert Turn.objects.count() == 0

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await ws.send_json_to({"type": "message", "text": "hello\x00world"})
        reply = await ws.receive_json_from(timeout=3)
        await ws.disconnect()
        return reply
    reply = {}

    async def capture():
        reply.update(await scenario())
    run(capture)
    assert reply["type"] == "error"
    assert reply["payload"]["reason"] == "Null characters are not allowed."
    assert "Null characters are not allowed." in http.content.decode()
    assert Turn.objects.count() == 0
