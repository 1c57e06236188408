"""Provider profiles: what Hermes Web knows about each model endpoint, declared as data.

A profile names the wire format (the transport), the endpoint, the environment variable that
holds the key, the default model, the context window and the route's prompt-cache quirks
(hermes-facts §12; seed, "Providers: the part of the abstraction that held"). Adding an
OpenAI- or Anthropic-compatible endpoint is configuration, never code in the loop.

Not here: reading the environment (hermes_web/settings.py passes key values and overrides
in), wire shapes (agents/transports/), and failure handling (agents/transports/errors.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

TransportName = Literal["anthropic_messages", "openai_chat"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderProfile:
    """One provider route.

    - ``name``: the profile key (``HERMES_PROVIDER``).
    - ``transport``: "anthropic_messages" or "openai_chat" (agents/transports/).
    - ``base_url``: endpoint root. Anthropic: the host root (the SDK appends /v1/messages);
      OpenAI-compatible: the ``.../v1`` root (the transport appends /chat/completions).
    - ``key_env``: NAME of the environment variable holding the key (None: no key needed).
      Settings read the value; agents/ never reads the environment.
    - ``default_model``: model id used when none is configured.
    - ``context_window``: tokens the model accepts (``HERMES_CONTEXT_WINDOW`` overrides).
    - ``max_output_tokens``: output cap in tokens.
    - ``supports_caching``: the route honours ``cache_control`` markers; False means
      requests carry no markers at all.
    - ``supports_1h_ttl``: the route honours the 1 h TTL; False clamps 1h to 5m (seed, "It
      will not ship a marker the route does not honour").
    - ``max_breakpoints``: markers the client may spend (4 first-party; fewer behind proxies
      that add their own; hermes-facts §2, Anthropic docs "at most 4").
    - ``drops_markers_on_tool_only_assistant``: envelope-style routes silently drop a
      marker on an assistant message that is only tool calls (seed, "Four breakpoints").
    - ``envelope_markers``: an OpenAI-compatible route that takes Anthropic ``cache_control``
      markers on chat-completions content parts (OpenRouter and similar gateways in front
      of Anthropic models); the transport then renders content as parts and marks them.
    - ``marks_tool_messages``: a marker on a tool result is honoured (False on envelope
      routes: hermes-facts §3, "on envelope routes tool messages are skipped").
    - ``pricing_key``: key into the price table (pricing is not decided here).
    - ``max_tokens_field``: body key for the output cap on OpenAI-compatible routes
      ("max_completion_tokens" for OpenAI's own API, "max_tokens" elsewhere).
    - ``strict_alternation``: the server's chat template rejects two consecutive user or
      assistant messages (vLLM with Mistral / Llama-2 style templates, Mistral's API, many
      local servers); the OpenAI-compatible transport then merges same-role neighbours
      (issue 10 defect 6). OpenAI's own API accepts them and keeps them separate.
    - ``tokenizer_family``: which weights the token estimator uses (agents/context/tokens.py
      SCRIPT_WEIGHTS): "o200k" for OpenAI's current models, "cl100k" otherwise (B13).
    Output caps are per MODEL (``model_output_cap``): a profile's ``max_output_tokens`` is
    the route's ceiling, a smaller model on it caps lower (issue 10 defect 7).
    """

    name: str
    transport: TransportName
    base_url: str
    key_env: str | None
    default_model: str
    context_window: int
    max_output_tokens: int
    supports_caching: bool = False
    supports_1h_ttl: bool = False
    max_breakpoints: int = 0
    drops_markers_on_tool_only_assistant: bool = False
    envelope_markers: bool = False
    marks_tool_messages: bool = True
    pricing_key: str = ""
    max_tokens_field: str = "max_tokens"
    strict_alternation: bool = True
    tokenizer_family: str = "cl100k"


SIMULATOR_URL = "http://127.0.0.1:8765"
"""Where the provider simulator listens by default (``manage.py simulator``); embedded mode
passes the real address through ``base_url``."""

PROFILES: dict[str, ProviderProfile] = {p.name: p for p in (
    ProviderProfile(
        name="anthropic", transport="anthropic_messages", base_url="https://api.anthropic.com",
        key_env="ANTHROPIC_API_KEY", default_model="claude-sonnet-4-5",
        context_window=200_000, max_output_tokens=64_000, supports_caching=True,
        supports_1h_ttl=True, max_breakpoints=4, pricing_key="anthropic"),
    ProviderProfile(
        name="openai", transport="openai_chat", base_url="https://api.openai.com/v1",
        key_env="OPENAI_API_KEY", default_model="gpt-4.1", context_window=1_047_576,
        max_output_tokens=32_768, pricing_key="openai",
        max_tokens_field="max_completion_tokens", strict_alternation=False,
        tokenizer_family="o200k"),
    # An aggregator: chat-completions envelope in front of many vendors. For Anthropic
    # models it forwards cache_control on content parts (5m; markers on tool-call-only
    # assistant turns and tool messages are dropped), so the planner marks parts there.
    ProviderProfile(
        name="openrouter", transport="openai_chat", base_url="https://openrouter.ai/api/v1",
        key_env="OPENROUTER_API_KEY", default_model="anthropic/claude-sonnet-4.5",
        context_window=200_000, max_output_tokens=32_000, supports_caching=True,
        max_breakpoints=4, drops_markers_on_tool_only_assistant=True, envelope_markers=True,
        marks_tool_messages=False, pricing_key="openrouter"),
    ProviderProfile(
        name="vllm", transport="openai_chat", base_url="http://127.0.0.1:8000/v1",
        key_env="VLLM_API_KEY", default_model="Qwen/Qwen3-8B", context_window=32_768,
        max_output_tokens=8_192, pricing_key="local"),
    ProviderProfile(
        name="ollama", transport="openai_chat", base_url="http://127.0.0.1:11434/v1",
        key_env=None, default_model="llama3.1", context_window=32_768,
        max_output_tokens=8_192, pricing_key="local"),
    ProviderProfile(
        name="llamacpp", transport="openai_chat", base_url="http://127.0.0.1:8080/v1",
        key_env=None, default_model="local", context_window=32_768,
        max_output_tokens=8_192, pricing_key="local"),
    ProviderProfile(
        name="simulator", transport="anthropic_messages", base_url=SIMULATOR_URL,
        key_env=None, default_model="hermes-simulator", context_window=200_000,
        max_output_tokens=64_000, supports_caching=True, supports_1h_ttl=True,
        max_breakpoints=4, pricing_key="simulator"),
    ProviderProfile(
        name="simulator-openai", transport="openai_chat", base_url=f"{SIMULATOR_URL}/v1",
        key_env=None, default_model="hermes-simulator", context_window=200_000,
        max_output_tokens=64_000, pricing_key="simulator"),
    # The simulator behind an envelope gateway: chat completions with cache_control parts,
    # the way OpenRouter carries them to Anthropic models.
    ProviderProfile(
        name="simulator-envelope", transport="openai_chat", base_url=f"{SIMULATOR_URL}/v1",
        key_env=None, default_model="hermes-simulator", context_window=200_000,
        max_output_tokens=64_000, supports_caching=True, max_breakpoints=4,
        drops_markers_on_tool_only_assistant=True, envelope_markers=True,
        marks_tool_messages=False, pricing_key="simulator"),
)}
"""Built-in profiles by name."""


MODEL_OUTPUT_CAPS: dict[str, int] = {
    # Anthropic (models overview, "Max output"): the 3.x generation caps far below 64K.
    "claude-3-haiku": 4_096, "claude-3-opus": 4_096, "claude-3-sonnet": 4_096,
    "claude-3-5-haiku": 8_192, "claude-3-5-sonnet": 8_192, "claude-3-7-sonnet": 64_000,
    "claude-sonnet-4": 64_000, "claude-opus-4": 32_000, "claude-haiku-4": 64_000,
    # OpenAI (model pages, "Max output tokens").
    "gpt-4o-mini": 16_384, "gpt-4o": 16_384, "gpt-4.1": 32_768, "gpt-4-turbo": 4_096,
    "gpt-3.5-turbo": 4_096,
    # DeepSeek API docs.
    "deepseek-chat": 8_192,
}
"""Output caps (tokens) by model-id prefix; the longest matching prefix wins."""


def model_output_cap(profile: ProviderProfile, model: str) -> int:
    """Output tokens ``model`` may be asked for on ``profile``: the longest matching prefix
    in MODEL_OUTPUT_CAPS (an aggregator's "vendor/model" id is matched without the vendor),
    never above the profile's ``max_output_tokens``."""
    name = model.rsplit("/", 1)[-1].lower()
    matches = [k for k in MODEL_OUTPUT_CAPS if name.startswith(k)]
    cap = MODEL_OUTPUT_CAPS[max(matches, key=len)] if matches else profile.max_output_tokens
    return min(cap, profile.max_output_tokens)


def resolve_profile(name: str, *, base_url: str | None = None, model: str | None = None,
                    context_window: int | None = None) -> ProviderProfile:
    """Return the built-in profile ``name`` with the configured overrides applied.

    ``base_url`` (ANTHROPIC_BASE_URL / OPENAI_BASE_URL) replaces the endpoint (a trailing
    slash is dropped); ``model`` (HERMES_MODEL) replaces the default model;
    ``context_window`` (HERMES_CONTEXT_WINDOW, tokens) replaces the window. Empty strings
    count as "not set". Raises ValueError for an unknown name (listing the known ones) or a
    non-positive window.
    """
    key = name.strip().lower()
    try:
        profile = PROFILES[key]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown provider {name!r}; known providers: {known}") from None
    changes: dict[str, object] = {}
    if base_url:
        changes["base_url"] = base_url.rstrip("/")
    if model:
        changes["default_model"] = model
    if context_window is not None:
        if context_window <= 0:
            raise ValueError(f"context window must be a positive token count, got "
                             f"{context_window}")
        changes["context_window"] = context_window
    return replace(profile, **changes) if changes else profile
