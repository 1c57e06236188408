from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.context.compaction import (
    ROLLING_PREFIX, SUMMARY_PREFIX, SUMMARY_SUFFIX, CompactionPlan, Skip, build_fold_request,
    build_summary_request, compacted_transcript, compaction_threshold, double_loaded,
    drop_middle, is_summary_message, micro_commit, plan_compaction, plan_micro_compaction,
    summary_budget, summary_message, tail_budget,
)
from agents.context.history import validate_and_repair
from agents.messages import Message, ToolCall
from agents.context.tokens import estimate_message_tokens, estimate_text_tokens


def user(text: str, id: int | None = None) -> Message:
    return Message(role="user", content=text, id=id)


def assistant(text: str = "", *ids: str, id: int | None = None) -> Message:
    return Message(role="assistant", content=text, id=id,
                   tool_calls=tuple(ToolCall(id=i, name="read_file") for i in ids))


def result(cid: str, text: str = "ok", id: int | None = None) -> Message:
    return Message(role="tool", content=text, tool_call_id=cid, tool_name="read_file", id=id)


def test_threshold_direction_and_cap() -> None:
    """hermes-facts §4: 75% under 512K, 50% at or above, capped at 256K."""
    assert compaction_threshold(200_000) == 150_000
    assert compaction_threshold(64_000) == 48_000
    assert compaction_threshold(300_000) == 225_000
    assert compaction_threshold(511_999) == 256_000
    assert compaction_threshold(512_000) == 256_000
    assert compaction_threshold(1_000_000) == 256_000


@settings(max_examples=200)
@given(st.integers(min_value=1_000, max_value=4_000_000))
def test_threshold_never_exceeds_cap_or_window(window: int) -> None:
    t = compaction_threshold(window)
    assert t <= 256_000 and t < window
    assert t == min(256_000, int(window * (0.5 if window >= 512_000 else 0.75)))


def test_tail_and_summary_budgets_clamp() -> None:
    assert tail_budget(200_000) == 10_000
    assert tail_budget(800_000) == 20_000
    assert tail_budget(2_000_000) == 25_000
    assert tail_budget(32_000) == 6_400  # never over 20% of a small window
    assert summary_budget(1_000) == 2_000
    assert summary_budget(30_000) == 6_000
    assert summary_budget(500_000) == 10_000


def flat(_: Message) -> int:
    return 1_000


def test_b03_cut_snaps_to_group_edge_at_every_index() -> None:
    """B03: the raw tail cut is put at every index of a parallel tool group; the group is
    kept or summarised whole and the compacted transcript needs no repair."""
    body = [user("audit repo"), assistant("", "c1", "c2", "c3"), result("c1"), result("c2"),
            result("c3"), assistant("done")]
    prefix = [user("old 0"), assistant("old 1"), user("old 2"), assistant("old 3")]
    suffix = [user(f"u{k}") if k % 2 == 0 else assistant(f"a{k}") for k in range(8)]
    history = prefix + body + suffix
    for in_tail in range(1, 7):  # raw cut at body index 6 - in_tail
        body_size = (tail_budget(64_000) - len(suffix)) // in_tail
        sizes = {id(m): 10_000 for m in prefix} | {id(m): body_size for m in body}
        plan = plan_compaction(history, window=64_000, estimate=lambda m: sizes.get(id(m), 1),
                               first_compaction=False)
        assert isinstance(plan, CompactionPlan)
        raw_cut = len(prefix) + 6 - in_tail
        assert plan.tail[0].role != "tool"
        assert len(plan.head) + len(plan.middle) == (raw_cut if raw_cut not in (6, 7, 8) else 5)
        out = compacted_transcript(plan, "summary")
        assert validate_and_repair(out).problems == ()


def test_plan_protects_head_on_first_compaction_only() -> None:
    history = [user(f"u{k}") if k % 2 == 0 else assistant(f"a{k}") for k in range(40)]
    first = plan_compaction(history, window=200_000, estimate=flat, first_compaction=True)
    later = plan_compaction(history, window=200_000, estimate=flat, first_compaction=False)
    assert isinstance(first, CompactionPlan) and isinstance(later, CompactionPlan)
    assert len(first.head) == 3 and later.head == ()
    assert len(first.tail) == 10  # 10K tail budget / 1K per message
    assert first.middle_tokens == 27_000


def test_tail_keeps_at_least_eight_messages() -> None:
    history = [user(f"u{k}") if k % 2 == 0 else assistant(f"a{k}") for k in range(30)]
    plan = plan_compaction(history, window=200_000, estimate=lambda m: 50_000,
                           first_compaction=False)
    assert isinstance(plan, CompactionPlan) and len(plan.tail) == 8


def test_b06_compaction_waits_for_every_result_of_a_batch() -> None:
    """B06: with a call still unanswered the planner refuses, so no result is lost."""
    history = [user("snap"), assistant("", "call_S1")] + [user("x")] * 20
    assert plan_compaction(history, window=64_000, estimate=flat,
                           first_compaction=False) == Skip(reason="unanswered tool calls")


def test_b10_small_middle_skips_the_summariser_but_keeps_a_plan() -> None:
    """B10: a 0.4K middle is not worth a model call; the skip carries a plan to drop."""
    history = [user("q0"), assistant("a0"), user("q1"), assistant("a1")] + [
        user(f"q{k}") if k % 2 == 0 else assistant(f"a{k}") for k in range(8)]
    sizes = {id(m): 100 for m in history[:4]}
    skip = plan_compaction(history, window=64_000,
                           estimate=lambda m: sizes.get(id(m), 1_500), first_compaction=False)
    assert isinstance(skip, Skip) and skip.reason == "middle too small"
    assert skip.plan is not None and skip.plan.middle_tokens == 400
    dropped = drop_middle(skip.plan)
    assert is_summary_message(dropped[0]) and dropped[1:] == list(skip.plan.tail)


