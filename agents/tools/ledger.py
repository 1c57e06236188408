"""The tool-result ledger's decision: which calls of a batch to run, and which to answer
from what is already known (issue 10 item 9; failure cases B02, B05, B06, B39).

A worker can die, or its task be delivered twice, at any line between "the tool ran" and
"its result is in the transcript". The caller keeps a ledger of every finished call's output
(keyed by call id, tool name and arguments) and the set of calls that were announced as
started (``tool.called``) but have neither a ledger entry nor a stored result. For each call
of a batch, in emission order:

- its key is in the ledger → the stored output, not run again. If that output already
  answered an earlier call in the transcript (the model re-issued the same id with the same
  arguments, B06), a note says so;
- else its id is in ``started`` → it began and its outcome is unknown: ``UNKNOWN_OUTCOME``
  (an error result), never run again, so a side effect cannot happen twice;
- else it runs.

Pure: no I/O, no Django.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from agents.messages import Message, ToolCall, tool_result

UNKNOWN_OUTCOME = ("interrupted while running: the worker running this tool call stopped "
                   "before its result was recorded, so its outcome is unknown and it may "
                   "have had partial effects. It was not run again; check its effects before "
                   "repeating it.")
"""Result for a call that started and whose output was never recorded (B01, B39)."""
REPLAYED_NOTE = ("(this call repeats an earlier call with the same id and arguments; the "
                 "earlier result is returned and the tool was not run again)\n")
"""Prefix of a result answered from an output that already answered an earlier call."""

LedgerKey = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One finished call's output as the tool returned it (before spilling): ``content``
    (chars), ``is_error``; ``claimed``: True when a stored transcript result already
    carries it."""

    content: str
    is_error: bool
    claimed: bool = False


def ledger_key(call: ToolCall) -> LedgerKey:
    """(call id, tool name, raw arguments): identical only for the same call replayed."""
    return (call.id, call.name, call.arguments or "{}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerSplit:
    """``answered``: emission index → the result message for calls not to run;
    ``to_run``: indexes of calls to dispatch, in emission order."""

    answered: Mapping[int, Message]
    to_run: tuple[int, ...]


def split_by_ledger(calls: Sequence[ToolCall], *, ledger: Mapping[LedgerKey, LedgerEntry],
                    started: Collection[str]) -> LedgerSplit:
    """Decide, per call, ledger answer / unknown outcome / run (see the module docstring)."""
    answered: dict[int, Message] = {}
    to_run: list[int] = []
    for index, call in enumerate(calls):
        entry = ledger.get(ledger_key(call))
        if entry is not None:
            text = (REPLAYED_NOTE + entry.content) if entry.claimed else entry.content
            answered[index] = tool_result(call, text, is_error=entry.is_error)
        elif call.id in started:
            answered[index] = tool_result(call, UNKNOWN_OUTCOME, is_error=True)
        else:
            to_run.append(index)
    return LedgerSplit(answered=answered, to_run=tuple(to_run))
