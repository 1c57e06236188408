"""A deleted session's open chat sockets (the owner's and a team admin's) are told to
re-check after the delete commits and close with 4404 ("This session is not available."
on the page: static/chat.js FINAL_CLOSE), instead of streaming nothing or answering a
message frame with a 500. Real ASGI stack, real commits (see test_consumers.py)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from sessions.models import Session
from sessions.services import session_create
from tests.sessions.test_consumers import (APPS, communicator, cookie_for,  # noqa: F401
                                           memory_layer, run)

pytestmark = pytest.mark.django_db(transaction=True, available_apps=APPS)


def test_the_deleted_sessions_sockets_close_as_not_available(client, make_user,
                                                             hermes_settings):
    alice = make_user("alice", team="blue")
    boss = make_user("boss", team="blue", role="admin")
    chat = session_create(user=alice, title="to delete")
    owner_cookie = cookie_for(client, alice)
    admin_client = Client()
    admin_cookie = cookie_for(admin_client, boss)

    async def scenario():
        sockets = [communicator(chat.pk, owner_cookie), communicator(chat.pk, admin_cookie)]
        for ws in sockets:
            assert (await ws.connect(timeout=10))[0]
            await ws.send_json_to({"type": "hello", "last_seq": 0})
        response = await database_sync_to_async(client.post)(f"/sessions/{chat.pk}/delete/")
        assert response.status_code == 302
        for ws in sockets:
            assert await ws.receive_output(timeout=5) == {"type": "websocket.close",
                                                          "code": 4404}
    run(scenario)
    assert not Session.objects.filter(pk=chat.pk).exists()
