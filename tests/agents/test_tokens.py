from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.errors import TransportError
from agents.messages import Message, ToolCall, ToolSpec
from agents.context.tokens import (
    IMAGE_TOKENS, Calibrator, UsageAnchor, estimate_message_tokens, estimate_payload_tokens,
    estimate_text_tokens, prefix_fingerprint,
)

# Reference counts per script: (text, tokens a BPE tokenizer bills for it). The figures are
# the per-char costs stated in failure case B13 (Chinese ~0.625/char billed), plus commonly
# published cl100k/o200k-class costs for kana, hangul and emoji.
ZH = "我们今天讨论一下这个项目的架构设计以及数据库迁移的问题。" * 20
JA = "これはテストです。ファイルを読み込んで、結果を確認してください。" * 20
KO = "안녕하세요 오늘은 데이터베이스 마이그레이션에 대해 이야기해 봅시다" * 20
EMOJI = "🚀🔥✅🎉" * 50


def test_b13_ascii_and_fullwidth_estimates() -> None:
    """B13: estimate("ABC123") == 2 and estimate("ＡＢＣ１２３") == 2."""
    assert estimate_text_tokens("ABC123") == 2
    assert estimate_text_tokens("ＡＢＣ１２３") == 2


def test_other_scripts_sit_between_ascii_and_cjk() -> None:
    latin = "a" * 100
    cyrillic = "д" * 100
    han = "字" * 100
    assert estimate_text_tokens(latin) < estimate_text_tokens(cyrillic) < estimate_text_tokens(han)


@settings(max_examples=150)
@given(st.text(max_size=300), st.text(max_size=300))
def test_text_estimate_is_subadditive_within_one_token(a: str, b: str) -> None:
    joined = estimate_text_tokens(a + b)
    assert joined <= estimate_text_tokens(a) + estimate_text_tokens(b)
    assert joined >= estimate_text_tokens(a) + estimate_text_tokens(b) - 1


def _anthropic_payload(thinking_signature: str, image: bool = False) -> dict:
    content = [{"type": "thinking", "thinking": "plan the listing",
                "signature": thinking_signature},
               {"type": "redacted_thinking", "data": "Zm9v" * 500},
               {"type": "tool_use", "id": "toolu_1", "name": "terminal",
                "input": {"command": "ls"}}]
    user = [{"type": "text", "text": "list files", "cache_control": {"type": "ephemeral"}}]
    if image:
        user.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": "iVBOR" * 10_000}})
    return {"model": "claude-x", "max_tokens": 8192, "stream": True,
            "system": [{"type": "text", "text": "You are Hermes.",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "tools": [{"name": "terminal", "description": "Run a command",
                       "input_schema": {"type": "object", "properties": {}}}],
            "messages": [{"role": "user", "content": user},
                         {"role": "assistant", "content": content}]}


def test_b20_payload_estimate_ignores_signatures_blobs_and_cache_markers() -> None:
    """B20: signatures and encrypted blobs are not priced; moving a marker changes nothing."""
    short = estimate_payload_tokens(_anthropic_payload("s"))
    long = estimate_payload_tokens(_anthropic_payload("S" * 40_000))
    assert short == long
    unmarked = _anthropic_payload("s")
    unmarked["system"][0].pop("cache_control")
    assert estimate_payload_tokens(unmarked) == short
    assert short < 200


def test_payload_estimate_counts_images_flat_and_ignores_model_fields() -> None:
    with_image = estimate_payload_tokens(_anthropic_payload("s", image=True))
    assert with_image == estimate_payload_tokens(_anthropic_payload("s")) + IMAGE_TOKENS
    body = _anthropic_payload("s")
    body["max_tokens"] = 1
    body["model"] = "m" * 1000
    assert estimate_payload_tokens(body) == estimate_payload_tokens(_anthropic_payload("s"))


def test_openai_shape_payload_counts_tool_call_arguments() -> None:
    small = {"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "write_file",
                                                        "arguments": "{}"}}]}]}
    big = json.loads(json.dumps(small))
    big["messages"][0]["tool_calls"][0]["function"]["arguments"] = json.dumps({"c": "x" * 4000})
    assert estimate_payload_tokens(big) - estimate_payload_tokens(small) >= 1000


