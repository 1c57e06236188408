"""Clarify questions: the wait between the model's question and the user's answer.

The runner stores a ClarifyQuestion when the gate turned a clarify call into an "ask"
(agents/tools/clarify.py clarify_gate) and saves the turn as AWAITING_ANSWER; no worker
waits. ``clarify_answer`` records the owner's answer (the first one wins, conditional
UPDATE) and resumes the turn on commit; on resume the call runs and its result is the
answer. Stop cancels open questions through the wait registry (sessions/waits.py), so the
call is repaired as never run. Mirrors approvals/services.py.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from agents.tools.clarify import clarify_question
from sessions.events import event_append
from sessions.models import ClarifyQuestion, Session, Turn
from sessions.waits import Wait, turn_resume_on_commit

MAX_ANSWER_CHARS = 4000
State = ClarifyQuestion.State


def question_to_dict(q: ClarifyQuestion) -> dict:
    """The JSON shape in events: ids, the question, the choices, state and answer."""
    return {"id": q.pk, "session_id": q.session_id, "turn_id": q.turn_id,
            "tool_call_id": q.tool_call_id, "question": q.question, "choices": q.choices,
            "state": q.state, "answer": q.answer}


def _lock_session(session_id: int) -> None:
    list(Session.objects.select_for_update().filter(pk=session_id).values_list("pk", flat=True))


def clarify_question_create(*, session: Session, turn: Turn, call) -> ClarifyQuestion:
    """Store the pending question of ``call`` (a clarify ToolCall) and announce it
    (``clarify.requested``). Inside the caller's transaction. Bad arguments were refused by
    the dispatcher's schema check; a question the tool would refuse is stored with its raw
    text so the user still sees what was asked."""
    try:
        question, choices = clarify_question(call.parsed_arguments())
    except Exception:  # the tool reports the problem as its result on resume
        question, choices = str(call.arguments)[:2000], ()
    row, _ = ClarifyQuestion.objects.get_or_create(
        turn=turn, tool_call_id=call.id,
        defaults={"session": session, "question": question, "choices": list(choices)})
    event_append(session_id=session.pk, type="clarify.requested",
                 payload={"question": question_to_dict(row)})
    return row


def clarify_answers(*, turn: Turn) -> dict[str, str]:
    """{tool_call_id: answer} of the turn's answered questions."""
    return dict(ClarifyQuestion.objects.filter(turn=turn, state=State.ANSWERED)
                .values_list("tool_call_id", "answer"))


def clarify_get(*, user, question_id: int) -> ClarifyQuestion:
    """A question of a session the user owns; Http404 otherwise (unknown and forbidden
    look the same). Team admins may read a session, but only its owner answers."""
    try:
        return ClarifyQuestion.objects.select_related("session").get(
            pk=question_id, session__owner_id=user.pk)
    except (ClarifyQuestion.DoesNotExist, ValueError, TypeError):
        raise Http404("No such question") from None


def clarify_answer(*, user, question_id: int, answer: str) -> ClarifyQuestion:
    """Record the owner's answer and resume the turn on commit. Raises Http404 (not the
    owner's), ValidationError (empty or too long, or already answered / cancelled)."""
    question = clarify_get(user=user, question_id=question_id)
    text = (answer or "").strip()
    if not text:
        raise ValidationError("Write an answer or pick a choice.", code="empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise ValidationError(f"An answer is at most {MAX_ANSWER_CHARS} characters.",
                              code="too_long")
    with transaction.atomic():
        _lock_session(question.session_id)
        won = ClarifyQuestion.objects.filter(pk=question.pk, state=State.PENDING).update(
            state=State.ANSWERED, answer=text, answered_by=user, answered_at=timezone.now())
        if not won:
            question.refresh_from_db()
            raise ValidationError(f"This question was already {question.state}.",
                                  code="already_decided")
        question.refresh_from_db()
        event_append(session_id=question.session_id, type="clarify.answered",
                     payload={"question": question_to_dict(question)})
        if not ClarifyQuestion.objects.filter(turn_id=question.turn_id,
                                              state=State.PENDING).exists():
            turn_resume_on_commit(question.session_id)
    return question


def clarify_cancel_for_session(*, session: Session) -> int:
    """Stop: every pending question of the session → cancelled (event each). No resume."""
    ids = list(ClarifyQuestion.objects.filter(session=session, state=State.PENDING)
               .values_list("pk", flat=True))
    ClarifyQuestion.objects.filter(pk__in=ids, state=State.PENDING).update(
        state=State.CANCELLED, answered_at=timezone.now())
    for question in ClarifyQuestion.objects.filter(pk__in=ids).order_by("id"):
        event_append(session_id=session.pk, type="clarify.answered",
                     payload={"question": question_to_dict(question)})
    return len(ids)


def turn_has_pending_questions(turn: Turn) -> bool:
    """True while a question of ``turn`` waits for its answer."""
    return ClarifyQuestion.objects.filter(turn=turn, state=State.PENDING).exists()


CLARIFY_WAIT = Wait(
    status=Turn.Status.AWAITING_ANSWER,
    pending=turn_has_pending_questions,
    cancel=lambda session: clarify_cancel_for_session(session=session),
)
"""The clarify wait, registered in SessionsConfig.ready. No expiry: a question waits for
its answer (or Stop) as long as it takes."""
