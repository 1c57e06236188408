"""Issue-13 tools on real services: PostgreSQL, a Celery worker consuming from Redis. The
web side enqueues the turn; the worker runs it until the clarify question and ends its
task (no worker waits); the owner's answer enqueues the resume on commit and the worker
finishes the turn; a second session on the same worker carries the remembered fact, and an
execute_code-only iteration is refunded in Turn.iterations."""

from __future__ import annotations

import time

import pytest

from simulator.script import Reply, ScriptRequest, ToolCallSpec
from sessions.clarify import clarify_answer
from sessions.models import ClarifyQuestion, Turn
from sessions.services import session_create, turn_start

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_worker(settings):
    from celery.contrib.testing.worker import start_worker

    from hermes_web.celery import app

    assert settings.CELERY_BROKER_URL.startswith("redis://"), "services tests need REDIS_URL"
    app.control.purge()
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False,
                      shutdown_timeout=30) as worker:
        yield worker


def model(request: ScriptRequest) -> Reply:
    if request.tool_results:
        return Reply(text="Done: " + request.tool_results[-1].result)
    text = request.last_user_text
    if text.startswith("ask"):
        return Reply(tool_calls=(ToolCallSpec(name="clarify", input={
            "question": "Which region?", "choices": ["eu", "us"]}),))
    if text.startswith("remember"):
        return Reply(tool_calls=(ToolCallSpec(name="memory", input={
            "action": "add", "content": "Deploys go to region eu-west."}),))
    if text.startswith("code"):
        return Reply(tool_calls=(ToolCallSpec(name="execute_code", input={
            "code": "from hermes_tools import read_file\nprint(read_file(path='README.md')[:20])"}),))
    system = request.body.get("system") or []
    prompt = "".join(b["text"] for b in system) if isinstance(system, list) else system
    return Reply(text="eu-west" if "eu-west" in prompt else "unknown")


def wait_for(turn: Turn, *statuses: str, seconds: float = 60) -> Turn:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        turn.refresh_from_db()
        if turn.status in statuses:
            return turn
        time.sleep(0.1)
    raise AssertionError(f"turn {turn.pk} is {turn.status}, not {statuses}")


def test_clarify_memory_and_refund_on_a_redis_worker(alice, script, redis_worker):
    script(model)
    session = session_create(user=alice)
    turn = wait_for(turn_start(session=session, user=alice, text="ask me"),
                    Turn.Status.AWAITING_ANSWER, Turn.Status.FAILED)
    assert turn.status == Turn.Status.AWAITING_ANSWER, turn.error
    question = ClarifyQuestion.objects.get(turn=turn)
    clarify_answer(user=alice, question_id=question.pk, answer="eu")
    turn = wait_for(turn, Turn.Status.COMPLETED, Turn.Status.FAILED)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert turn.iterations == 2

    wait_for(turn_start(session=session, user=alice, text="remember it"), Turn.Status.COMPLETED)
    coded = wait_for(turn_start(session=session, user=alice, text="code it"),
                     Turn.Status.COMPLETED, Turn.Status.FAILED)
    assert coded.status == Turn.Status.COMPLETED and coded.iterations == 1  # one refunded

    other = session_create(user=alice)
    wait_for(turn_start(session=other, user=alice, text="where?"), Turn.Status.COMPLETED)
    from sessions.models import Message

    last = Message.objects.filter(session=other, role="assistant").order_by("-id").first()
    assert last.content == "eu-west"
