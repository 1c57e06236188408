"""Issue 8, finding 11: the open socket outlived the login. The websocket's user was fixed at
connect; after an admin logout, session expiry, a deleted session row or a password change
the open socket still started turns. Now each of those closes the socket (4401), promptly
where a signal fires (sessions/signals.py) and in any case on the next frame that acts (the
consumer re-validates the login first: fail closed). Real consumer, real session rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session as LoginSession
from django.db import connection
from django.test import Client
from django.utils import timezone

from sessions.models import Turn
from sessions.services import session_create
from tests.security.web_sockets import (APPS, communicator, cookie_for, memory_layer,  # noqa: F401
                                        run)

pytestmark = pytest.mark.django_db(transaction=True, available_apps=APPS)
CLOSED = {"type": "websocket.close", "code": 4401}


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice", staff=True)


@pytest.fixture
def chat(alice):
    return session_create(user=alice, title="Alice's chat")


def session_key(client) -> str:
    return client.session.session_key


async def assert_cannot_start_turns(ws):
    """The socket is closed (now, or at the latest on this frame) and no turn was queued."""
    try:
        await ws.send_json_to({"type": "message", "text": "run rm -rf ~"})
    except Exception:  # already closed by the application
        pass
    assert await ws.receive_output(timeout=3) == CLOSED
    assert await database_sync_to_async(Turn.objects.count)() == 0


async def assert_still_open(ws):
    await ws.send_json_to({"type": "hello", "last_seq": 0})
    assert await ws.receive_nothing(timeout=0.3)


def test_logout_closes_only_that_logins_sockets(client, alice, chat):
    other_browser = Client()
    cookie, other_cookie = cookie_for(client, alice), cookie_for(other_browser, alice)

    async def scenario():
        ws, other = communicator(chat.pk, cookie), communicator(chat.pk, other_cookie)
        assert (await ws.connect(timeout=10))[0] and (await other.connect(timeout=10))[0]
        response = await database_sync_to_async(client.post)("/logout/")
        assert response.status_code == 302
        assert await ws.receive_output(timeout=2) == CLOSED
        await assert_still_open(other)  # the same user, logged in elsewhere
        await other.disconnect()
    run(scenario)


def test_admin_logout_closes_the_socket(client, alice, chat):
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        response = await database_sync_to_async(client.post)("/admin/logout/")
        assert response.status_code == 302  # to LOGOUT_REDIRECT_URL
        assert await ws.receive_output(timeout=2) == CLOSED
    run(scenario)


def test_deleting_the_session_row_closes_the_socket(client, alice, chat):
    cookie = cookie_for(client, alice)
    key = session_key(client)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(
            lambda: LoginSession.objects.filter(session_key=key).delete())()
        assert await ws.receive_output(timeout=2) == CLOSED
    run(scenario)


def test_a_row_removed_without_signals_is_caught_on_the_next_frame(client, alice, chat):
    cookie = cookie_for(client, alice)
    key = session_key(client)

    def raw_delete():
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {LoginSession._meta.db_table} WHERE session_key = %s",
                           [key])

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(raw_delete)()
        assert await ws.receive_nothing(timeout=0.3)  # no signal saw it
        await assert_cannot_start_turns(ws)
    run(scenario)


def test_an_expired_session_cannot_start_turns(client, alice, chat):
    cookie = cookie_for(client, alice)
    key = session_key(client)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(lambda: LoginSession.objects.filter(
            session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1)))()
        await assert_cannot_start_turns(ws)
    run(scenario)


def test_the_socket_closes_when_its_session_expires(client, alice, chat):
    cookie = cookie_for(client, alice)
    LoginSession.objects.filter(session_key=session_key(client)).update(
        expire_date=timezone.now() + timedelta(seconds=1))

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        assert await ws.receive_output(timeout=5) == CLOSED  # no frame needed
    run(scenario)


def test_a_password_change_closes_the_socket(client, alice, chat):
    cookie = cookie_for(client, alice)

    def change_password():
        user = get_user_model().objects.get(pk=alice.pk)
        user.set_password("a-new-password-1")
        user.save()

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(change_password)()
        assert await ws.receive_output(timeout=2) == CLOSED
    run(scenario)


def test_a_password_changed_with_update_skips_signals_but_not_the_check(client, alice, chat):
    """A queryset update fires no post_save; the per-frame check still sees the new hash."""
    cookie = cookie_for(client, alice)

    def change_password():
        user = get_user_model().objects.get(pk=alice.pk)
        user.set_password("a-new-password-2")
        get_user_model().objects.filter(pk=alice.pk).update(password=user.password)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(change_password)()
        await assert_cannot_start_turns(ws)
    run(scenario)


def test_a_deactivated_user_is_closed(client, alice, chat):
    cookie = cookie_for(client, alice)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(
            lambda: get_user_model().objects.filter(pk=alice.pk).update(is_active=False))()
        await assert_cannot_start_turns(ws)
    run(scenario)


def test_an_unrelated_user_save_keeps_the_socket(client, alice, chat):
    cookie = cookie_for(client, alice)

    def rename():
        user = get_user_model().objects.get(pk=alice.pk)
        user.first_name = "Alice"
        user.save()

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(rename)()
        await assert_still_open(ws)
        await ws.send_json_to({"type": "message", "text": "still me"})
        assert (await ws.receive_json_from(timeout=3))["type"] == "turn.queued"
        await ws.disconnect()
    run(scenario)
    assert Turn.objects.filter(session=chat, input_text="still me").count() == 1


def test_a_team_admin_removed_from_the_team_stops_receiving_its_sessions(client, make_user,
                                                                         hermes_settings):
    """A second user's report: a team admin watching a member's session kept receiving
    every frame after being removed from the team (the page already answered 404)."""
    from accounts.models import Membership

    owner = make_user("mia", team="shared")
    watcher = make_user("ada", team="shared", role="admin")
    chat = session_create(user=owner, title="Mia's chat")
    cookie = cookie_for(client, watcher)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(
            lambda: Membership.objects.filter(user=watcher).delete())()
        assert await ws.receive_output(timeout=3) == {"type": "websocket.close", "code": 4404}
    run(scenario)


def test_a_membership_change_that_keeps_access_keeps_the_socket(client, make_user,
                                                               hermes_settings):
    from accounts.models import Membership

    owner = make_user("mia", team="shared")
    watcher = make_user("ada", team="shared", role="admin")
    make_user("max", team="shared", role="admin")
    chat = session_create(user=owner, title="Mia's chat")
    cookie = cookie_for(client, owner)

    async def scenario():
        ws = communicator(chat.pk, cookie)
        assert (await ws.connect(timeout=10))[0]
        await database_sync_to_async(  # someone else's role changes; the owner still reads
            lambda: Membership.objects.filter(user=watcher).update(role="member"))()
        await database_sync_to_async(
            lambda: Membership.objects.get(user=owner).save())()
        await assert_still_open(ws)
        await ws.disconnect()
    run(scenario)
