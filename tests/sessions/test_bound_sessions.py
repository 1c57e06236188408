"""The worker's kept sessions through real turns (issue 15 item 3): an entry is invalid once
another worker has served the session, and its owner then rebuilds from rows; an entry nobody
else touched is reused; a transcript another worker rewrote is never replayed stale.

Two workers are two SessionCache objects (what two worker processes hold); each turn runs the
real task (lease, runner, loop, DbSink) with the cache of the worker that serves it, against
the provider simulator over HTTP. What the model was sent is read back from the simulator's
own record.
"""

from __future__ import annotations

import pytest

from agents.context.history import INTERRUPTED, CallTally
from agents.session_cache import SessionCache
from agents.transports import anthropic_wire
from sessions import runner
from sessions.events import event_append
from sessions.models import Message, RunEvent, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task
from simulator.script import Reply, Script, ScriptRequest

pytestmark = pytest.mark.django_db(transaction=True)


def answer_policy(request: ScriptRequest) -> Reply:
    """A text answer naming the question; a request without tools (the summariser) gets a
    summary."""
    if not request.tool_names:
        return Reply(text="Summary: the user asked numbered questions; each was answered.")
    return Reply(text=f"Answer to <{request.last_user_text}>.")


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice")


def serve(worker: SessionCache, session, user, text: str, monkeypatch) -> None:
    """One turn of ``session`` served by ``worker`` (its cache is the runner's meanwhile)."""
    monkeypatch.setattr(runner, "BOUND", worker)
    turn_start(session=session, user=user, text=text)
    turn_run_task.apply(args=[session.pk])
    last = Turn.objects.filter(session=session).order_by("-id").first()
    assert last.status == Turn.Status.COMPLETED, last.error


def wire_texts(body: dict) -> list[str]:
    """Every text block of a recorded Anthropic request, in order."""
    out = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        out += [b.get("text", "") for b in content if b.get("type") == "text"]
    return out


def conversation_requests(simulator) -> list[dict]:
    return [r.body for r in simulator.state.requests if r.status == 200 and r.body.get("tools")]


def test_a_turn_served_by_another_worker_invalidates_the_entry(alice, simulator, monkeypatch):
    simulator.state.script = Script(answer_policy)
    worker_a, worker_b = SessionCache(), SessionCache()
    session = session_create(user=alice)

    serve(worker_a, session, alice, "question one", monkeypatch)
    first = worker_a.peek(session.pk)
    assert first is not None and first.history[-1].content == "Answer to <question one>."

    serve(worker_b, session, alice, "question two, asked on B", monkeypatch)
    assert worker_b.peek(session.pk) is not None  # B kept its own copy
    assert worker_a.peek(session.pk) is first     # A's copy is untouched, and now stale

    serve(worker_a, session, alice, "question three", monkeypatch)
    sent = wire_texts(conversation_requests(simulator)[-1])
    assert sent == ["question one", "Answer to <question one>.",
                    "question two, asked on B", "Answer to <question two, asked on B>.",
                    "question three"]
    rebuilt = worker_a.peek(session.pk)
    # A rebuilt its pipeline from rows: the one kept after question one described a
    # conversation B moved on (calibration anchor, last billed size, memos).
    assert rebuilt is not None and rebuilt.pipeline is not first.pipeline
    live = list(Message.objects.filter(session=session, active=True).order_by("id")
                .values_list("id", flat=True))
    assert [m.id for m in rebuilt.history] == live

    # Nobody else served since: A's copy is reused as is (the stamp does not over-invalidate).
    serve(worker_a, session, alice, "question four", monkeypatch)
    again = worker_a.peek(session.pk)
    assert again.pipeline is rebuilt.pipeline
    assert again.history[:len(rebuilt.history)] == rebuilt.history
    assert wire_texts(conversation_requests(simulator)[-1])[-3:] == [
        "question three", "Answer to <question three>.", "question four"]


def test_a_transcript_rewritten_by_another_worker_is_never_replayed_stale(alice, simulator,
                                                                          monkeypatch):
    """B compacts (``/compact``) between two turns on A: A's next request carries B's summary
    and none of the archived messages, though A's copy still holds them. (Ten long questions:
    enough for a middle to summarise between the protected head and the 10K-token tail.)"""
    simulator.state.script = Script(answer_policy)
    worker_a, worker_b = SessionCache(), SessionCache()
    session = session_create(user=alice)
    filler = " ".join(f"word{i}" for i in range(1200))  # ~2,000 tokens a question
    for n in range(1, 11):
        serve(worker_a, session, alice, f"question {n}: {filler}", monkeypatch)
    stale = worker_a.peek(session.pk)
    assert sum(m.content.startswith("question 4:") for m in stale.history) == 1

    serve(worker_b, session, alice, "/compact", monkeypatch)
    assert RunEvent.objects.filter(session=session, type="compaction").exists()

    serve(worker_a, session, alice, "question 11", monkeypatch)
    sent = wire_texts(conversation_requests(simulator)[-1])
    assert not any(text.startswith("question 4:") for text in sent)
    assert any("the user asked numbered questions" in text for text in sent)
    assert sent[-1] == "question 11"
    live = [m.content for m in
            Message.objects.filter(session=session, active=True).order_by("id")]
    kept = worker_a.peek(session.pk)
    assert [m.content for m in kept.history] == live


