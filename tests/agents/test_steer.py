"""agents/steer.py: where a correction may land and what landing appends (issue 12 item 4).

Properties over generated transcripts, each a run of finished exchanges followed by the
running turn's newest reply with some of its calls answered: a landing leaves a legal
history (the real wire repair finds nothing to fix), answers every call exactly once, ends
with the corrections as real user messages, replays no reasoning, and keeps the bytes the
last request sent as a prefix of the next request on both wire formats (the real renderers).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.backends.local import LocalBackend
from agents.context.history import validate_and_repair
from agents.messages import Message, ToolCall
from agents.policy import Decision
from agents.steer import (SAFE_POINTS, STEERED_RESULT, Correction, Point, may_land,
                          steer_messages, unanswered_calls)
from agents.tools import ToolContext
from agents.tools.dispatch import dispatch_tool_calls
from agents.tools.registry import default_registry
from agents.transports.anthropic_wire import render_messages
from agents.transports.openai_chat import merge_same_role, render_message
from tests.agents.test_history import is_legal

THOUGHT = "SECRET-REASONING-"
"""Every generated reasoning text starts with this, so its absence on the wire is checkable."""

texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda t: t.strip())
names = st.sampled_from(["terminal", "read_file", "write_file", "search_files"])


@st.composite
def exchanges(draw, prefix: str) -> list[Message]:
    """A user message, then assistant replies each with its calls answered, in order."""
    out = [Message(role="user", content=draw(texts))]
    for step in range(draw(st.integers(0, 3))):
        calls = tuple(ToolCall(id=f"{prefix}{step}_{k}", name=draw(names),
                               arguments=json.dumps({"n": k}))
                      for k in range(draw(st.integers(1, 3))))
        out.append(Message(role="assistant", content=draw(st.sampled_from(["", "working"])),
                           tool_calls=calls, reasoning=THOUGHT + draw(texts)))
        out += [Message(role="tool", content=draw(texts), tool_call_id=c.id, tool_name=c.name)
                for c in calls]
    return out


@st.composite
def running_turns(draw):
    """(history, sent, point): finished exchanges, the request the running turn last sent
    (``sent`` messages), its reply with ``answered`` of its calls done, and the point."""
    history: list[Message] = []
    for turn in range(draw(st.integers(0, 2))):
        history += draw(exchanges(f"t{turn}_"))
        history.append(Message(role="assistant", content=draw(texts),
                               reasoning=THOUGHT + "done"))
    history += draw(exchanges("live_"))
    sent = len(history)
    n_calls = draw(st.integers(1, 4))  # a reply without calls ends the turn: no point
    calls = tuple(ToolCall(id=f"now_{k}", name=draw(names), arguments="{}")
                  for k in range(n_calls))
    history.append(Message(role="assistant", content=draw(st.sampled_from(["", "Plan: go."])),
                           tool_calls=calls, reasoning=THOUGHT + draw(texts)))
    answered = draw(st.integers(0, n_calls))
    history += [Message(role="tool", content=f"out {c.id}", tool_call_id=c.id,
                        tool_name=c.name) for c in calls[:answered]]
    if answered == 0:
        point = Point.AFTER_STREAM
    elif answered < n_calls:
        point = Point.BETWEEN_CALLS
    else:
        point = Point.BEFORE_REQUEST
    return history, sent, point


corrections = st.lists(texts.map(lambda t: Correction(text=t)), min_size=1, max_size=3)


def anthropic_wire(messages) -> list[bytes]:
    repaired = validate_and_repair(messages).messages
    return [json.dumps(m, ensure_ascii=False).encode()
            for m in render_messages(tuple(repaired), {})]


def openai_wire(messages) -> list[bytes]:
    repaired = validate_and_repair(messages).messages
    return [json.dumps(m, ensure_ascii=False).encode()
            for m in merge_same_role([render_message(m) for m in repaired])]


@settings(max_examples=300, deadline=None)
@given(running_turns(), corrections)
def test_a_landing_keeps_the_history_legal_and_answers_every_call_once(turn, pending):
    history, sent, point = turn
    assert may_land(point, history=history, sent=sent)
    open_calls = unanswered_calls(history)
    added = steer_messages(history, pending)
    after = [*history, *added]

    repair = validate_and_repair(after)
    assert repair.problems == () and repair.added == ()  # nothing to fix, nothing invented
    assert is_legal(repair.messages)
    results = [m for m in added if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [c.id for c in open_calls]
    assert all(m.is_error and m.content == STEERED_RESULT for m in results)
    tail = added[len(results):]
    assert [(m.role, m.content) for m in tail] == [("user", c.text) for c in pending]
    assert all(m.reasoning is None for m in added)


@settings(max_examples=300, deadline=None)
@given(running_turns(), corrections)
def test_every_byte_sent_before_a_landing_is_a_prefix_of_the_next_request(turn, pending):
    history, sent, _ = turn
    after = [*history, *steer_messages(history, pending)]
    for wire in (anthropic_wire, openai_wire):
        before, now = wire(history[:sent]), wire(after)
        assert now[:len(before)] == before
        assert len(now) > len(before)
        assert not any(THOUGHT.encode() in part for part in now)  # reasoning never replayed


@settings(max_examples=200, deadline=None)
@given(running_turns(), st.sampled_from(list(Point)))
def test_only_the_safe_points_accept_a_correction(turn, point):
    history, sent, _ = turn
    assert may_land(point, history=history, sent=sent) == (point in SAFE_POINTS)
    # The newest message already sent as a request's tail (a retry after an error): the
    # correction would merge into bytes already sent, so it waits.
    assert not may_land(point, history=history[:sent], sent=sent)


def test_the_safe_points_are_exactly_the_three_between_steps():
    assert SAFE_POINTS == {Point.BEFORE_REQUEST, Point.AFTER_STREAM, Point.BETWEEN_CALLS}
    assert may_land(Point.BEFORE_REQUEST, history=[Message(role="user", content="x")],
                    sent=None)  # before the turn's first request
    assert not may_land(Point.BEFORE_REQUEST, history=[], sent=None)


def test_no_correction_appends_nothing_and_a_blank_one_is_refused():
    history = [Message(role="user", content="go"),
               Message(role="assistant", tool_calls=(ToolCall(id="a", name="terminal"),))]
    assert steer_messages(history, []) == ()  # a steer never answers calls by itself
    with pytest.raises(ValueError):
        steer_messages(history, [Correction(text="  \n")])


def test_the_visible_text_is_kept_and_its_reasoning_is_dropped_on_the_wire():
    reply = Message(role="assistant", content="I will delete build/ now.",
                    tool_calls=(ToolCall(id="rm", name="terminal",
                                         arguments='{"command": "rm -rf build"}'),),
                    reasoning=THOUGHT + "they probably want it gone")
    history = [Message(role="user", content="clean up"), reply]
    added = steer_messages(history, [Correction(text="keep build/, delete dist/")])
    wire = render_messages(tuple(validate_and_repair([*history, *added]).messages), {})
    assert wire[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "I will delete build/ now."},
        {"type": "tool_use", "id": "rm", "name": "terminal",
         "input": {"command": "rm -rf build"}}]}
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "rm", "content": STEERED_RESULT,
         "is_error": True},
        {"type": "text", "text": "keep build/, delete dist/"}]


# --- the dispatcher's between-calls point (agents/tools/dispatch.py) -----------------------

def terminal(cid: str, command: str) -> ToolCall:
    return ToolCall(id=cid, name="terminal", arguments=json.dumps({"command": command}))


def test_a_correction_between_calls_lets_the_running_call_finish_and_skips_the_rest(tmp_path):
    ctx = ToolContext(workspace=tmp_path, backend=LocalBackend())
    ran: list[str] = []
    steer = iter([False, True, True])
    outcome = dispatch_tool_calls(
        [terminal("a", "echo one"), terminal("b", "echo two > b.txt"),
         terminal("c", "echo three > c.txt")],
        registry=default_registry(), ctx=ctx, gate=lambda c: Decision(verdict="allow", rule="test"),
        on_call=lambda c: ran.append(c.id), should_steer=lambda: next(steer))
    assert ran == ["a"] and not outcome.interrupted and outcome.pending == ()
    assert outcome.results[0].content == "one\n[exit code 0]"
    assert [(m.tool_call_id, m.content, m.is_error) for m in outcome.results[1:]] == [
        ("b", STEERED_RESULT, True), ("c", STEERED_RESULT, True)]
    assert outcome.outputs["b"].metadata == {"steered": True}
    assert not (tmp_path / "b.txt").exists() and not (tmp_path / "c.txt").exists()


def test_a_correction_answers_the_calls_that_would_wait_for_a_human_too(tmp_path):
    """Nobody is asked to approve a plan the user has just corrected."""
    ctx = ToolContext(workspace=tmp_path, backend=LocalBackend())

    def gate(c):
        return Decision(verdict="ask" if c.id == "rm" else "allow", rule="test")

    steer = iter([False, True])
    outcome = dispatch_tool_calls(
        [terminal("ls", "echo listed"), terminal("rm", "rm -rf build")],
        registry=default_registry(), ctx=ctx, gate=gate, should_steer=lambda: next(steer))
    assert outcome.pending == ()
    assert [(m.tool_call_id, m.content) for m in outcome.results] == [
        ("ls", "listed\n[exit code 0]"), ("rm", STEERED_RESULT)]
    # Without a correction the same batch waits for the human, as before.
    plain = dispatch_tool_calls(
        [terminal("ls", "echo listed"), terminal("rm", "rm -rf build")],
        registry=default_registry(), ctx=ctx, gate=gate, should_steer=lambda: False)
    assert [c.id for c, _ in plain.pending] == ["rm"] and len(plain.results) == 1
