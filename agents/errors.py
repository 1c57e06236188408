"""Exceptions the harness raises, named for the condition.

Control-flow exits share ``TurnInterrupted`` as a base and carry what the caller must persist.
Transport failures are ``TransportError`` carrying a classification (agents/transports/errors.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.wording import plural

if TYPE_CHECKING:
    from agents.messages import ToolCall, Usage
    from agents.transports.errors import ClassifiedError


class HarnessError(Exception):
    """Base for every error raised by agents/."""


class TurnInterrupted(HarnessError):
    """Base for control-flow exits from a turn (not bugs)."""


class ApprovalRequired(TurnInterrupted):
    """One or more tool calls need a human decision. ``pending``: the calls, in emission
    order, each with its policy decision. The caller stores approval requests and ends the
    task; a resume runs the unanswered calls first."""

    def __init__(self, pending: list[tuple[ToolCall, object]]):
        super().__init__(f"{plural(len(pending), 'tool call')} awaiting approval")
        self.pending = pending


class TurnCancelled(TurnInterrupted):
    """The user pressed stop; the loop answered every outstanding call and stopped.

    ``partial``: the reply text already shown when stop came mid-stream ("" otherwise).
    ``billed``: the stop came while the provider was answering (a stream event had
    arrived), so the call costs money although it returned no reply: the loop records its
    usage like a reply's, or stopping mid-stream would be free spend past every cap.
    ``usage``: what the provider had reported when the stop came (Anthropic's
    message_start carries the input and cache buckets; None when nothing was reported:
    the record is then estimated); its output is counted by the sink from ``partial``."""

    def __init__(self, message: str = "", *, partial: str = "", billed: bool = False,
                 usage: Usage | None = None):
        super().__init__(message)
        self.partial = partial
        self.billed = billed
        self.usage = usage


class LeaseLost(HarnessError):
    """The turn lease was taken by someone else; no further write may land."""


class ToolError(HarnessError):
    """A tool failed in a way the model should read (becomes an is_error tool result)."""


class TransportError(HarnessError):
    """A provider call failed after the transport's own retry policy.

    ``classified``: the ClassifiedError with recovery hints (None: not classified).
    ``partial``: the visible text already delivered ("" when none; cases B21, B22).
    ``attempts``: attempts made. ``interrupted_call``: the tool whose call the stream was
    cut in, never run (B21), else None. ``billed``: the attempts the provider billed though
    they failed (agents.messages.BilledAttempt, oldest first). ``kept``: the sink stored
    the partial text and the billed attempts (EventSink.reply_failed), so nothing stores
    them twice.
    """

    def __init__(self, message: str, classified: ClassifiedError | None = None, *,
                 partial: str = "", attempts: int = 1, interrupted_call: str | None = None,
                 billed: tuple = ()):
        super().__init__(message)
        self.classified = classified
        self.partial = partial
        self.attempts = attempts
        self.interrupted_call = interrupted_call
        self.billed = tuple(billed)
        self.kept = False


class DelegationRequested(TurnInterrupted):
    """The delegate tool asked for child agents. ``request``: the validated batch
    (agents.tools.delegate.DelegationRequest). ``call``: the delegate tool call, attached by
    the caller that announced it (the tool itself does not see its call id). The caller
    creates the children and saves the turn as awaiting children in one transaction; the
    call's tool result is written when the last child ends."""

    def __init__(self, request: object):
        super().__init__("child agents requested")
        self.request = request
        self.call: ToolCall | None = None
