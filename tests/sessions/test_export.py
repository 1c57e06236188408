"""GET /sessions/<id>/export.json: both texts of every message, the flags, the stored prompt,
and the same access rule as the chat page (owner and team admins; 404 for anyone else)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions.models import Message, Session
from sessions.services import session_create

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def chat(make_user, hermes_settings):
    alice = make_user("alice", team="blue")
    session = session_create(user=alice, title="Deploys")
    Session.objects.filter(pk=session.pk).update(system_prompt="You are Hermes.\n\nStable ✓")
    rows = [
        Message(session=session, role="user", content="/deploy v2", kind="skill",
                sent_content="<skill deploy>\nSteps.\n</skill>\n\nArguments: v2",
                stable_prefix_chars=31, active=False, compacted=True),
        Message(session=session, role="assistant", content="Deployed.", active=False,
                compacted=True),
        Message(session=session, role="user", content="[summary] deployed v2", kind="summary"),
        Message(session=session, role="tool", content="x" * 50, tool_call_id="t1",
                tool_name="read_file", sent_content="[pruned: read_file output, 50 chars]"),
        Message(session=session, role="user", content="taken back", active=False),
    ]
    Message.objects.bulk_create(rows)
    return session


def test_export_gives_both_texts_flags_and_the_stored_prompt(login, chat):
    client = login(chat.owner)
    response = client.get(reverse("session_export", args=[chat.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    data = response.json()
    assert data["system_prompt"] == "You are Hermes.\n\nStable ✓"
    assert set(data["texts"]) == {"content", "sent_content"}
    exported = [(m["role"], m["content"], m["sent_content"], m["active"], m["compacted"])
                for m in data["messages"]]
    assert exported == [
        ("user", "/deploy v2", "<skill deploy>\nSteps.\n</skill>\n\nArguments: v2", False, True),
        ("assistant", "Deployed.", None, False, True),
        ("user", "[summary] deployed v2", None, True, False),
        ("tool", "x" * 50, "[pruned: read_file output, 50 chars]", True, False),
        ("user", "taken back", None, False, False),
    ]
    assert data["messages"][0]["stable_prefix_chars"] == 31
    assert data["messages"][0]["kind"] == "skill"
    assert data["messages"][3]["tool_name"] == "read_file"
    assert [m["id"] for m in data["messages"]] == sorted(m["id"] for m in data["messages"])


def test_export_is_for_the_owner_and_team_admins_only(client, login, make_user, chat):
    url = reverse("session_export", args=[chat.pk])
    assert client.get(url).status_code == 302  # anonymous: to the login page
    admin = make_user("carol", team="blue", role="admin")
    assert login(admin).get(url).status_code == 200
    member = make_user("dave", team="blue")
    assert login(member).get(url).status_code == 404
    stranger = make_user("erin", team="green", role="admin")
    assert login(stranger).get(url).status_code == 404
    assert login(chat.owner).get(reverse("session_export", args=[chat.pk + 999])
                                 ).status_code == 404
    assert login(chat.owner).post(url).status_code == 405
