"""run_turn(): the loop, its iteration budget, refunds and the finalizer. Short on purpose.

The seed's eight lines plus what each fault needs: a budget with refunds (hermes-facts §1),
tool calls through one dispatcher that gates every call with the policy, unanswered calls of
a resumed turn run first, and a finalizer with the tool schema removed when the budget runs
out with no final text. Request assembly (repair, compaction, cache plan) lives in
agents/request.py; persistence and streaming behind the EventSink. No Django here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Literal

from agents import EventSink, Transport
from agents.budget import IterationBudget
from agents.errors import ApprovalRequired, TransportError, TurnCancelled
from agents.messages import Message, ModelRequest, ModelResponse, ToolCall

FINALIZER_PROMPT = (
    "You have reached the maximum number of tool-calling iterations for this turn. Do not "
    "call any more tools. Give a final response summarising what you found and did, and "
    "what is left to do."
)
MAX_REQUEST_RETRIES = 2
"""Re-sends after a compaction or history repair forced by a provider error, per turn."""
MAX_CONSECUTIVE_MODEL_ERRORS = 3
"""Provider errors in a row (after the transport's own retries and failover) that end the
turn, whatever recovery is still on offer (issue 10, build 2)."""
MAX_EMPTY_TOOL_NAME_STREAK = 2
"""Consecutive model replies carrying an empty tool name that end the turn (case B18)."""
EMPTY_NAME_STOP = ("Stopped: the model called a tool with an empty name twice in a row. Tool-"
                   "call syntax it read in files or tool output is data, not an instruction; "
                   "send a new message to continue.")
INCOMPLETE_KIND = "incomplete"
"""``kind`` of an assistant message kept from a stream that failed after text was shown
(cases B21, B22): replayed as ordinary text, marked in the UI."""
REFUSAL_KIND = "refusal"
"""``kind`` of an assistant message whose reply was a refusal (case B27)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """How a turn ended: ``status`` "completed", "budget_exhausted", "refused" (the model
    refused; the user may rephrase, case B27) or "empty_tool_name" (case B18); ``text`` the
    final assistant text; ``iterations`` model calls made in this turn (every request that
    got a reply, the finalizer included: the count is honest, B18); ``history`` the live
    transcript as the turn left it (the caller may keep it for the next turn)."""

    status: Literal["completed", "budget_exhausted", "refused", "empty_tool_name"]
    text: str
    iterations: int
    history: tuple[Message, ...] = ()


@dataclass(kw_only=True)
class Harness:
    """The collaborators of one turn, built by the composition root (sessions/runner.py).

    - ``prepare(history) -> (history, request)``: repair, reduce and plan the next request
      (agents/request.py); may persist repairs through the sink.
    - ``execute(calls) -> (results, pending)``: dispatch through the policy gate
      (agents/tools/dispatch.py); ``pending`` are calls awaiting a human.
    - ``observe(request, response)``: calibration, compaction verdict, cache health.
    - ``recover(history, error) -> history | None``: after a provider error that asks for
      compaction or a history repair, a new history to retry with, else None.
    """

    transport: Transport
    prepare: Callable[[list[Message]], tuple[list[Message], ModelRequest]]
    execute: Callable[[list[ToolCall]], tuple[list[Message], list]]
    observe: Callable[[ModelRequest, ModelResponse], None] = lambda req, resp: None
    recover: Callable[[list[Message], TransportError], list[Message] | None] = (
        lambda history, error: None)


def unanswered_calls(history: list[Message]) -> list[ToolCall]:
    """Calls of the last assistant message that have no tool result yet (a resumed turn)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in history[index + 1:] if m.role == "tool"}
            return [c for c in message.tool_calls if c.id not in answered]
        if message.role == "user":
            return []
    return []


def run_turn(history: list[Message], *, harness: Harness, sink: EventSink,
             budget: IterationBudget) -> TurnResult:
    """Run one turn on ``history`` (live messages, the new user message already stored).

    Raises ApprovalRequired (results of calls before the first "ask" already stored),
    TurnCancelled (visible text kept, outstanding calls answered) and TransportError (after
    the transport's retries and one recovery); LeaseLost propagates from the sink.
    """
    history = list(history)
    pending = unanswered_calls(history)
    if pending:
        history += _run_calls(pending, harness=harness, sink=sink)
    retries = errors_in_row = empty_names = calls_made = 0
    failed: tuple[ModelRequest, TransportError] | None = None
    while budget.consume():
        if sink.should_stop():
            raise TurnCancelled("stopped by the user")
        history, request = harness.prepare(history)
        if failed is not None and request == failed[0]:
            # Recovery changed nothing: never resend the same bytes after an error (B01, B25).
            raise failed[1]
        try:
            response = harness.transport.complete(request, on_text=sink.text_delta,
                                                  should_stop=sink.should_stop)
        except TurnCancelled as exc:
            partial = getattr(exc, "partial", "")
            if partial:  # keep what the user saw, demoted to plain assistant text
                sink.message_added(Message(role="assistant", content=partial))
            raise
        except TransportError as exc:
            partial = getattr(exc, "partial", "")
            if partial:  # the user saw it: keep it, marked incomplete (B21, B22)
                history.append(sink.message_added(Message(role="assistant", content=partial),
                                                  kind=INCOMPLETE_KIND))
            errors_in_row += 1
            recovered = None
            if retries < MAX_REQUEST_RETRIES and errors_in_row < MAX_CONSECUTIVE_MODEL_ERRORS \
                    and not partial:
                recovered = harness.recover(history, exc)
            if recovered is None:
                raise
            retries += 1
            budget.refund()  # the call never produced a reply: it does not count
            failed = (request, exc)
            history = recovered
            continue
        errors_in_row, failed, calls_made = 0, None, calls_made + 1
        harness.observe(request, response)
        sink.usage_recorded(response.usage, request, response)
        if response.stop_reason == "refusal":
            # A refusal is final for this input: shown as one (a field, not invented text),
            # billed once, never resent; the user may rephrase (B27).
            message = sink.message_added(response.message, kind=REFUSAL_KIND)
            history.append(message)
            return TurnResult(status="refused", text=message.content, iterations=calls_made,
                              history=tuple(history))
        message = sink.message_added(response.message)
        history.append(message)
        if not message.tool_calls:
            return TurnResult(status="completed", text=message.content, iterations=calls_made,
                              history=tuple(history))
        empty_names = empty_names + 1 if any(not c.name.strip() for c in message.tool_calls) \
            else 0
        history += _run_calls(list(message.tool_calls), harness=harness, sink=sink)
        if empty_names >= MAX_EMPTY_TOOL_NAME_STREAK:  # results stored: pairing holds (B18)
            return TurnResult(status="empty_tool_name", text=EMPTY_NAME_STOP,
                              iterations=calls_made, history=tuple(history))
    return _finalize(history, harness=harness, sink=sink, calls_made=calls_made)


def _run_calls(calls: list[ToolCall], *, harness: Harness, sink: EventSink) -> list[Message]:
    """Dispatch ``calls``; store each result; raise ApprovalRequired for the rest."""
    for call in calls:
        sink.tool_called(call)
    results, pending = harness.execute(calls)
    stored = [sink.message_added(result) for result in results]
    if pending:
        raise ApprovalRequired(pending)
    return stored


def _finalize(history: list[Message], *, harness: Harness, sink: EventSink,
              calls_made: int) -> TurnResult:
    """Budget spent with no final text: one more call with the tool schema removed
    (removing the tools is a fact; asking the model to stop is only a request)."""
    note = sink.message_added(Message(role="user", content=FINALIZER_PROMPT))
    history, request = harness.prepare(history + [note])
    request = replace(request, tools=())
    response = harness.transport.complete(request, on_text=sink.text_delta,
                                          should_stop=sink.should_stop)
    harness.observe(request, response)
    sink.usage_recorded(response.usage, request, response)
    # A model that still emits tool calls without tools gets them dropped: nothing can run.
    message = sink.message_added(replace(response.message, tool_calls=()))
    return TurnResult(status="budget_exhausted", text=message.content,
                      iterations=calls_made + 1, history=(*history, message))
