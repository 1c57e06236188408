"""The chat websocket through the real ASGI stack (origin check, cookie session auth, URL
router) with channels.testing.WebsocketCommunicator and the in-memory channel layer.

Consumers run their queries through database_sync_to_async, which closes connections that
are inside a transaction, so these tests use real commits (transaction=True): events are
published after commit exactly as in production."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import F

from sessions.events import event_append, event_to_dict, group_publish, session_group, user_group
from sessions.models import RunEvent, Session, Turn
from sessions.routing import websocket_urlpatterns
from sessions.services import session_create

# available_apps makes the flush between tests TRUNCATE ... CASCADE, which the full-text
# side table (sessions migration 0002, a foreign key to messages) needs on PostgreSQL.
APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
        "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
        "django.contrib.humanize",
        "channels", "django_htmx", "template_partials", "axes", "accounts", "sessions",
        "approvals"]
pytestmark = pytest.mark.django_db(transaction=True, available_apps=APPS)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice", team="blue")


@pytest.fixture
def chat(alice):
    return session_create(user=alice, title="Alice's chat")


def application():
    return AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))


def cookie_for(client, user) -> bytes:
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    name = django_settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}".encode()


def communicator(session_id: int, cookie: bytes | None = None, origin=ORIGIN):
    """A test client socket. Connect it with ``connect(timeout=10)``: the default of 1 s
    timed out under a loaded CI host before the consumer's first query answered."""
    headers = [origin] + ([(b"cookie", cookie)] if cookie else [])
    return WebsocketCommunicator(application(), f"/ws/sessions/{session_id}/", headers=headers)


def run(scenario):
    async_to_sync(scenario)()


@database_sync_to_async
def append(session_id: int, type: str, payload: dict) -> dict:
    """event_append: stored, then published to the session group on commit."""
    return event_to_dict(event_append(session_id=session_id, type=type, payload=payload))


@database_sync_to_async
def append_unpublished(session_id: int, type: str, payload: dict) -> None:
    """A stored event whose publish was lost (e.g. a layer hiccup)."""
    with transaction.atomic():
        Session.objects.filter(pk=session_id).update(event_seq=F("event_seq") + 1)
        seq = Session.objects.values_list("event_seq", flat=True).get(pk=session_id)
        RunEvent.objects.create(session_id=session_id, seq=seq, type=type, payload=payload)


def test_anonymous_socket_is_refused(chat):
    async def scenario():
        ws = communicator(chat.pk)
        connected, code = await ws.connect(timeout=10)
        assert connected is False and code == 4401
    run(scenario)


def test_other_users_and_unknown_sessions_are_refused_alike(client, make_user, chat):
    cookie = cookie_for(client, make_user("mallory"))

    async def scenario():
        for session_id in (chat.pk, chat.pk + 1000):
            ws = communicator(session_id, cookie)
            connected, code = await ws.connect(timeout=10)
            assert connected is False and code == 4404
    run(scenario)


def test_foreign_origin_is_refused(client, alice, chat):
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie, origin=(b"origin", b"https://evil.example"))
        connected, _ = await ws.connect(timeout=10)
        assert connected is False
    run(scenario)


def test_replay_after_last_seq_then_live_events_once_in_order(client, alice, chat):
    cookie = cookie_for(client, alice)
    for n in range(3):
        event_append(session_id=chat.pk, type="text.delta", payload={"turn_id": 1,
                                                                     "text": f"t{n}"})

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await ws.send_json_to({"type": "hello", "last_seq": 1})
        replayed = [await ws.receive_json_from(timeout=2) for _ in range(2)]
        assert [f["seq"] for f in replayed] == [2, 3]
        assert replayed[0]["payload"]["text"] == "t1"
        live = await append(chat.pk, "tool.called", {
            "turn_id": 1, "tool_call": {"id": "toolu_9", "name": "read_file",
                                        "arguments": {"path": "README.md"}}})
        frame = await ws.receive_json_from(timeout=2)
        assert frame["seq"] == live["seq"] == 4
        assert 'id="tool-toolu_9"' in frame["html"] and "README.md" in frame["html"]
        # A duplicate publish of an already-sent seq is dropped.
        group_publish_dup = database_sync_to_async(group_publish)
        await group_publish_dup(session_group(chat.pk), live)
        assert await ws.receive_nothing(timeout=0.2)
        # A seq gap (5 stored but its publish lost) is filled from the database.
        await append_unpublished(chat.pk, "text.delta", {"turn_id": 1, "text": "lost"})
        await append(chat.pk, "text.delta", {"turn_id": 1, "text": "after"})
        gap = [await ws.receive_json_from(timeout=2) for _ in range(2)]
        assert [(f["seq"], f["payload"]["text"]) for f in gap] == [(5, "lost"), (6, "after")]
        assert await ws.receive_nothing(timeout=0.2)
        await ws.disconnect()
    run(scenario)