def test_nothing_to_compact_when_everything_is_tail() -> None:
    history = [user("a"), assistant("b")]
    assert plan_compaction(history, window=64_000, estimate=flat,
                           first_compaction=True) == Skip(reason="nothing to compact")


def _big_plan(tool_chars: int, messages: int) -> CompactionPlan:
    middle = []
    for k in range(messages):
        middle += [assistant("", f"c{k}"), result(f"c{k}", "x" * tool_chars), user(f"next {k}")]
    sizes = sum(estimate_message_tokens(m) for m in middle)
    return CompactionPlan(head=(), middle=tuple(middle), tail=(user("now"),),
                          middle_tokens=sizes, total_tokens=sizes)


def test_b11_summary_request_fits_the_window() -> None:
    """B11: a 210K-token history on a 200K model: the summariser's own request fits."""
    plan = _big_plan(tool_chars=84_000, messages=10)
    assert plan.middle_tokens > 200_000
    request = build_summary_request(plan, model="m", window=200_000, model_max_output=8_192,
                                    estimate_text=estimate_text_tokens)
    prompt_tokens = sum(estimate_text_tokens(m.content) for m in request.messages) + \
        estimate_text_tokens(request.system)
    assert prompt_tokens + request.max_tokens <= 200_000
    assert request.tools == () and request.max_tokens == 8_192
    assert "chars of output omitted" in request.messages[0].content


def test_b11_small_window_clamps_input_and_output() -> None:
    plan = _big_plan(tool_chars=20_000, messages=12)
    request = build_summary_request(plan, model="m", window=16_000, model_max_output=4_096,
                                    estimate_text=estimate_text_tokens)
    prompt_tokens = estimate_text_tokens(request.messages[0].content) + \
        estimate_text_tokens(request.system)
    assert prompt_tokens + request.max_tokens <= 16_000
    assert 1 <= request.max_tokens <= 4_096


def test_b11_fallback_drop_always_continues() -> None:
    plan = _big_plan(tool_chars=1_000, messages=5)
    out = drop_middle(plan)
    assert len(out) == 2 and out[-1].content == "now"
    assert "read_file ×5" in out[0].content
    assert validate_and_repair(out).problems == ()
    assert len(out[0].content) <= 8_000 + len(SUMMARY_PREFIX) + len(SUMMARY_SUFFIX)


def test_summary_message_is_marked() -> None:
    m = summary_message("  the gist  ")
    assert m.role == "user" and m.content.startswith("[CONTEXT COMPACTION — REFERENCE ONLY]")
    assert "the gist" in m.content and m.content.endswith(SUMMARY_SUFFIX)
    assert is_summary_message(m) and not is_summary_message(user("hi"))
    # The kind decides, not the text: a user who types the marker writes an ordinary message.
    assert not is_summary_message(user(m.content))


def stored(n_exchanges: int) -> list[Message]:
    rows, next_id = [], 1
    for k in range(n_exchanges):
        for m in (user(f"q{k}"), assistant("", f"c{k}"), result(f"c{k}", f"r{k}"),
                  assistant(f"a{k}")):
            rows.append(m.with_id(next_id))
            next_id += 1
    return rows


class Store:
    """Rows with the active/compacted flags, as the Session's messages table holds them."""

    def __init__(self, rows: list[Message]):
        self.rows = {m.id: (m, True) for m in rows}
        self.next_id = max(self.rows) + 1

    def live(self) -> list[Message]:
        return [m for i, (m, active) in sorted(self.rows.items()) if active]

    def commit(self, archive: tuple[int, ...], insert: list[Message]) -> None:
        for i in archive:
            self.rows[i] = (self.rows[i][0], False)
        for m in insert:
            self.rows[self.next_id] = (m.with_id(self.next_id), True)
            self.next_id += 1


def test_micro_compaction_resume_never_double_loads() -> None:
    """Seed, "The lesson hiding in micro-compaction": every splice archives in the same
    commit, so loading live rows never yields a summary and what it summarised."""
    store = Store(stored(5))
    for _ in range(3):
        plan = plan_micro_compaction(store.live(), keep_recent_exchanges=2)
        assert plan is not None
        request = build_fold_request(plan, model="m", max_tokens=500)
        assert request.tools == () and "q" in request.messages[0].content
        store.commit(plan.archive_ids, micro_commit(plan, "folded"))
        live = store.live()
        assert double_loaded(live) == []
        assert validate_and_repair(live).problems == ()
        assert live[0].content.startswith(ROLLING_PREFIX)
    assert plan_micro_compaction(store.live(), keep_recent_exchanges=2) is None
    assert [m.content for m in store.live() if m.role == "user"][1:] == ["q3", "q4"]


def test_micro_compaction_without_archive_is_detected() -> None:
    """The failure mode itself: a splice whose archive write is lost double-loads."""
    store = Store(stored(4))
    plan = plan_micro_compaction(store.live(), keep_recent_exchanges=2)
    assert plan is not None
    store.commit((), micro_commit(plan, "folded"))
    # Every row older than the summary is live twice over: the folded exchange (1-4) and
    # the survivors it re-inserted after itself (5-16).
    assert double_loaded(store.live()) == list(range(1, 17))


def test_micro_compaction_waits_for_results() -> None:
    rows = stored(4)
    rows.append(assistant("", "late").with_id(100))
    assert plan_micro_compaction(rows) is None