def test_the_next_turn_renders_only_what_was_appended(alice, simulator, monkeypatch):
    """The wire rendering of a kept session travels with its entry (charged to the cache's
    byte budget) and is handed to the next turn's thread: the first request of that turn
    renders the appended messages only, and sends exactly the live transcript. The task
    leaves no rendering on its thread (a thread never keeps a history alive)."""
    simulator.state.script = Script(answer_policy)
    worker = SessionCache()
    session = session_create(user=alice)
    n_turns = anthropic_wire.RENDER_CACHE_MIN // 2 + 2  # past the cache's minimum
    for n in range(n_turns):
        serve(worker, session, alice, f"question {n}", monkeypatch)
    kept = worker.peek(session.pk)
    assert kept.rendered is not None and kept.rendered_size > 0
    assert kept.charged == kept.size + kept.rendered_size
    assert worker.stats().bytes == kept.charged
    assert anthropic_wire._RENDERED.__dict__.get("entry") is None

    rendered: list[str] = []
    plain_blocks = anthropic_wire._plain_blocks

    def counting(message):
        rendered.append(message.content)
        return plain_blocks(message)

    monkeypatch.setattr(anthropic_wire, "_plain_blocks", counting)
    serve(worker, session, alice, "question last", monkeypatch)
    live = [m.content for m in Message.objects.filter(session=session, active=True)
            .order_by("id")]
    assert wire_texts(conversation_requests(simulator)[-1]) == live[:-1]
    # The new question (+ up to 4 marked messages whose block count is checked), not the
    # 2 x n_turns messages before it.
    assert "question last" in rendered and len(rendered) <= 6, rendered
    assert "question 0" not in rendered


def test_a_row_written_between_turns_is_read_even_with_the_copy_kept(alice, simulator,
                                                                      monkeypatch):
    """The kept copy skips its new-rows query only when the start write saw no row after
    the copy's last: a message stored between two turns (here by hand, as another writer
    would) reaches the next request."""
    simulator.state.script = Script(answer_policy)
    worker = SessionCache()
    session = session_create(user=alice)
    serve(worker, session, alice, "question one", monkeypatch)
    assert worker.peek(session.pk) is not None
    Message.objects.create(session=session, role="user", content="a note added in between")
    serve(worker, session, alice, "question two", monkeypatch)
    sent = wire_texts(conversation_requests(simulator)[-1])
    assert sent == ["question one", "Answer to <question one>.",
                    "a note added in between\n\nquestion two"] or \
        sent == ["question one", "Answer to <question one>.", "a note added in between",
                 "question two"]


def test_a_call_left_open_between_turns_is_counted_by_the_kept_tally(alice, simulator,
                                                                    monkeypatch):
    """The kept copy's call tally is extended by the rows appended since, not recounted:
    an assistant call stored between two turns (by hand, as a dead worker leaves one: its
    tool.called announced, no result) is unanswered in the next turn's tally, so the wire
    repair looks it up and tells the model it was interrupted, never "not executed"."""
    simulator.state.script = Script(answer_policy)
    worker = SessionCache()
    session = session_create(user=alice)
    serve(worker, session, alice, "question one", monkeypatch)
    kept = worker.peek(session.pk)
    assert kept.call_tally == CallTally.of(kept.history)
    Message.objects.create(session=session, role="assistant", content="",
                           tool_calls=[{"id": "toolu_left_open", "name": "terminal",
                                        "arguments": "{\"command\": \"make\"}"}])
    event_append(session_id=session.pk, type="tool.called", payload={
        "turn_id": kept.turn_id, "tool_call": {"id": "toolu_left_open", "name": "terminal",
                                               "arguments": "{\"command\": \"make\"}"}})
    tails: list[list[str]] = []
    extended = CallTally.extended

    def spy(self, messages):
        tails.append([m.content for m in messages])
        return extended(self, messages)

    monkeypatch.setattr(CallTally, "extended", spy)
    serve(worker, session, alice, "question two", monkeypatch)
    # The kept tally was extended by the rows after the copy: the open call, the question.
    assert tails and tails[0] == ["", "question two"], tails
    body = conversation_requests(simulator)[-1]
    results = [b for m in body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_left_open"]
    assert INTERRUPTED in str(results[0]["content"])
