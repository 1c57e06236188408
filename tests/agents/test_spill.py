"""Large output is relocated to a workspace file (seed, "Large output gets relocated, not
truncated"; hermes-facts §9; failure case B36)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.messages import Message
from agents.tools import ToolContext
from agents.tools.files import ReadFile
from agents.tools.spill import (
    PER_RESULT_CHARS, PER_TURN_CHARS, apply_spill, spill_block, spill_limits)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(workspace=ws, context_window=1_000_000)


def result(call_id: str, text: str, tool: str = "terminal") -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, tool_name=tool)


def numbered(count: int, width: int = 40) -> str:
    return "".join(f"{i:05d} " + "x" * width + "\n" for i in range(1, count + 1))


def test_default_limits_and_scaling_with_the_window() -> None:
    assert spill_limits(None) == spill_limits(0)
    assert (spill_limits(None).per_result, spill_limits(None).per_turn) == (100_000, 200_000)
    assert (spill_limits(1_000_000).per_result, spill_limits(1_000_000).per_turn) == (
        100_000, 200_000)
    small = spill_limits(32_000)  # 128,000 chars: 15% = 19,200, 30% = 38,400
    assert (small.per_result, small.per_turn) == (19_200, 38_400)
    tiny = spill_limits(4_000)
    assert (tiny.per_result, tiny.per_turn) == (8_000, 16_000)


@settings(max_examples=100)
@given(window=st.integers(min_value=1, max_value=10_000_000))
def test_limits_never_exceed_defaults_and_never_go_below_floors(window: int) -> None:
    limits = spill_limits(window)
    assert 8_000 <= limits.per_result <= PER_RESULT_CHARS
    assert 16_000 <= limits.per_turn <= PER_TURN_CHARS
    assert limits.per_result <= limits.per_turn


def test_small_results_pass_through_unchanged(ctx: ToolContext) -> None:
    messages = (result("c1", "short"), result("c2", "x" * 50_000))
    assert apply_spill(messages, ctx) == messages


def test_oversized_result_is_spilled_and_pageable_with_read_file(ctx: ToolContext) -> None:
    text = numbered(3_000)  # 141,000 chars over 3,000 lines
    (spilled,) = apply_spill([result("toolu_01", text)], ctx)
    assert spilled.content == text
    block = spilled.sent_content or ""
    assert block.startswith("<persisted-output>") and block.endswith("</persisted-output>")
    assert f"({len(text):,} chars, 3,000 lines)" in block
    assert ".hermes/spill/toolu_01.txt" in block and "read_file(" in block
    assert len(block) < 2_500
    assert "00001 " in block and "03000 " in block
    saved = ctx.workspace / ".hermes" / "spill" / "toolu_01.txt"
    assert saved.read_text() == text
    page = ReadFile().run({"path": ".hermes/spill/toolu_01.txt", "offset": 700, "limit": 50},
                          ctx).text.splitlines()
    assert page[0].endswith("\t00700 " + "x" * 40) and page[49].endswith("\t00749 " + "x" * 40)


def test_read_file_is_exempt_from_the_per_result_layer(ctx: ToolContext) -> None:
    text = "y" * 120_000
    messages = (result("r1", text, tool="read_file"),)
    assert apply_spill(messages, ctx) == messages


def test_per_turn_sweep_spills_the_largest_until_the_total_fits(ctx: ToolContext) -> None:
    messages = [result("a", "a" * 90_000, tool="read_file"), result("b", "b" * 80_000),
                result("c", "c" * 60_000), result("d", "d" * 10_000)]
    out = apply_spill(messages, ctx)
    assert [m.tool_call_id for m in out] == ["a", "b", "c", "d"]
    assert out[0].sent_content is not None  # the sweep may spill a read
    assert [m.sent_content is None for m in out[1:]] == [True, True, True]
    assert sum(len(m.wire_text) for m in out) <= PER_TURN_CHARS


def test_small_window_spills_earlier(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path, context_window=8_000)  # per result 8,000
    (spilled,) = apply_spill([result("c9", "z" * 9_000)], ctx)
    assert spilled.sent_content is not None and spilled.content == "z" * 9_000


def test_repeated_call_ids_get_distinct_files(ctx: ToolContext) -> None:
    apply_spill([result("call_1", "1" * 120_000)], ctx)
    (second,) = apply_spill([result("call_1", "2" * 120_000)], ctx)
    assert ".hermes/spill/call_1-2.txt" in (second.sent_content or "")
    assert (ctx.workspace / ".hermes/spill/call_1.txt").read_text()[0] == "1"


def test_unsafe_call_id_cannot_escape_the_spill_dir(ctx: ToolContext) -> None:
    apply_spill([result("../../evil", "e" * 120_000)], ctx)
    assert sorted(p.name for p in (ctx.workspace / ".hermes" / "spill").iterdir()) == [
        "_.._evil.txt"]


def test_unwritable_spill_dir_truncates_inline_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the spill dir should be")
    ctx = ToolContext(workspace=tmp_path, spill_dir=tmp_path / "blocker" / "spill")
    (out,) = apply_spill([result("c1", "q" * 150_000)], ctx)
    assert (out.sent_content or "").startswith("q" * 100)
    assert "[Truncated: 50000 of 150000 chars omitted" in (out.sent_content or "")


def test_block_mentions_long_lines() -> None:
    assert "cut by read_file" in spill_block("w" * 5_000, "s.txt")
    assert "cut by read_file" not in spill_block("w\n" * 5_000, "s.txt")


def test_a_one_line_spill_says_one_line() -> None:
    """A minified file is one huge line: "1 line", never "1 lines"."""
    block = spill_block("x" * 80_000, ".hermes/spill/t.txt")
    assert "(80,000 chars, 1 line)" in block
