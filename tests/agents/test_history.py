from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.context.history import (
    CallTally,
    CONTINUES, EMPTY, INTERRUPTED, NOT_EXECUTED, validate_and_repair,
)
from agents.messages import Message, ToolCall


def user(text: str, id: int | None = None) -> Message:
    return Message(role="user", content=text, id=id)


def assistant(text: str = "", *calls: ToolCall, id: int | None = None) -> Message:
    return Message(role="assistant", content=text, tool_calls=calls, id=id)


def call(cid: str, name: str = "terminal", args: str = "{}") -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=args)


def result(cid: str, text: str = "ok", id: int | None = None) -> Message:
    return Message(role="tool", content=text, tool_call_id=cid, tool_name="terminal", id=id)


def is_legal(messages: tuple[Message, ...]) -> bool:
    """An independent checker of the wire rules the providers enforce."""
    if not messages or messages[0].role != "user":
        return False
    answered: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        if not m.wire_text.strip() and not (m.role == "assistant" and m.tool_calls):
            return False
        if m.role == "tool":
            return False  # every tool result must be consumed by the group below
        if m.role == "assistant" and i and messages[i - 1].role == "assistant":
            return False
        ids = [c.id for c in m.tool_calls]
        j = i + 1
        got = []
        while j < len(messages) and messages[j].role == "tool":
            got.append(messages[j].tool_call_id)
            j += 1
        if sorted(got) != sorted(ids) or answered & set(ids):
            return False
        answered |= set(ids)
        i = j
    return True


def test_b01_interrupt_leaves_calls_unanswered() -> None:
    """B01: both outstanding calls get an error result right after the group, with the
    never-ran / interrupted distinction, and the added rows are reported for storage."""
    history = [user("list files, then read a.txt", 1),
               assistant("", call("toolu_T1"), call("toolu_T2", "read_file"), id=2),
               user("stop, read b.txt instead", 3)]
    repair = validate_and_repair(history, started_call_ids={"toolu_T1"})
    roles = [m.role for m in repair.messages]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    t1, t2 = repair.messages[2], repair.messages[3]
    assert (t1.tool_call_id, t1.content, t1.is_error) == ("toolu_T1", INTERRUPTED, True)
    assert (t2.tool_call_id, t2.content, t2.tool_name) == ("toolu_T2", NOT_EXECUTED, "read_file")
    assert repair.added == (t1, t2)
    assert is_legal(repair.messages)


def test_b01_stored_repair_makes_the_next_request_identical() -> None:
    """The caller appends the added rows at the end (new ids); the next repair moves them
    beside their call and adds nothing: the same request is sent."""
    history = [user("go", 1), assistant("", call("c1"), call("c2"), id=2), user("next", 3)]
    first = validate_and_repair(history)
    stored = history + [m.with_id(10 + k) for k, m in enumerate(first.added)]
    second = validate_and_repair(stored)
    assert second.added == ()
    strip = [(m.role, m.wire_text, m.tool_call_id) for m in first.messages]
    assert [(m.role, m.wire_text, m.tool_call_id) for m in second.messages] == strip


def test_b02_orphan_result_becomes_a_note() -> None:
    """B02: a tool_result whose call is not in the history is converted to a user note."""
    history = [user("run tests"), assistant("Running."),
               Message(role="tool", content="ok", tool_call_id="toolu_T9"),
               user("continue")]
    repair = validate_and_repair(history)
    assert all(m.role != "tool" for m in repair.messages)
    note = repair.messages[2]
    assert note.role == "user" and "toolu_T9" in note.content and note.content.endswith("ok")
    assert any("orphan" in p for p in repair.problems)
    assert is_legal(repair.messages)


def test_b05_one_result_per_call_after_a_handoff() -> None:
    """B05: the handoff was answered, book_flight was not: exactly one result each."""
    history = [user("book"), assistant("", call("call_F1", "book_flight"),
                                       call("call_H1", "transfer_to_hotel_agent")),
               result("call_H1", "transferred"), user("and the hotel?")]
    repair = validate_and_repair(history)
    ids = [m.tool_call_id for m in repair.messages if m.role == "tool"]
    assert ids == ["call_F1", "call_H1"]
    assert repair.messages[2].content == NOT_EXECUTED
    assert is_legal(repair.messages)


