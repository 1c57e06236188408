"""clarify through real turns (issue 13 item 4): the question saves the turn as
AWAITING_ANSWER with no worker attached, the owner's answer (a POST through the test client,
ownership checked) resumes it and becomes the tool result, Stop cancels it through the wait
registry, and an unattended turn gets "no human available" at once.
"""

from __future__ import annotations

import pytest

from simulator.script import Reply, ScriptRequest, ToolCallSpec
from agents.tools.clarify import NO_HUMAN
from sessions.models import ClarifyQuestion, RunEvent, Turn
from sessions.services import turn_stop

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Which colour should the button be?"
CHOICES = ["Blue", "Green"]


def asking_model(request: ScriptRequest) -> Reply:
    """"style the button" → clarify (with choices); a tool result → "Going with: <it>"."""
    if request.tool_results:
        return Reply(text="Going with: " + request.tool_results[-1].result)
    if "button" in request.last_user_text:
        return Reply(text="One question first.", tool_calls=(ToolCallSpec(
            name="clarify", input={"question": QUESTION, "choices": CHOICES}),))
    return Reply(text="echo: " + request.last_user_text)


def _answer_url(question: ClarifyQuestion) -> str:
    return f"/sessions/{question.session_id}/clarify/{question.pk}/answer/"


def test_a_question_waits_without_a_worker_and_the_answer_resumes_the_turn(
        alice, bob, script, chat, login, client):
    sim = script(asking_model)
    session = chat(alice)
    turn = session.say("style the button")
    assert turn.status == Turn.Status.AWAITING_ANSWER
    question = ClarifyQuestion.objects.get(session=session.session)
    assert (question.question, question.choices, question.state) == (QUESTION, CHOICES,
                                                                     "pending")
    assert session.tool_rows() == []
    types = [e.type for e in session.events()]
    assert types[-2:] == ["clarify.requested", "turn.awaiting_answer"]
    requests_before = len(sim.state.requests)

    # A second task while nobody answered runs nothing and calls no model.
    session.run()
    turn.refresh_from_db()
    assert turn.status == Turn.Status.AWAITING_ANSWER
    assert len(sim.state.requests) == requests_before

    # The page shows the question with its choices to the owner.
    page = login(alice).get(f"/sessions/{session.session.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert QUESTION in html and 'value="Blue"' in html and "Waiting for your answer" in html

    # Someone else cannot answer (404, as for an unknown question); an empty answer is a
    # form error (400); neither resumes anything.
    client.logout()
    assert login(bob).post(_answer_url(question), {"answer": "Red"}).status_code == 404
    client.logout()
    owner = login(alice)
    empty = owner.post(_answer_url(question), {"answer": "  "}, HTTP_HX_REQUEST="true")
    assert empty.status_code == 400 and "Write an answer" in empty.content.decode()
    question.refresh_from_db()
    assert question.state == "pending"

    answered = owner.post(_answer_url(question), {"answer": "Green"}, HTTP_HX_REQUEST="true")
    assert answered.status_code == 200 and "Green" in answered.content.decode()
    question.refresh_from_db()
    assert (question.state, question.answer, question.answered_by) == ("answered", "Green",
                                                                       alice)
    late = owner.post(_answer_url(question), {"answer": "Blue"}, HTTP_HX_REQUEST="true")
    assert late.status_code == 400 and "already answered" in late.content.decode()

    session.run()  # the resume the answer enqueued (nothing consumes the in-memory broker)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    (result,) = session.tool_rows()
    assert result.content == "The user answered: Green" and not result.is_error
    assert session.final_text() == "Going with: The user answered: Green"
    assert turn.iterations == 2


def test_stop_cancels_the_question_through_the_wait_registry(alice, script, chat):
    script(asking_model)
    session = chat(alice)
    turn = session.say("style the button")
    assert turn.status == Turn.Status.AWAITING_ANSWER
    assert turn_stop(session=session.session)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED
    question = ClarifyQuestion.objects.get(session=session.session)
    assert question.state == "cancelled"
    # The next message runs (nothing stranded behind the cancelled wait).
    later = session.say("hello")
    assert later.status == Turn.Status.COMPLETED
    assert session.final_text() == "echo: hello"


def test_an_unattended_turn_gets_no_human_available_at_once(alice, script, chat):
    script(asking_model)
    session = chat(alice)
    turn = Turn.objects.create(session=session.session, input_text="style the button",
                               origin="schedule")
    session.run()
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    (result,) = session.tool_rows()
    assert result.content == NO_HUMAN
    assert not ClarifyQuestion.objects.exists()
    assert not RunEvent.objects.filter(type="clarify.requested").exists()