def test_live_events_before_hello_are_buffered_and_not_duplicated(client, alice, chat):
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await append(chat.pk, "turn.started", {"turn_id": 3})
        await append(chat.pk, "text.delta", {"turn_id": 3, "text": "x"})
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        frames = [await ws.receive_json_from(timeout=2) for _ in range(2)]
        assert [f["seq"] for f in frames] == [1, 2]
        assert 'id="turn-status"' in frames[0]["html"] and "Stop" in frames[0]["html"]
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
    run(scenario)


@pytest.mark.parametrize("frame,reason", [
    ("not json{", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"type": "dance"}', "Unknown frame type"),
    ('{"type": "hello", "last_seq": "abc"}', "non-negative integer"),
    ('{"type": "hello", "last_seq": -4}', "non-negative integer"),
    ('{"type": "message"}', "needs a \\\"text\\\" string"),
])
def test_malformed_frame_gets_error_and_socket_stays_open(client, alice, chat, frame, reason):
    cookie = cookie_for(client, alice)
    event_append(session_id=chat.pk, type="turn.started", payload={"turn_id": 1})

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await ws.send_to(text_data=frame)
        error = await ws.receive_json_from(timeout=2)
        assert error["type"] == "error" and "seq" not in error
        assert reason.replace('\\"', '"') in error["payload"]["reason"]
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        assert (await ws.receive_json_from(timeout=2))["seq"] == 1
        await ws.disconnect()
    run(scenario)


def test_message_frame_starts_a_turn_and_bad_text_is_an_error_frame(client, alice, chat):
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await ws.send_json_to({"type": "message", "text": "  "})
        assert (await ws.receive_json_from(timeout=2))["payload"]["reason"] == \
            "The message is empty."
        await ws.send_json_to({"type": "message", "text": "z" * 100_001})
        assert "limit is 100,000" in (await ws.receive_json_from(timeout=2))["payload"]["reason"]
        await ws.send_json_to({"type": "message", "text": "hello there"})
        await ws.send_json_to({"type": "stop"})
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
    run(scenario)
    turn = Turn.objects.get(session=chat)
    assert turn.input_text == "hello there"
    chat.refresh_from_db()
    assert chat.stop_requested is True


def test_team_admin_may_watch_but_not_send(client, make_user, alice, chat):
    cookie = cookie_for(client, make_user("carol", team="blue", role="admin"))

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await ws.send_json_to({"type": "message", "text": "hijack"})
        reply = await ws.receive_json_from(timeout=2)
        assert reply["type"] == "error" and "owner" in reply["payload"]["reason"]
        await ws.disconnect()
    run(scenario)
    assert Turn.objects.count() == 0


def test_logout_force_closes_the_users_sockets(client, alice, chat):
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        response = await database_sync_to_async(client.post)("/logout/")
        assert response.status_code == 302
        closed = await ws.receive_output(timeout=2)
        assert closed == {"type": "websocket.close", "code": 4401}
    run(scenario)


def test_unknown_group_message_types_do_not_crash_the_socket(client, alice, chat):
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(group_publish)(user_group(alice.pk), {}, "badge.refresh")
        await ws.send_json_to({"type": "hello", "last_seq": 0})
        assert await ws.receive_nothing(timeout=0.3)
        await ws.send_to(text_data="{}")
        assert (await ws.receive_json_from(timeout=2))["type"] == "error"
        await ws.disconnect()
    run(scenario)