def test_b06_late_result_for_a_summarised_call_is_kept_as_a_note() -> None:
    """B06: a result arriving after its call was compacted away still reaches the model."""
    history = [user("summary of earlier turns"), assistant("Snapshot taken."),
               Message(role="tool", content="snapshot id 42", tool_call_id="call_S1",
                       tool_name="create_snapshot")]
    repair = validate_and_repair(history)
    assert repair.messages[-1].role == "user"
    assert "create_snapshot" in repair.messages[-1].content
    assert "snapshot id 42" in repair.messages[-1].content


def test_b15_clock_stepped_load_is_repaired_by_moving_results() -> None:
    """B15: rows loaded in timestamp order 10,12,13,11 — the stored result for c_a is moved
    back beside its call; nothing is invented."""
    rows = {10: assistant("", call("c_a"), id=10), 11: result("c_a", "A", 11),
            12: assistant("", call("c_b"), id=12), 13: result("c_b", "B", 13)}
    by_timestamp = [user("go", 9), rows[10], rows[12], rows[13], rows[11]]
    repair = validate_and_repair(by_timestamp)
    assert [m.id for m in repair.messages] == [9, 10, 11, 12, 13]
    assert repair.added == ()
    assert is_legal(repair.messages)
    by_id = validate_and_repair([user("go", 9), rows[10], rows[11], rows[12], rows[13]])
    assert by_id.problems == () and by_id.messages == repair.messages


def test_b17_empty_content_is_never_sent() -> None:
    """B17: empty user/tool content becomes a visible stand-in; an empty assistant reply is
    dropped (never replayed as invented text); an assistant that carries tool calls may stay
    empty."""
    history = [user(""), assistant("   "), user("hi"), assistant("", call("c1")),
               Message(role="tool", content="", tool_call_id="c1")]
    repair = validate_and_repair(history)
    texts = [m.wire_text for m in repair.messages]
    assert texts == [EMPTY, "hi", "", EMPTY]
    assert "empty assistant message dropped" in repair.problems
    assert is_legal(repair.messages)


def test_b17_sidecar_is_what_gets_checked() -> None:
    m = Message(role="user", content="visible", sent_content="")
    fixed = validate_and_repair([m]).messages[0]
    assert fixed.sent_content == EMPTY and fixed.content == "visible"


def test_b20_reasoning_is_never_replayed() -> None:
    """B20: thinking is display-only; the repaired history carries none and the change is
    not a problem to report."""
    history = [user("q"), Message(role="assistant", content="a", reasoning="thought…")]
    repair = validate_and_repair(history)
    assert all(m.reasoning is None for m in repair.messages)
    assert repair.problems == ()


def test_b21_half_built_call_is_answered_and_its_arguments_parse() -> None:
    """B21: a tool call cut mid-stream is never replayed with broken JSON and is answered
    as not executed."""
    cut = call("toolu_S1", "write_file", '{"path":"notes.md","content":"# Ti')
    repair = validate_and_repair([user("write notes"), assistant("I'll write the file", cut)])
    assert repair.messages[1].tool_calls[0].arguments == "{}"
    assert repair.messages[2].content == NOT_EXECUTED and repair.messages[2].is_error
    assert is_legal(repair.messages)


def test_duplicate_results_are_dropped_and_groups_ordered() -> None:
    history = [user("go"), assistant("", call("a"), call("b")), result("b", "B"),
               result("a", "A"), result("a", "A again")]
    repair = validate_and_repair(history)
    assert [(m.tool_call_id, m.content) for m in repair.messages[2:]] == [("a", "A"), ("b", "B")]
    assert any("duplicate" in p for p in repair.problems)


def test_assistants_in_a_row_merge_and_leading_assistant_gets_a_user() -> None:
    history = [assistant("hello", id=1), assistant("again", call("c"), id=2), result("c")]
    repair = validate_and_repair(history)
    assert repair.messages[0] == Message(role="user", content=CONTINUES)
    merged = repair.messages[1]
    assert merged.content == "hello\n\nagain" and merged.id == 1 and merged.tool_calls
    assert is_legal(repair.messages)


def test_legal_history_is_returned_unchanged() -> None:
    history = [user("a", 1), assistant("", call("c"), id=2), result("c", "r", 3),
               assistant("done", id=4), user("b", 5)]
    repair = validate_and_repair(history)
    assert repair.messages == tuple(history) and repair.problems == () and repair.added == ()


