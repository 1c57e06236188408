"""Steering a running turn: where a correction may land, and what landing appends. Pure,
but for ``land_corrections``, which asks the loop's EventSink.

A message the user sends *as a correction* while a turn runs (seed, "Interrupting a turn
without breaking the cache") is not queued behind the turn: it lands inside it, at the next
safe point. Landing keeps every previously sent byte of the request unchanged and leaves a
transcript every provider accepts:

- the assistant reply produced so far is kept as it was stored: its visible text as plain
  text, its tool calls as calls; its reasoning is never replayed (display only; the wire
  repair strips it, agents/context/history.py, and nothing here copies it anywhere);
- every tool call of that reply that has no result yet is answered with ``STEERED_RESULT``
  (an ``is_error`` result): a call is never left without its result;
- each correction is appended as a real user message, after those results.

Only appends happen, so the request sent before the landing is a prefix of the one after it
(both wire formats merge the results and the correction into one user message *after* the
reply, never into a message already sent).

Safe points (``Point``), decided here and nowhere else:

- ``BEFORE_REQUEST``: every result of the previous batch is stored and nothing new has been
  sent; the correction simply joins the next request.
- ``AFTER_STREAM``: the reply is complete (the stream ended, usage recorded) and none of its
  calls has started; all of them are answered "not run".
- ``BETWEEN_CALLS``: a batch is partly run; the next segment has not started
  (agents/tools/dispatch.py answers the rest "not run", the correction lands at the next
  ``BEFORE_REQUEST``).

Not safe: ``MID_STREAM`` (cutting a stream loses the call's usage report and any half-written
tool call; waiting costs seconds, and a reply without tool calls ends the turn, after which
the correction runs as the next turn anyway) and ``MID_CALL`` (a running tool is never
killed by a steer: its side effects may be half done; Stop is the way to kill it).

Why "not run" rather than running the outstanding calls to completion: they were planned
before the user's correction, which usually exists precisely to prevent them; a side effect
cannot be taken back, while a skipped call costs one re-issue if the model, having read the
correction, still wants it. Calls already running finish normally and keep their results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from agents.messages import Message, ToolCall, tool_result

if TYPE_CHECKING:
    from agents import EventSink

STEERED_RESULT = ("not run: the user steered the turn before this call started; their "
                  "correction follows. Decide again whether it is still needed.")
"""The result of every call a steer overtook (is_error, so the model does not read it as
output)."""


class Point(str, Enum):
    """A place in the loop where the harness asks whether a correction is waiting."""

    BEFORE_REQUEST = "before_request"
    AFTER_STREAM = "after_stream"
    BETWEEN_CALLS = "between_calls"
    MID_STREAM = "mid_stream"
    MID_CALL = "mid_call"


SAFE_POINTS = frozenset({Point.BEFORE_REQUEST, Point.AFTER_STREAM, Point.BETWEEN_CALLS})
"""Where a correction may land (module docstring says why these and not the others)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Correction:
    """One pending correction: ``text`` as the user typed it (not blank), ``ref`` the caller's
    handle for it (the queued Turn's id on the Django side)."""

    text: str
    ref: int | str = ""


def may_land(point: Point, *, history: Sequence[Message], sent: int | None) -> bool:
    """May a correction land at ``point`` of a turn whose live history is ``history``?

    ``sent``: how many messages of ``history`` the last request of this turn carried (None
    before the turn's first request). A landing appends a user message; if the newest
    message was itself the tail of a request already sent (a retry after a provider error),
    the wire would merge the correction into it and change bytes already sent, so it waits
    for the next point. Returns False for every point outside SAFE_POINTS."""
    if point not in SAFE_POINTS:
        return False
    if sent is not None and len(history) <= sent:
        return False
    return bool(history)


def unanswered_calls(history: Sequence[Message]) -> list[ToolCall]:
    """The tool calls of the newest assistant message that have no result after it, in
    emission order (empty when the newest assistant message is followed by a user message
    or carries no calls): a resumed turn's calls, or the ones a landing must answer."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in history[index + 1:] if m.role == "tool"}
            return [c for c in message.tool_calls if c.id not in answered]
        if message.role == "user":
            return []
    return []


def steer_messages(history: Sequence[Message],
                   corrections: Sequence[Correction]) -> tuple[Message, ...]:
    """The messages a landing appends to ``history``: a ``STEERED_RESULT`` for each call of
    the newest assistant message still unanswered (emission order), then one user message
    per correction (in the order given). Empty when ``corrections`` is empty (a steer never
    answers calls by itself). Raises ValueError for a blank correction."""
    if not corrections:
        return ()
    for correction in corrections:
        if not correction.text.strip():
            raise ValueError("a correction cannot be blank")
    results = tuple(tool_result(call, STEERED_RESULT, is_error=True)
                    for call in unanswered_calls(history))
    return results + tuple(Message(role="user", content=c.text) for c in corrections)


def land_corrections(history: list[Message], sink: EventSink, point: Point,
                     sent: int | None) -> list[Message]:
    """Land the corrections waiting in ``sink`` at ``point`` of the loop if it is safe there
    (``may_land``); returns the stored messages to append to ``history`` ([] when none
    landed). Raises LeaseLost from the sink."""
    if not may_land(point, history=history, sent=sent) or not sink.steer_pending():
        return []
    return sink.steer_land(lambda corrections: steer_messages(history, corrections))
