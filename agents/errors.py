"""Exceptions the harness raises, named for the condition.

Control-flow exits share ``TurnInterrupted`` as a base and carry what the caller must persist.
Transport failures are ``TransportError`` carrying a classification (agents/transports/errors.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.messages import ToolCall


class HarnessError(Exception):
    """Base for every error raised by agents/."""


class TurnInterrupted(HarnessError):
    """Base for control-flow exits from a turn (not bugs)."""


class ApprovalRequired(TurnInterrupted):
    """One or more tool calls need a human decision. ``pending``: the calls, in emission
    order, each with its policy decision. The caller stores approval requests and ends the
    task; a resume runs the unanswered calls first."""

    def __init__(self, pending: list[tuple[ToolCall, object]]):
        super().__init__(f"{len(pending)} tool call(s) awaiting approval")
        self.pending = pending


class TurnCancelled(TurnInterrupted):
    """The user pressed stop; the loop answered every outstanding call and stopped."""


class LeaseLost(HarnessError):
    """The turn lease was taken by someone else; no further write may land."""


class ToolError(HarnessError):
    """A tool failed in a way the model should read (becomes an is_error tool result)."""


class TransportError(HarnessError):
    """A provider call failed after the transport's own retry policy.

    ``classified``: an agents.transports.errors.ClassifiedError with recovery hints.
    """

    def __init__(self, message: str, classified: object | None = None):
        super().__init__(message)
        self.classified = classified


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
