"""Chat views through the Django test client: access (404 that never reveals), bad input
(form errors, nothing stored), the session list (new, rename, archive, restore, search),
the global search, the polling endpoint and the rendered transcript."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from sessions.events import event_append
from sessions.models import Message, RunEvent, Session, Turn
from sessions.services import session_create

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice", team="blue")


@pytest.fixture
def bob(make_user, hermes_settings):
    return make_user("bob")


@pytest.fixture
def chat(alice):
    return session_create(user=alice, title="Alice's chat")


def test_login_required_redirects_anonymous_to_login(client, chat):
    response = client.get(reverse("session_detail", args=[chat.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name,method", [
    ("session_detail", "get"), ("event_list", "get"), ("message_send", "post"),
    ("turn_stop", "post"), ("session_rename", "post"), ("session_archive", "post"),
    ("session_rewind", "post"),
])
def test_another_users_session_is_404_like_an_unknown_one(login, bob, chat, name, method):
    client = login(bob)
    theirs = getattr(client, method)(reverse(name, args=[chat.pk]), {"text": "hi", "title": "x"})
    unknown = getattr(client, method)(reverse(name, args=[chat.pk + 1000]),
                                      {"text": "hi", "title": "x"})
    assert theirs.status_code == unknown.status_code == 404
    assert b"Alice" not in theirs.content
    assert Turn.objects.count() == 0
    assert Session.objects.get(pk=chat.pk).title == "Alice's chat"


def test_404_page_is_the_friendly_template(login, bob, chat):
    response = login(bob).get(reverse("session_detail", args=[chat.pk]))
    assert response.status_code == 404
    assert b"There is nothing here" in response.content


def test_team_admin_reads_a_members_session_but_cannot_send(make_user, login, chat):
    admin = make_user("carol", team="blue", role="admin")
    client = login(admin)
    assert client.get(reverse("session_detail", args=[chat.pk])).status_code == 200
    response = client.post(reverse("message_send", args=[chat.pk]), {"text": "hello"}, **HTMX)
    assert response.status_code == 404
    assert Turn.objects.count() == 0


def test_empty_message_is_a_form_error_with_status_400(login, alice, chat):
    response = login(alice).post(reverse("message_send", args=[chat.pk]), {"text": "   \n"},
                                 **HTMX)
    assert response.status_code == 400
    assert b"The message is empty." in response.content
    assert b'id="composer"' in response.content
    assert response["HX-Retarget"] == "#composer"
    assert Turn.objects.count() == 0 and Message.objects.count() == 0


def test_message_over_100000_chars_is_refused_clearly_and_nothing_is_stored(login, alice, chat):
    text = "x" * 100_001
    response = login(alice).post(reverse("message_send", args=[chat.pk]), {"text": text},
                                 **HTMX)
    assert response.status_code == 400
    assert b"100,001 characters; the limit is 100,000" in response.content
    assert Turn.objects.count() == 0 and Message.objects.count() == 0
    assert RunEvent.objects.filter(session=chat).count() == 0


def test_message_error_without_htmx_renders_the_page_with_status_400(login, alice, chat):
    response = login(alice).post(reverse("message_send", args=[chat.pk]), {"text": ""})
    assert response.status_code == 400
    assert b"The message is empty." in response.content
    assert b'id="transcript"' in response.content


def test_message_exactly_100000_chars_is_queued_and_status_partial_returned(login, alice, chat,
                                                                           django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = login(alice).post(reverse("message_send", args=[chat.pk]),
                                     {"text": "y" * 100_000}, **HTMX)
    assert response.status_code == 200
    assert b'id="turn-status"' in response.content and b'data-state="queued"' in response.content
    assert b"Stop" in response.content
    turn = Turn.objects.get()
    assert len(turn.input_text) == 100_000 and turn.status == Turn.Status.QUEUED
    assert RunEvent.objects.filter(session=chat, type="turn.queued").count() == 1
    assert callbacks  # the worker is enqueued on commit, not before


def test_plain_post_message_redirects_to_the_chat(login, alice, chat):
    response = login(alice).post(reverse("message_send", args=[chat.pk]), {"text": "hello"})
    assert response.status_code == 302
    assert response["Location"] == reverse("session_detail", args=[chat.pk])


def test_new_session_redirects_to_its_chat_page(login, alice):
    response = login(alice).post(reverse("session_create"))
    session = Session.objects.get(owner=alice)
    assert response.status_code == 302
    assert response["Location"] == reverse("session_detail", args=[session.pk])
    page = login(alice).get(response["Location"])
    assert page.status_code == 200
    assert f'data-session-id="{session.pk}"'.encode() in page.content


def test_session_list_search_by_title_and_htmx_rows_partial(login, alice, bob):
    session_create(user=alice, title="Deploy notes")
    session_create(user=alice, title="Groceries")
    session_create(user=bob, title="Deploy secrets of bob")
    client = login(alice)
    full = client.get(reverse("session_list"), {"q": "deploy"})
    main = full.content.split(b"<main", 1)[1]  # the sidebar lists every recent session
    assert b"Deploy notes" in main and b"Groceries" not in main
    assert b"bob" not in full.content
    rows = client.get(reverse("session_list"), {"q": "groc"}, **HTMX)
    assert rows.content.strip().startswith(b'<ul class="session-rows" id="session-rows">')
    assert b"Groceries" in rows.content and b"<header" not in rows.content


def test_rename_htmx_returns_row_and_empty_title_is_400(login, alice, chat):
    client = login(alice)
    ok = client.post(reverse("session_rename", args=[chat.pk]), {"title": "  Renamed  "}, **HTMX)
    assert ok.status_code == 200 and b"Renamed" in ok.content
    assert Session.objects.get(pk=chat.pk).title == "Renamed"
    bad = client.post(reverse("session_rename", args=[chat.pk]), {"title": "   "}, **HTMX)
    assert bad.status_code == 400 and b"A title cannot be empty." in bad.content
    too_long = client.post(reverse("session_rename", args=[chat.pk]), {"title": "t" * 201},
                           **HTMX)
    assert too_long.status_code == 400 and b"at most 200 characters" in too_long.content
    assert Session.objects.get(pk=chat.pk).title == "Renamed"


def test_archive_hides_from_list_and_restore_brings_back(login, alice, chat):
    client = login(alice)
    row = f'id="session-{chat.pk}"'.encode()
    client.post(reverse("session_archive", args=[chat.pk]), {"archived": "1"})
    assert row not in client.get(reverse("session_list")).content
    archived = client.get(reverse("session_list"), {"archived": "1"})
    assert row in archived.content and b"Restore" in archived.content
    client.post(reverse("session_archive", args=[chat.pk]), {"archived": "0"})
    assert row in client.get(reverse("session_list")).content


def test_global_search_finds_titles_and_visible_message_content_only(login, alice, bob, chat):
    Message.objects.create(session=chat, role="user", content="the zebra is striped")
    Message.objects.create(session=chat, role="assistant", content="zebra summary",
                           active=False, compacted=True)
    Message.objects.create(session=chat, role="user", content="zebra rewound away",
                           active=False, compacted=False)
    other = session_create(user=bob, title="zebra of bob")
    Message.objects.create(session=other, role="user", content="bob's zebra")
    response = login(alice).get(reverse("search"), {"q": "zebra"})
    assert response.status_code == 200
    assert b"<mark>zebra</mark> is striped" in response.content
    assert b"<mark>zebra</mark> summary" in response.content
    assert b"rewound away" not in response.content
    assert b"bob" not in response.content


def test_rewind_refused_while_a_turn_runs_shows_reason_not_500(login, alice, chat):
    Message.objects.create(session=chat, role="user", content="first")
    Turn.objects.create(session=chat, input_text="x", status=Turn.Status.RUNNING)
    client = login(alice)
    response = client.post(reverse("session_rewind", args=[chat.pk]), follow=True)
    assert response.status_code == 200
    assert b"Wait for the current turn to finish" in response.content
    assert Message.objects.filter(session=chat, active=True).count() == 1


def test_rewind_takes_back_the_last_exchange(login, alice, chat):
    Message.objects.create(session=chat, role="user", content="keep me")
    Message.objects.create(session=chat, role="assistant", content="kept reply")
    Message.objects.create(session=chat, role="user", content="take me back")
    Message.objects.create(session=chat, role="assistant", content="gone reply")
    response = login(alice).post(reverse("session_rewind", args=[chat.pk]), follow=True)
    assert b"gone reply" not in response.content and b"kept reply" in response.content


def test_stop_sets_the_flag_only_when_a_turn_is_active(login, alice, chat):
    client = login(alice)
    idle = client.post(reverse("turn_stop", args=[chat.pk]), **HTMX)
    assert b'data-state="idle"' in idle.content
    assert Session.objects.get(pk=chat.pk).stop_requested is False
    Turn.objects.create(session=chat, input_text="x", status=Turn.Status.RUNNING)
    stopping = client.post(reverse("turn_stop", args=[chat.pk]), **HTMX)
    assert b'data-state="stopping"' in stopping.content
    assert Session.objects.get(pk=chat.pk).stop_requested is True


def test_event_list_returns_frames_after_seq_with_html(login, alice, chat):
    event_append(session_id=chat.pk, type="turn.started", payload={"turn_id": 1})
    event_append(session_id=chat.pk, type="tool.called", payload={
        "turn_id": 1, "tool_call": {"id": "toolu_1", "name": "read_file",
                                    "arguments": {"path": "README.md"}}})
    event_append(session_id=chat.pk, type="text.delta", payload={"turn_id": 1, "text": "hi"})
    client = login(alice)
    data = client.get(reverse("event_list", args=[chat.pk]), {"after": "1"}).json()
    assert [f["seq"] for f in data["events"]] == [2, 3] and data["last_seq"] == 3
    card = data["events"][0]
    assert 'id="tool-toolu_1"' in card["html"] and "README.md" in card["html"]
    assert "html" not in data["events"][1]
    bad = client.get(reverse("event_list", args=[chat.pk]), {"after": "-1"})
    assert bad.status_code == 400 and "non-negative" in bad.json()["error"]


def test_chat_page_renders_transcript_tool_cards_and_streaming_text_once(login, alice, chat):
    turn = Turn.objects.create(session=chat, input_text="list the files",
                               status=Turn.Status.RUNNING)
    user = Message.objects.create(session=chat, role="user", content="list the files")
    Turn.objects.filter(pk=turn.pk).update(user_message=user)
    event_append(session_id=chat.pk, type="turn.started", payload={"turn_id": turn.pk})
    Message.objects.create(session=chat, role="assistant", content="Listing **now**.",
                           tool_calls=[{"id": "call_a", "name": "terminal",
                                        "arguments": {"command": "ls -la"}}])
    Message.objects.create(session=chat, role="tool", tool_call_id="call_a",
                           tool_name="terminal", content="README.md\n")
    event_append(session_id=chat.pk, type="message.added", payload={"turn_id": turn.pk})
    event_append(session_id=chat.pk, type="text.delta", payload={"turn_id": turn.pk,
                                                                 "text": "The README "})
    event_append(session_id=chat.pk, type="text.delta", payload={"turn_id": turn.pk,
                                                                 "text": "says hello"})
    page = login(alice).get(reverse("session_detail", args=[chat.pk])).content.decode()
    assert 'data-last-seq="4"' in page
    assert "<strong>now</strong>" in page
    assert page.count('id="tool-call_a"') == 1 and 'data-status="done"' in page
    assert "ls -la" in page and "README.md" in page
    assert page.count("The README says hello") == 1 and 'id="streaming"' in page
    assert 'data-state="running"' in page and 'id="stop-button"' in page


def test_markdown_is_sanitised_in_the_page(login, alice, chat):
    Message.objects.create(session=chat, role="assistant",
                           content="<script>alert(1)</script> [x](javascript:alert(2)) "
                                   "<img src=x onerror=alert(3)> [ok](https://example.com)")
    page = login(alice).get(reverse("session_detail", args=[chat.pk])).content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page
    assert 'href="javascript' not in page
    assert "<img src=x onerror" not in page and "<img" not in page
    assert 'href="https://example.com" rel="noopener noreferrer nofollow"' in page


def test_settings_page_shows_provider_backend_and_login_limit(login, alice):
    page = login(alice).get(reverse("settings")).content.decode()
    assert 'id="setting-provider">simulator' in page
    assert 'id="setting-backend">' in page
    assert "failed attempts" in page


def test_logout_is_post_only_and_logs_out(login, alice):
    client = login(alice)
    assert client.get(reverse("logout")).status_code == 405
    response = client.post(reverse("logout"))
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert client.get(reverse("session_list")).status_code == 302


def test_header_shows_pending_approval_badge_link(login, alice, chat):
    from django.utils import timezone

    from approvals.models import ApprovalRequest

    ApprovalRequest.objects.create(session=chat, tool_call_id="c1", tool_name="terminal",
                                   command="rm -rf build", requester=alice,
                                   expires_at=timezone.now())
    page = login(alice).get(reverse("session_list")).content.decode()
    assert f'href="{reverse("approval_queue")}"' in page
    assert 'id="approvals-badge" title="pending approvals">1<' in page


def test_event_payloads_round_trip_json(alice, chat):
    """Frames are JSON-serialisable (the socket sends them as JSON)."""
    from sessions.events import event_to_dict
    from sessions.rendering import event_frame

    event = event_append(session_id=chat.pk, type="turn.finished", payload={
        "turn_id": 9, "usage": {"input_tokens": 10, "output_tokens": 5,
                                "cache_read_tokens": 1000, "cache_write_tokens": 20}})
    frame = json.loads(json.dumps(event_frame(event_to_dict(event))))
    assert 'id="usage-9"' in frame["html"] and "1000 cache read" in frame["html"]
    assert 'data-state="idle"' in frame["html"]