CALL_IDS = ["c1", "c2", "c3", "c4"]
message_st = st.one_of(
    st.builds(user, st.sampled_from(["", " ", "hi", "more"])),
    st.builds(lambda t, ids: assistant(t, *(call(i) for i in ids)),
              st.sampled_from(["", "ok", "  "]),
              st.lists(st.sampled_from(CALL_IDS), max_size=3, unique=True)),
    st.builds(lambda i, t: result(i, t), st.sampled_from(CALL_IDS + ["zz"]),
              st.sampled_from(["", "out", "other"])),
    st.builds(lambda r: Message(role="assistant", content="x", reasoning=r), st.just("why")),
)


@settings(max_examples=200)
@given(st.lists(message_st, max_size=12), st.sets(st.sampled_from(CALL_IDS)))
def test_repair_is_legal_deterministic_and_idempotent(messages: list[Message],
                                                      started: set[str]) -> None:
    repair = validate_and_repair(messages, started_call_ids=started)
    if any(m.role != "assistant" or m.tool_calls or m.wire_text.strip() for m in messages):
        assert is_legal(repair.messages)
    again = validate_and_repair(repair.messages)
    assert again.messages == repair.messages
    assert again.problems == () and again.added == ()
    assert validate_and_repair(messages, started_call_ids=started) == repair
    for added in repair.added:
        assert added.is_error and added.content in (NOT_EXECUTED, INTERRUPTED)


@settings(max_examples=100)
@given(st.lists(message_st, max_size=12))
def test_storing_added_rows_at_the_end_reproduces_the_same_request(
        messages: list[Message]) -> None:
    first = validate_and_repair(messages)
    second = validate_and_repair([*messages, *first.added])
    assert second.messages == first.messages and second.added == ()


def test_repeated_call_ids_are_made_unique_and_claim_results_in_order() -> None:
    history = [user("a"), assistant("", call("call_0")), result("call_0", "first"),
               user("b"), assistant("", call("call_0")), result("call_0", "second")]
    repair = validate_and_repair(history)
    pairs = [(m.tool_call_id, m.content) for m in repair.messages if m.role == "tool"]
    assert pairs == [("call_0", "first"), ("call_0_r2", "second")]
    assert repair.messages[4].tool_calls[0].id == "call_0_r2"
    assert is_legal(repair.messages)


def test_a_reused_call_id_is_never_renamed_onto_an_id_a_carried_history_uses() -> None:
    """A provider that names every call "call_0" (llama.cpp, some gateways): the worker
    carries the repaired history (with "call_0_r2") into the next turn, whose new call_0
    must not become a second "call_0_r2". The answer equals the one from stored rows."""
    rows = [user("a"), assistant("", call("call_0")), result("call_0", "first"),
            user("b"), assistant("", call("call_0")), result("call_0", "second")]
    carried = list(validate_and_repair(rows).messages)
    turn3 = [user("c"), assistant("", call("call_0")), result("call_0", "third")]
    from_memory = validate_and_repair([*carried, *turn3])
    from_rows = validate_and_repair([*rows, *turn3])
    ids = [c.id for m in from_memory.messages for c in m.tool_calls]
    assert ids == ["call_0", "call_0_r2", "call_0_r3"]
    assert from_memory.messages == from_rows.messages
    assert is_legal(from_memory.messages)
    again = validate_and_repair(from_memory.messages)
    assert again.messages == from_memory.messages and again.problems == ()


_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_TALLIED = st.lists(st.one_of(
    st.builds(lambda ids: assistant("", *(call(i) for i in ids)), st.lists(_IDS, max_size=3)),
    st.builds(result, _IDS), st.builds(user, st.just("hi"))), max_size=12)


def _counted(messages) -> tuple[set[str], set[str]]:
    """The definition CallTally must agree with, counted the slow way."""
    calls = [c.id for m in messages if m.role == "assistant" for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role == "tool"]
    return (set(calls) | set(results),
            {i for i in set(calls) if calls.count(i) > results.count(i)})


@settings(max_examples=300, deadline=None)
@given(_TALLIED, _TALLIED, _TALLIED)
def test_call_tally_extended_in_pieces_equals_counting_the_whole(first, second, third):
    """A tally kept from one turn and extended by the rows of the next (and of the next)
    says what counting the whole history says: every id seen, and the unanswered ones
    (more calls than results), including a result arriving turns after its call; and
    extending never changes the tally it started from (the kept one may still be read)."""
    kept = CallTally.of(first)
    before = (kept.seen, dict(kept.balance))
    grown = kept.extended(second).extended(third)
    whole = first + second + third
    assert (set(grown.seen), grown.unanswered) == _counted(whole)
    assert (kept.seen, kept.balance) == before
    assert all(n != 0 for n in grown.balance.values())  # balanced ids are dropped
