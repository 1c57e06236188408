"""Machine-built turn inputs: how a queued turn of a given origin becomes its user message.

A turn started by a schedule or a webhook carries a display line in ``Turn.input_text``; the
text actually sent (a registered scaffold plus a volatile tail, agents/unattended.py) and
where the scaffold ends are kept by the app that started it (schedules/, webhooks/). That app
registers a builder for its origin in its AppConfig.ready, so sessions/ never imports the
apps above it (docs/architecture.md: arrows point down). ``toolbox.user_message_for`` asks
here first.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.messages import Message as AgentMessage
from sessions.models import Session, Turn

InputBuilder = Callable[[Turn], "AgentMessage | None"]
_BUILDERS: dict[str, InputBuilder] = {}


def input_builder_register(origin: str, builder: InputBuilder) -> None:
    """Register (or replace, on a second ready() in tests) the builder for ``origin``.
    builder(turn) -> the user message to store (content = what a person reads,
    sent_content = the exact text, stable_prefix_len = the scaffold's length), or None to
    fall back to the turn's plain input text."""
    if not origin:
        raise ValueError("a person's turns ('' origin) are never machine-built")
    _BUILDERS[origin] = builder


def turn_input_built(turn: Turn) -> AgentMessage | None:
    """The machine-built user message for ``turn``, or None (no builder for its origin, or
    the builder found nothing)."""
    builder = _BUILDERS.get(turn.origin)
    return builder(turn) if builder is not None else None


PromptLabeler = Callable[[Session], "str | None"]
_LABELERS: list[PromptLabeler] = []


def prompt_labeler_register(labeler: PromptLabeler) -> None:
    """Register how a machine-made session names itself in its system prompt's volatile
    tier. labeler(session) -> the label, or None when the session is not its kind."""
    if labeler not in _LABELERS:
        _LABELERS.append(labeler)


def prompt_session_label(session: Session) -> str:
    """The "Session: <label>" of ``session``'s system prompt: a registered labeler's answer,
    else the session id. A schedule's runs into new sessions share one label, so every run's
    system prompt is byte-identical and the prompt, and the registered scaffold after it,
    are read from cache across runs (benchmarks/bench_schedule_cache.py) instead of being
    written once per run because one id differed."""
    for labeler in _LABELERS:
        label = labeler(session)
        if label:
            return label
    return str(session.pk)
