"""clarify: the model asks the user a question (optionally with choices) and the answer is
the tool result.

Like an approval, the question is a wait, not a blocked worker: ``clarify_gate`` turns an
unanswered clarify call into an "ask" decision (rule ``clarify``), the dispatcher stops
there, the composition root saves the question and the turn as awaiting the answer and the
task ends; the user's answer resumes the turn and the call, re-gated, runs and returns the
answer. A turn nobody watches (a schedule, a webhook, a child agent) gets NO_HUMAN at once
(seed: no asking the user from a child; Turn.unattended). Storage and resume are
sessions/clarify.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.errors import ToolError
from agents.messages import ToolCall, ToolSpec
from agents.policy.context import Decision
from agents.tools import CURRENT_CALL_ID, NoPathArguments, PathScope, ToolContext, ToolOutput

MAX_QUESTION_CHARS = 2000
MAX_CHOICES = 4
"""hermes offers up to four choices; the user may always answer in their own words."""
MAX_CHOICE_CHARS = 200
NO_HUMAN = ("no human available: this run is unattended, so nobody can answer. Decide "
            "with what you have, state the assumption you made, and go on.")
CLARIFY_RULE = "clarify"


def clarify_question(args: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(question, choices) from the arguments. Raises ToolError for an empty or long
    question, or choices that are not up to MAX_CHOICES short distinct strings."""
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ToolError("clarify needs a non-empty question")
    if len(question) > MAX_QUESTION_CHARS:
        raise ToolError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
    raw = args.get("choices") or []
    if not isinstance(raw, list) or len(raw) > MAX_CHOICES:
        raise ToolError(f"choices must be a list of at most {MAX_CHOICES} strings")
    choices: list[str] = []
    for choice in raw:
        if not isinstance(choice, str) or not choice.strip() or len(choice) > MAX_CHOICE_CHARS:
            raise ToolError(f"each choice must be a non-empty string of at most "
                            f"{MAX_CHOICE_CHARS} characters")
        if choice.strip() not in choices:
            choices.append(choice.strip())
    return question.strip(), tuple(choices)


def clarify_gate(call: ToolCall, decision: Decision, *, answered: bool,
                 unattended: bool) -> Decision:
    """The policy's decision for ``call``, turned into an "ask" (rule ``clarify``) when it
    is a clarify call the policy allowed that nobody answered yet and a human can answer.
    Everything else passes unchanged (a denied clarify stays denied)."""
    if call.name != "clarify" or decision.verdict != "allow" or answered or unattended:
        return decision
    return Decision(verdict="ask", rule=CLARIFY_RULE, reason="waiting for the user's answer",
                    normalized="clarify")


class ClarifyTool(NoPathArguments):
    """clarify {question, choices?} → "The user answered: <answer>". ``ctx.extras``:
    ``clarify_answers`` {tool_call_id: answer} for this turn, ``unattended`` True → NO_HUMAN.
    Interactive: the scheduler runs it alone."""

    spec = ToolSpec(
        name="clarify",
        description=(
            "Ask the user a question when you cannot proceed without their answer. Offer up "
            "to four short choices when the answer is one of a few; the user may also answer "
            "in their own words. The turn pauses until they answer."),
        input_schema={
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question to ask."},
                "choices": {"type": "array", "items": {"type": "string"},
                            "description": "Up to four suggested answers."},
            },
            "required": ["question"],
            "additionalProperties": False,
        },
    )
    read_only = True

    effect = "state"  # a question to the user
    interactive = True

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        clarify_question(args)
        if ctx.extras.get("unattended"):
            return ToolOutput(text=NO_HUMAN, metadata={"answered": False})
        answers: Mapping[str, str] = ctx.extras.get("clarify_answers") or {}
        call_id = CURRENT_CALL_ID.get()
        if call_id not in answers:
            raise ToolError("no answer was recorded for this question")
        return ToolOutput(text=f"The user answered: {answers[call_id]}",
                          metadata={"answered": True})
