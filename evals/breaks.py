"""Deliberate harness breaks, to show the suite notices them (issue 17 "Done when").

Each break edits the messages of every request as the request pipeline builds it
(agents/request.py ``RequestPipeline.prepare``, the one place every request is assembled),
standing for a refactor that keeps the unit tests green and changes what the model sees.
``apply(name)`` patches the pipeline and returns the undo; ``python -m evals.run --break
NAME`` runs the suite under one (then compared with the baseline, the regressions are
named); tests/evals/test_suite.py applies them with monkeypatch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from agents.messages import Message
from agents.request import RequestPipeline


def reverse_parallel_results(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Reverse the order of each run of consecutive tool results (a parallel batch)."""
    out: list[Message] = []
    run: list[Message] = []
    for message in messages:
        if message.role == "tool":
            run.append(message)
            continue
        out += reversed(run)
        run = []
        out.append(message)
    return tuple(out + list(reversed(run)))


def drop_oldest_tool_result(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Remove the oldest tool result and its call (a history that forgot a step)."""
    tool = next((m for m in messages if m.role == "tool"), None)
    if tool is None:
        return tuple(messages)
    out = []
    for message in messages:
        if message is tool:
            continue
        if message.role == "assistant" and any(c.id == tool.tool_call_id
                                               for c in message.tool_calls):
            message = replace(message, tool_calls=tuple(
                c for c in message.tool_calls if c.id != tool.tool_call_id))
        out.append(message)
    return tuple(out)


def truncate_tool_results(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Cut every tool result to its first 300 characters (a 'cheaper context' change)."""
    return tuple(replace(m, content=m.wire_text[:300], sent_content=None)
                 if m.role == "tool" else m for m in messages)


BREAKS: dict[str, Callable[[Sequence[Message]], tuple[Message, ...]]] = {
    "reverse-parallel": reverse_parallel_results,
    "drop-oldest-result": drop_oldest_tool_result,
    "truncate-results": truncate_tool_results,
}


def broken_prepare(edit: Callable[[Sequence[Message]], tuple[Message, ...]]):
    """A RequestPipeline.prepare that applies ``edit`` to the request's messages."""
    original = RequestPipeline.prepare

    def prepare(self, history, *, tools=True):
        prepared = original(self, history, tools=tools)
        request = replace(prepared.request, messages=edit(prepared.request.messages))
        return replace(prepared, request=request)

    return prepare


def apply(name: str) -> Callable[[], None]:
    """Patch the pipeline with break ``name`` (a key of BREAKS; KeyError otherwise);
    returns the function that undoes it."""
    original = RequestPipeline.prepare
    RequestPipeline.prepare = broken_prepare(BREAKS[name])

    def undo() -> None:
        RequestPipeline.prepare = original

    return undo
