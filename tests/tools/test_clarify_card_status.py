"""A fresh user's finding: while a clarify question waits, its tool card said "running". The
card must say it waits for the user's answer, on the page (a reload) and in the live frame
the socket and the polling endpoint send (sessions/rendering.py event_frame), and say
"done" once the answer became the result."""

from __future__ import annotations

import re

import pytest

from sessions.models import ClarifyQuestion, Turn
from tests.tools.test_clarify import CHOICES, _answer_url, asking_model

pytestmark = pytest.mark.django_db(transaction=True)

CARD = re.compile(r'<details class="tool-card" id="tool-[^"]+" data-status="(\w+)".*?'
                  r'<span class="tool-status status-\w+">([^<]*)</span>.*?</details>', re.S)


def card_states(html: str) -> list[tuple[str, str]]:
    """(data-status, visible status word) of every tool card in ``html``."""
    return CARD.findall(html)


def test_a_pending_question_card_says_it_waits_for_the_answer_not_running(
        alice, script, chat, login):
    script(asking_model)
    session = chat(alice)
    assert session.say("style the button").status == Turn.Status.AWAITING_ANSWER
    client = login(alice)
    page = client.get(f"/sessions/{session.session.pk}/").content.decode()
    assert card_states(page) == [("waiting", "waiting for your answer")]
    assert "Waiting for your answer to the question below" in page
    assert "Running…" not in page

    # The live path: the frames a reconnecting socket or the polling fallback replays.
    frames = client.get(f"/sessions/{session.session.pk}/events/?after=0").json()["events"]
    asked = [f for f in frames if f["type"] == "clarify.requested"]
    assert len(asked) == 1 and card_states(asked[0]["html"]) == [
        ("waiting", "waiting for your answer")]
    called = [f for f in frames if f["type"] == "message.added"
              and f["payload"]["message"]["tool_calls"]]
    assert card_states(called[0]["html"]) == [("queued", "queued")]  # before the question
    assert frames.index(called[0]) < frames.index(asked[0])  # so the browser merges "waiting"

    question = ClarifyQuestion.objects.get(session=session.session)
    assert client.post(_answer_url(question), {"answer": CHOICES[1]}).status_code == 302
    session.run()
    page = client.get(f"/sessions/{session.session.pk}/").content.decode()
    assert card_states(page) == [("done", "done")]
    frames = client.get(f"/sessions/{session.session.pk}/events/?after=0").json()["events"]
    answered = [f for f in frames if f["type"] == "clarify.answered"]
    assert answered and "html" not in answered[0]  # the result's card says done, not this


def test_the_cli_says_a_question_waits_and_where_to_answer_it(alice, script, worker):
    """`manage.py hermes chat` used to print only the model's text when the turn stopped on
    a clarify question; it now says a question waits and names the session page."""
    import io

    from django.core.management import call_command

    script(asking_model)
    out = io.StringIO()
    call_command("hermes", "chat", "style the button", "--user", "alice", stdout=out)
    question = ClarifyQuestion.objects.get()
    assert question.state == "pending"
    assert (f"(waiting for your answer to Hermes' question: answer it on the session page, "
            f"/sessions/{question.session_id}/)") in out.getvalue()
