"""The turn's error budget: how many provider errors a turn may recover from, and the rule
that a request identical to one that just failed is never sent again.

Numbers and names the loop (agents/loop.py) uses to end a turn on a provider failure,
kept here so the loop stays short: the recovery caps (issue 10, build 2), the empty-tool-
name streak (case B18) and the ``kind`` values of assistant messages kept after a failed
stream (B21, B22) or a refusal (B27). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.budget import IterationBudget
from agents.errors import TransportError
from agents.messages import ModelRequest

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
STOPPED_KIND = "stopped"
"""``kind`` of the text kept from a reply the user stopped mid-stream: replayed as ordinary
text, marked in the UI (a reload showed a sentence cut short with nothing saying why)."""


@dataclass
class ErrorBudget:
    """Per-turn counters: recoveries used, errors in a row, the last failed request, and
    ``replies`` (model calls that got a reply: the turn's honest iteration count, B18)."""

    retries: int = 0
    replies: int = 0
    errors_in_row: int = 0
    failed: tuple[ModelRequest, TransportError] | None = None

    def check_resend(self, request: ModelRequest) -> None:
        """Raise the last error if ``request`` equals the one that failed: recovery changed
        nothing, and the same bytes are never sent again after an error (B01, B25)."""
        if self.failed is not None and request == self.failed[0]:
            raise self.failed[1]

    def may_recover(self, request: ModelRequest, error: TransportError, *,
                    partial: str) -> bool:
        """Count ``error``; True while a recovery may still be tried (not after text was
        shown to the user, at most MAX_REQUEST_RETRIES per turn, fewer than
        MAX_CONSECUTIVE_MODEL_ERRORS in a row)."""
        self.errors_in_row += 1
        self.failed = (request, error)
        return (not partial and self.retries < MAX_REQUEST_RETRIES
                and self.errors_in_row < MAX_CONSECUTIVE_MODEL_ERRORS)

    def recovered(self, budget: IterationBudget) -> None:
        """A recovery is about to be retried: count it and refund the failed iteration."""
        self.retries += 1
        budget.refund()

    def succeeded(self) -> None:
        """A reply arrived: the error streak ends."""
        self.errors_in_row, self.failed = 0, None
        self.replies += 1
