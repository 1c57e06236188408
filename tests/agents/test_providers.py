"""Provider profiles: built-ins as data, overrides, unknown names."""

from __future__ import annotations

import dataclasses

import pytest

from agents.providers import PROFILES, ProviderProfile, resolve_profile

EXPECTED = {"anthropic", "openai", "openrouter", "vllm", "ollama", "llamacpp", "simulator",
            "simulator-openai"}


def test_every_required_profile_is_built_in_with_a_known_transport():
    assert EXPECTED <= set(PROFILES)
    for profile in PROFILES.values():
        assert profile.transport in ("anthropic_messages", "openai_chat")
        assert profile.context_window > 0 and profile.max_output_tokens > 0
        assert not profile.base_url.endswith("/")
        if profile.transport == "openai_chat":
            assert profile.base_url.endswith("/v1"), profile.name
            # This transport renders markers only as envelope parts (issue 15 item 5).
            assert profile.supports_caching == profile.envelope_markers, profile.name
            assert not profile.envelope_markers or not profile.marks_tool_messages
        if profile.supports_caching:
            assert 1 <= profile.max_breakpoints <= 4


def test_first_party_anthropic_spends_four_breakpoints_with_1h():
    anthropic = PROFILES["anthropic"]
    assert (anthropic.supports_caching, anthropic.supports_1h_ttl,
            anthropic.max_breakpoints) == (True, True, 4)
    assert anthropic.key_env == "ANTHROPIC_API_KEY"
    assert PROFILES["openai"].key_env == "OPENAI_API_KEY"
    assert PROFILES["simulator"].transport == "anthropic_messages"
    assert PROFILES["simulator-openai"].transport == "openai_chat"


def test_profiles_are_frozen_values():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROFILES["anthropic"].context_window = 1  # type: ignore[misc]
    assert ProviderProfile.__slots__


def test_overrides_replace_url_model_and_window_without_touching_the_builtin():
    profile = resolve_profile("openai", base_url="http://gpu-box:8000/v1/", model="qwen",
                              context_window=65_536)
    assert profile.base_url == "http://gpu-box:8000/v1"
    assert profile.default_model == "qwen"
    assert profile.context_window == 65_536
    assert PROFILES["openai"].context_window == 1_047_576
    assert resolve_profile("OpenAI") is PROFILES["openai"]


def test_empty_overrides_count_as_unset():
    assert resolve_profile("anthropic", base_url="", model="") is PROFILES["anthropic"]


def test_unknown_provider_lists_the_known_ones():
    with pytest.raises(ValueError) as caught:
        resolve_profile("bedrock")
    for name in EXPECTED:
        assert name in str(caught.value)


def test_non_positive_window_is_refused():
    with pytest.raises(ValueError, match="positive"):
        resolve_profile("vllm", context_window=0)
