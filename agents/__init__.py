"""Hermes Web's harness: the code between a language model and the world.

Plain Python; never imports django (tests/test_architecture.py enforces it). The seams are
the Protocols below; the value objects live in ``agents.messages``.

- ``Transport``: one provider wire format (agents/transports/).
- ``EventSink``: where the loop reports progress and stores messages (the Django side
  implements it in sessions/sink.py, writing rows under the turn lease).
"""

from __future__ import annotations

from typing import Callable, Protocol

from agents.errors import TransportError, TurnCancelled
from agents.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage


class Transport(Protocol):
    """Adapter for one provider wire format (Anthropic Messages, OpenAI chat completions).

    ``profile`` is the agents.providers.ProviderProfile it talks to.
    """

    profile: object

    def build_payload(self, request: ModelRequest) -> dict:
        """The exact JSON body that ``complete`` would send (cache markers rendered). Used by
        the token estimator so it measures what is really sent."""
        ...

    def complete(self, request: ModelRequest, *, on_text: Callable[[str], None],
                 should_stop: Callable[[], bool] = lambda: False) -> ModelResponse:
        """Send ``request`` with streaming; call ``on_text`` with each text delta.

        Raises agents.errors.TransportError (with a ClassifiedError) after the transport's
        own retry policy is spent, and agents.errors.TurnCancelled if ``should_stop`` turns
        true mid-stream (the partial visible text is then on the exception as ``.partial``).
        """
        ...


class EventSink(Protocol):
    """What the loop tells the outside world. Every method may raise LeaseLost."""

    def message_added(self, message: Message, *, kind: str = "") -> Message:
        """Persist ``message`` (in a transaction under the turn lease); return it with id.
        ``kind`` marks it for display ("incomplete", "refusal"; see agents.loop)."""
        ...

    def messages_added(self, messages: list[Message]) -> list[Message]:
        """Persist a batch (one tool call batch's results) in ONE transaction under the turn
        lease, so a crash cannot keep some of them (B02, B05); return them with ids."""
        ...

    def text_delta(self, text: str) -> None:
        """A streamed fragment of assistant text (display only; batched by the sink)."""
        ...

    def tool_called(self, call: ToolCall) -> None:
        """A tool call is about to run (announced only when it really starts)."""
        ...

    def usage_recorded(self, usage: Usage | None, request: ModelRequest,
                       response: ModelResponse) -> None:
        """One provider call finished (usage None when the provider sent none)."""
        ...

    def reply_added(self, message: Message, *, kind: str = "", usage: Usage | None,
                    request: ModelRequest, response: ModelResponse) -> Message:
        """A provider call's reply: ``usage_recorded`` and ``message_added`` in ONE write
        (the usage is kept even when the lease is lost); returns the message with id."""
        ...

    def reply_stopped(self, stop: TurnCancelled, *, request: ModelRequest) -> None:
        """The user stopped ``request``'s call: keep the text shown (``stop.partial``, as a
        plain assistant message) and, when the provider was already answering
        (``stop.billed``), the call's usage record (``stop.usage`` as reported before the
        stop, output counted from the text shown; None: estimated), in ONE write; the
        usage is kept even when the lease is lost."""
        ...

    def reply_failed(self, error: TransportError, *, request: ModelRequest,
                     kind: str) -> list[Message]:
        """``request``'s call failed after the transport's retries: keep the text the user
        saw (``error.partial``, as an assistant message marked ``kind``) and a usage record
        for every attempt the provider billed though it failed (``error.billed``), in ONE
        write, once per error (``error.kept``); return the stored messages ([] when none)."""
        ...

    def should_stop(self) -> bool:
        """True when the user asked to stop the turn (checked between chunks and tools)."""
        ...

    def steer_pending(self) -> bool:
        """True when a correction (agents/steer.py) waits to land in this turn; asked only
        at safe points, never mid-stream."""
        ...

    def steer_land(self, build: Callable[[list], tuple[Message, ...]]) -> list[Message]:
        """Claim every waiting correction (agents.steer.Correction values, oldest first),
        store ``build(corrections)`` and mark them landed, in ONE transaction under the turn
        lease; return the stored messages ([] when none was waiting)."""
        ...


__all__ = ["Transport", "EventSink", "Message", "ModelRequest", "ModelResponse", "ToolCall",
           "Usage"]
