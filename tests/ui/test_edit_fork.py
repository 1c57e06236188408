"""Edit, regenerate, fork, pin and the model switch on real turns (the simulator over HTTP,
the real runner): later messages are rewound (active=0, compacted=0), never deleted; a fork
copies the live messages up to the chosen one; busy turns refuse with a reason."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from sessions.models import Message, RunEvent, Session, Turn
from sessions.services import (MESSAGE_NOT_FOUND, message_edit, session_create, session_fork, session_model_set,
                               session_pin, turn_regenerate, turn_start)
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice", team="red")


def run(session_id: int) -> None:
    turn_run_task.apply(args=[session_id])


def chat(alice, *texts):
    session = session_create(user=alice)
    for text in texts:
        turn_start(session=session, user=alice, text=text)
        run(session.pk)
    return Session.objects.get(pk=session.pk)


def live(session):
    return list(Message.objects.filter(session=session, active=True).order_by("id"))


def test_edit_rewinds_from_the_message_and_reruns_with_the_new_text(alice):
    session = chat(alice, "hello there", "list the files and read README.md")
    first_user = next(m for m in live(session) if m.role == "user")
    before = Message.objects.filter(session=session).count()
    message_edit(session=session, user=alice, message_id=first_user.pk, text="say hi again")
    run(session.pk)
    rows = live(session)
    assert rows[0].role == "user" and rows[0].content == "say hi again"
    assert rows[0].pk > first_user.pk
    rewound = Message.objects.filter(session=session, active=False, compacted=False)
    assert rewound.count() == before  # everything from the edited one on: kept, not deleted
    assert Turn.objects.filter(session=session).last().status == Turn.Status.COMPLETED


def test_regenerate_sends_the_last_message_again_and_keeps_earlier_ones(alice):
    session = chat(alice, "hello there", "what is in README.md?")
    earlier = live(session)[:2]
    turn_regenerate(session=session, user=alice)
    run(session.pk)
    rows = live(session)
    assert rows[:2] == earlier
    users = [m.content for m in rows if m.role == "user"]
    assert users == ["hello there", "what is in README.md?"]
    assert rows[-1].role == "assistant"


def test_edit_is_refused_while_a_turn_is_queued_and_nothing_changes(alice):
    session = chat(alice, "hello there")
    turn_start(session=session, user=alice, text="queued behind")
    first_user = live(session)[0]
    with pytest.raises(ValidationError, match="Wait for the current turn"):
        message_edit(session=session, user=alice, message_id=first_user.pk, text="x")
    assert Message.objects.filter(session=session, active=False).count() == 0
    assert Turn.objects.filter(session=session, input_text="x").count() == 0


def test_edit_of_an_assistant_or_foreign_message_is_refused(alice, make_user):
    session = chat(alice, "hello there")
    reply = next(m for m in live(session) if m.role == "assistant")
    with pytest.raises(ValidationError, match="Only your own messages .* Hermes' reply"):
        message_edit(session=session, user=alice, message_id=reply.pk, text="x")
    other = chat(make_user("bob"), "bob's")
    theirs = live(other)[0]
    with pytest.raises(ValidationError, match="not a live message"):
        message_edit(session=session, user=alice, message_id=theirs.pk, text="x")
    with pytest.raises(ValidationError, match="empty"):
        message_edit(session=session, user=alice, message_id=live(session)[0].pk, text="  ")


def test_regenerate_on_an_empty_session_says_so(alice):
    session = session_create(user=alice)
    with pytest.raises(ValidationError, match="no reply to regenerate"):
        turn_regenerate(session=session, user=alice)


def test_fork_copies_live_messages_up_to_the_point_including_answering_results(alice):
    session = chat(alice, "list the files and read README.md", "thanks")
    rows = live(session)
    calling = next(m for m in rows if m.role == "assistant" and m.tool_calls)
    fork = session_fork(session=session, user=alice, message_id=calling.pk)
    copied = live(fork)
    results = [m for m in rows if m.role == "tool"]
    expect = [m for m in rows if m.pk <= calling.pk] + results
    assert [(m.role, m.content) for m in copied] == [(m.role, m.content) for m in expect]
    assert fork.provider == session.provider and fork.team_id == session.team_id
    assert Session.objects.get(pk=fork.pk).message_count == len(copied)
    # The original is untouched, and the fork runs a turn of its own.
    assert live(session) == rows
    turn_start(session=fork, user=alice, text="what did you read?")
    run(fork.pk)
    assert Turn.objects.filter(session=fork).last().status == Turn.Status.COMPLETED
    assert Session.objects.get(pk=fork.pk).system_prompt  # built for the fork itself


def test_fork_of_a_rewound_message_is_refused(alice):
    session = chat(alice, "hello there")
    first = live(session)[0]
    turn_regenerate(session=session, user=alice)
    with pytest.raises(ValidationError, match="not a live message"):
        session_fork(session=session, user=alice, message_id=first.pk)


def test_model_switch_rebuilds_the_prompt_and_says_so(alice):
    session = chat(alice, "hello there")
    old_prompt = session.system_prompt
    assert old_prompt
    session_model_set(session=session, provider="simulator-openai", model="hermes-simulator")
    row = Session.objects.get(pk=session.pk)
    assert (row.provider, row.system_prompt, row.usage_anchor) == ("simulator-openai", "", None)
    event = RunEvent.objects.filter(session=session, type="session.model_changed").get()
    assert "system prompt is rebuilt" in event.payload["text"]
    turn_start(session=row, user=alice, text="and now?")
    run(session.pk)
    row = Session.objects.get(pk=session.pk)
    assert row.system_prompt and "simulator-openai" in row.system_prompt
    assert Turn.objects.filter(session=session).last().status == Turn.Status.COMPLETED
    with pytest.raises(ValidationError, match="not a configured provider"):
        session_model_set(session=row, provider="anthropic", model="claude-sonnet-4-5")


def test_views_edit_fork_pin_and_errors(alice, client):
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    session = chat(alice, "hello there")
    user_row = live(session)[0]
    # Fork opens the new session.
    response = client.post(reverse("session_fork", args=[session.pk]),
                           {"message_id": user_row.pk})
    fork = Session.objects.exclude(pk=session.pk).get()
    assert response.status_code == 302 and response["Location"].endswith(f"/{fork.pk}/")
    # A garbage id is a clear flash error on the session page, not a 404 or a 500.
    response = client.post(reverse("session_fork", args=[session.pk]), {"message_id": "x"},
                           follow=True)
    assert response.status_code == 200 and MESSAGE_NOT_FOUND in response.content.decode()
    # htmx edit: a client-side redirect; the error is a flash message on the page.
    turn_start(session=session, user=alice, text="queued")
    response = client.post(reverse("message_edit", args=[session.pk]),
                           {"message_id": user_row.pk, "text": "new"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"].endswith(f"/{session.pk}/")
    page = client.get(reverse("session_detail", args=[session.pk]))
    assert "Wait for the current turn to finish" in page.content.decode()
    # Pin moves it to the sidebar's pinned list.
    client.post(reverse("session_pin", args=[fork.pk]), {"pinned": "1"})
    assert Session.objects.get(pk=fork.pk).pinned
    side = client.get(reverse("sidebar")).content.decode()
    assert side.index("Pinned") < side.index(f"sidebar-session-{fork.pk}") < side.index("Recent")


def test_pin_service_toggles(alice):
    session = session_create(user=alice)
    session_pin(session=session, pinned=True)
    assert Session.objects.get(pk=session.pk).pinned
    session_pin(session=session, pinned=False)
    assert not Session.objects.get(pk=session.pk).pinned


def test_new_session_takes_a_configured_provider_and_refuses_others(alice, client):
    session = session_create(user=alice, provider="simulator-openai")
    assert (session.provider, session.model) == ("simulator-openai", "hermes-simulator")
    with pytest.raises(ValidationError, match="not a configured provider"):
        session_create(user=alice, provider="anthropic")
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    before = Session.objects.count()
    response = client.post(reverse("session_create"), {"provider": "nope"}, follow=True)
    assert "not a configured provider" in response.content.decode()
    assert Session.objects.count() == before
    page = client.get(reverse("session_list")).content.decode()
    assert 'id="new-provider"' in page and "simulator-openai · hermes-simulator" in page


def test_pin_without_htmx_goes_back_to_a_local_page_only(alice, client):
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    session = session_create(user=alice)
    url = reverse("session_pin", args=[session.pk])
    back = client.post(url, {"pinned": "1", "next": f"/sessions/{session.pk}/"})
    assert back["Location"] == f"/sessions/{session.pk}/"
    for evil in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        assert client.post(url, {"pinned": "0", "next": evil})["Location"] == "/"


def _snapshot():
    """Everything a fork, edit or rewind could change."""
    return (sorted(Message.objects.values_list("id", "session_id", "active", "compacted")),
            sorted(Session.objects.values_list("id", flat=True)),
            sorted(Turn.objects.values_list("id", "status")))


def _flash(client, response) -> list[str]:
    """The flash messages the user sees after ``response`` (a redirect, plain or htmx)."""
    assert response.status_code in (200, 302), response.status_code
    target = response["HX-Redirect"] if "HX-Redirect" in response else response["Location"]
    page = client.get(target)
    assert page.status_code == 200
    return [str(m) for m in page.context["messages"]]


@pytest.mark.parametrize("htmx", [False, True])
def test_a_bad_message_id_on_fork_edit_or_rewind_says_why_and_changes_nothing(
        alice, make_user, client, htmx):
    """Not a number, unknown, another user's, rewound or (for edit/rewind) not one of the
    user's own messages: each is a flash error on the session page, nothing changes, never a
    404, a 500 or a silent redirect; another user's id gets exactly the unknown id's words."""
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    session = chat(alice, "list the files and read README.md", "thanks")
    rows = live(session)
    reply = next(m for m in rows if m.role == "assistant")
    tool = next(m for m in rows if m.role == "tool")
    theirs = live(chat(make_user("bob"), "bob's secret"))[0]
    rewound = Message.objects.create(session=session, role="user", content="gone",
                                     active=False)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    not_found = ["x", "", "-3", "1.5", "0", "9" * 25, str(theirs.pk), str(rewound.pk),
                 "99999999"]
    cases = [(name, raw, MESSAGE_NOT_FOUND) for name in ("session_fork", "message_edit",
                                                         "session_rewind")
             for raw in not_found]
    cases += [("message_edit", str(reply.pk), "that one is Hermes' reply"),
              ("message_edit", str(tool.pk), "that one is a tool message"),
              ("session_rewind", str(reply.pk), "that one is Hermes' reply")]
    before = _snapshot()
    for name, raw, expected in cases:
        response = client.post(reverse(name, args=[session.pk]),
                               {"message_id": raw, "text": "edited"}, **headers)
        flashes = _flash(client, response)
        assert len(flashes) == 1 and expected in flashes[0], (name, raw, flashes)
        if expected == MESSAGE_NOT_FOUND:  # the same words: no id reveals another's message
            assert flashes == [MESSAGE_NOT_FOUND], (name, raw, flashes)
        assert _snapshot() == before, (name, raw)
    # A missing message_id on edit and fork is refused the same way; rewind without one
    # still takes back the last exchange (the header's Rewind button), with its count.
    for name in ("session_fork", "message_edit"):
        flashes = _flash(client, client.post(reverse(name, args=[session.pk]),
                                             {"text": "edited"}, **headers))
        assert flashes == [MESSAGE_NOT_FOUND]
    assert _snapshot() == before
    first_user = rows[0]
    flashes = _flash(client, client.post(reverse("session_rewind", args=[session.pk]),
                                         {"message_id": first_user.pk}, **headers))
    assert flashes == [f"Took back that message and what followed it ({len(rows)} messages)."]
    assert live(session) == []


def test_rewinding_one_message_says_one_message(alice, client):
    """A user message left without a reply is taken back alone: "(1 message)", never
    "(1 messages)" (a fresh user's report)."""
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    session = session_create(user=alice)
    Message.objects.create(session=session, role="user", content="unanswered")
    flashes = _flash(client, client.post(reverse("session_rewind", args=[session.pk])))
    assert flashes == ["Took back the last exchange (1 message)."]
    assert live(session) == []
