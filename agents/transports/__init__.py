"""Transports: one module per provider wire format, chosen by the profile's ``transport``.

- ``anthropic_messages``: Anthropic Messages through the official SDK (cache markers).
- ``openai_chat``: OpenAI-compatible chat completions through httpx (no markers).

Shared pieces: ``errors`` (classifier), ``retry`` (the one retry layer), ``usage``
(normalisation), ``breakpoints`` (which markers a route may carry, learned limits).
Not here: provider data (agents/providers.py) and anything that reads the environment.
"""

from __future__ import annotations

from typing import Any

from agents import Transport
from agents.providers import ProviderProfile


def get_transport(profile: ProviderProfile, *, api_key: str | None, model: str | None = None,
                  **options: Any) -> Transport:
    """Build the transport for ``profile``.

    ``api_key``: the key value (settings read it from ``profile.key_env``); ``model``: the
    default model (else the profile's). ``options`` pass through to the transport
    (``timeout`` seconds, ``retry`` RetryPolicy, ``sleep``). Raises ValueError for an
    unknown transport name.
    """
    if profile.transport == "anthropic_messages":
        from agents.transports.anthropic_messages import AnthropicTransport
        return AnthropicTransport(profile, api_key=api_key, model=model, **options)
    if profile.transport == "openai_chat":
        from agents.transports.openai_chat import OpenAIChatTransport
        return OpenAIChatTransport(profile, api_key=api_key, model=model, **options)
    raise ValueError(f"unknown transport {profile.transport!r} for provider {profile.name!r}")


__all__ = ["get_transport"]
