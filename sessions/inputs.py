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
from sessions.models import Turn

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
