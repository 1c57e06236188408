"""run_turn(): the loop, its iteration budget, refunds and the finalizer. Short on purpose.
The seed's eight lines plus: a budget with refunds (hermes-facts §1; the sixth: execute_code),
one policy-gated dispatcher, resumed calls first, a tool-free finalizer, the error budget
(agents/recovery.py). Requests: agents/request.py; persistence: the EventSink. No Django."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Literal

from agents import EventSink, Transport
from agents.budget import IterationBudget, is_free_iteration
from agents.errors import ApprovalRequired, TransportError, TurnCancelled
from agents.messages import Message, ModelRequest, ModelResponse, ToolCall
from agents.recovery import (EMPTY_NAME_STOP, INCOMPLETE_KIND, MAX_EMPTY_TOOL_NAME_STREAK,
                             REFUSAL_KIND, ErrorBudget)
from agents.steer import Point, land_corrections, unanswered_calls

FINALIZER_PROMPT = ("You have reached the maximum number of tool-calling iterations for this turn. "
                    "Do not call any more tools. Give a final response summarising what you "
                    "found and did, and what is left to do.")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """How a turn ended: ``status`` completed / budget_exhausted / refused (B27) /
    empty_tool_name (B18); ``text`` the final text; ``iterations`` model calls (finalizer
    included, B18); ``history`` the transcript as left; ``free`` refunded execute_code-only
    iterations (charged: ``iterations - free``)."""

    status: Literal["completed", "budget_exhausted", "refused", "empty_tool_name"]
    text: str
    iterations: int
    history: tuple[Message, ...] = ()
    free: int = 0


@dataclass(kw_only=True)
class Harness:
    """The collaborators of one turn, built by the composition root (sessions/runner.py).

    - ``prepare(history) -> (history, request)``: repair, reduce and plan the next request
      (agents/request.py); may persist repairs through the sink.
    - ``execute(calls) -> (results, pending)``: dispatch through the policy gate
      (agents/tools/dispatch.py); ``pending`` are calls awaiting a human.
    - ``observe(request, response)``: calibration, compaction verdict, cache health.
    - ``recover(history, error) -> history | None``: after a provider error asking for
      compaction or a history repair, a new history to retry with, else None."""

    transport: Transport
    prepare: Callable[[list[Message]], tuple[list[Message], ModelRequest]]
    execute: Callable[[list[ToolCall]], tuple[list[Message], list]]
    observe: Callable[[ModelRequest, ModelResponse], None] = lambda req, resp: None
    recover: Callable[[list[Message], TransportError], list[Message] | None] = (
        lambda history, error: None)


def run_turn(history: list[Message], *, harness: Harness, sink: EventSink,
             budget: IterationBudget) -> TurnResult:
    """Run one turn on ``history`` (live messages, the new user message already stored).

    A correction sent while the turn runs lands at the next safe point (agents/steer.py).
    Raises ApprovalRequired (results of calls before the first "ask" already stored),
    TurnCancelled (visible text kept, outstanding calls answered) and TransportError (after
    the transport's retries and one recovery); LeaseLost propagates from the sink."""
    history = list(history)
    pending = unanswered_calls(history)
    if pending:
        history += _run_calls(pending, harness=harness, sink=sink)
    errors, empty_names = ErrorBudget(), 0
    sent: int | None = None  # messages of ``history`` the last request carried
    while budget.consume():
        if sink.should_stop():
            raise TurnCancelled("stopped by the user")
        history += land_corrections(history, sink, Point.BEFORE_REQUEST, sent)
        history, request = harness.prepare(history)
        sent = len(history)
        errors.check_resend(request)  # never the same bytes after an error (B01, B25)
        try:
            response = harness.transport.complete(request, on_text=sink.text_delta,
                                                  should_stop=sink.should_stop)
        except TurnCancelled as exc:  # keeps the text shown; a stop mid-stream is billed too
            sink.reply_stopped(exc, request=request)
            raise
        except TransportError as exc:
            partial = exc.partial  # the user saw it: kept, marked incomplete (B21, B22)
            history += sink.reply_failed(exc, request=request, kind=INCOMPLETE_KIND)
            if not errors.may_recover(request, exc, partial=partial) \
                    or (recovered := harness.recover(history, exc)) is None:
                raise
            errors.recovered(budget)  # refunded: the call never produced a reply
            history = recovered
            continue
        errors.succeeded()
        harness.observe(request, response)
        refused = response.stop_reason == "refusal"  # final; shown as one, billed once (B27)
        # One write for the usage row and the reply (the usage is kept if the lease is lost).
        message = sink.reply_added(response.message, kind=REFUSAL_KIND if refused else "",
                                   usage=response.usage, request=request, response=response)
        history.append(message)
        if refused or not message.tool_calls:
            return TurnResult(status="refused" if refused else "completed", free=budget.free,
                              text=message.content, iterations=errors.replies,
                              history=tuple(history))
        landed = land_corrections(history, sink, Point.AFTER_STREAM, sent)
        if landed:  # its calls answered "not run", the correction after them: ask again
            history += landed
            continue
        empty_names = (empty_names + 1) * any(not c.name.strip() for c in message.tool_calls)
        history += _run_calls(list(message.tool_calls), harness=harness, sink=sink)
        if is_free_iteration([c.name for c in message.tool_calls]):  # the sixth refund
            budget.refund_free()
        if empty_names >= MAX_EMPTY_TOOL_NAME_STREAK:  # results stored: pairing holds (B18)
            return TurnResult(status="empty_tool_name", text=EMPTY_NAME_STOP,
                              iterations=errors.replies, history=tuple(history))
    return replace(_finalize(history, harness=harness, sink=sink, calls_made=errors.replies),
                   free=budget.free)


def _run_calls(calls: list[ToolCall], *, harness: Harness, sink: EventSink) -> list[Message]:
    """Dispatch ``calls``, store the results in one write, raise ApprovalRequired for the
    rest. ``execute`` announces each call as it starts (B01: began, so "interrupted")."""
    results, pending = harness.execute(calls)
    stored = sink.messages_added(results) if results else []
    if pending:
        raise ApprovalRequired(pending)
    return stored


def _finalize(history: list[Message], *, harness: Harness, sink: EventSink,
              calls_made: int) -> TurnResult:
    """Budget spent with no final text: one more call with the tool schema removed
    (removing the tools is a fact; asking the model to stop is only a request)."""
    history = history + land_corrections(history, sink, Point.BEFORE_REQUEST, None)
    note = sink.message_added(Message(role="user", content=FINALIZER_PROMPT))
    history, request = harness.prepare(history + [note])
    request = replace(request, tools=())
    response = harness.transport.complete(request, on_text=sink.text_delta,
                                          should_stop=sink.should_stop)
    harness.observe(request, response)
    # A model that still emits tool calls without tools gets them dropped: nothing can run.
    message = sink.reply_added(replace(response.message, tool_calls=()), usage=response.usage,
                               request=request, response=response)
    return TurnResult(status="budget_exhausted", text=message.content,
                      iterations=calls_made + 1, history=(*history, message))