def test_message_estimate_skips_reasoning_and_counts_calls() -> None:
    plain = Message(role="assistant", content="hello")
    assert estimate_message_tokens(plain) == estimate_message_tokens(
        Message(role="assistant", content="hello", reasoning="r" * 10_000))
    with_call = Message(role="assistant", content="hello",
                        tool_calls=(ToolCall(id="c", name="t", arguments="{\"a\": 1}"),))
    assert estimate_message_tokens(with_call) > estimate_message_tokens(plain)


def test_calibrator_projects_from_billed_baseline() -> None:
    cal = Calibrator(threshold=100_000, clock=lambda: 1.0)
    assert cal.projected(50_000) == 50_000
    cal.before_call(rough=40_000, fingerprint="f", message_count=3)
    anchor = cal.after_response(20_000)
    assert anchor == UsageAnchor(rough=40_000, billed=20_000, fingerprint="f",
                                 message_count=3, created=1.0)
    assert cal.projected(45_000) == 25_000
    assert cal.projected(30_000) == 20_000  # growth never negative
    assert not cal.should_compact(110_000)  # rough says over, projection says 90K
    assert cal.should_compact(120_000)


def test_b13_calibration_reanchors_on_every_fitting_response() -> None:
    cal = Calibrator(threshold=100_000)
    for rough, billed in ((10_000, 25_000), (20_000, 50_000), (30_000, 75_000)):
        cal.before_call(rough=rough, fingerprint="f", message_count=1)
        cal.after_response(billed)
    assert cal.anchor is not None and cal.anchor.billed == 75_000
    assert cal.projected(40_000) == 85_000


def test_backstop_billed_over_threshold_clears_baseline_and_forces_compaction() -> None:
    cal = Calibrator(threshold=100_000)
    cal.before_call(rough=10_000, fingerprint="f", message_count=1)
    cal.after_response(20_000)
    cal.before_call(rough=11_000, fingerprint="f", message_count=2)
    assert cal.after_response(100_000) is None
    assert cal.anchor is None and cal.should_compact(1)
    cal.on_compacted()
    assert not cal.should_compact(1)


def test_response_without_usage_or_without_pending_does_not_anchor() -> None:
    cal = Calibrator(threshold=100)
    assert cal.after_response(10) is None
    cal.before_call(rough=5, fingerprint="f", message_count=1)
    assert cal.after_response(None) is None
    cal.before_call(rough=5, fingerprint="f", message_count=1)
    cal.after_error()
    assert cal.after_response(10) is None and cal.anchor is None


def test_anchor_restores_only_when_fingerprint_matches() -> None:
    tools = (ToolSpec(name="t", description="d", input_schema={"type": "object"}),)
    msgs = [Message(role="user", content="hi"), Message(role="assistant", content="yo")]
    fp = prefix_fingerprint(system="S", tools=tools, messages=msgs, route="m")
    cal = Calibrator(threshold=1000)
    cal.before_call(rough=10, fingerprint=fp, message_count=2)
    cal.after_response(30)
    stored = json.loads(json.dumps(cal.to_dict()))

    def current(n: int, live: list[Message]) -> str:
        return prefix_fingerprint(system="S", tools=tools, messages=live[:n], route="m")

    grown = [*msgs, Message(role="user", content="more")]
    same = Calibrator.from_dict(stored, threshold=1000,
                                current_fingerprint=lambda n: current(n, grown))
    assert same.anchor == cal.anchor
    edited = [Message(role="user", content="HI"), msgs[1]]
    other = Calibrator.from_dict(stored, threshold=1000,
                                 current_fingerprint=lambda n: current(n, edited))
    assert other.anchor is None
    assert Calibrator.from_dict(None, threshold=5, current_fingerprint=str).anchor is None


def test_fingerprint_ignores_reasoning_but_not_sidecar() -> None:
    base = [Message(role="user", content="a")]
    fp = prefix_fingerprint(system="", tools=(), messages=base)
    assert fp == prefix_fingerprint(system="", tools=(),
                                    messages=[Message(role="user", content="a", reasoning="x")])
    assert fp != prefix_fingerprint(system="", tools=(),
                                    messages=[Message(role="user", content="a",
                                                      sent_content="b")])


