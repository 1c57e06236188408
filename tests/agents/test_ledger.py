"""agents/tools/ledger.py: which calls of a batch run, which are answered from the ledger,
which are reported as of unknown outcome (B01, B06, B39). Exhaustive over small batches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.messages import ToolCall
from agents.tools.ledger import (REPLAYED_NOTE, UNKNOWN_OUTCOME, LedgerEntry, ledger_key,
                                 split_by_ledger)

calls_st = st.lists(st.builds(ToolCall, id=st.sampled_from(["c0", "c1", "c2", "call_0"]),
                              name=st.sampled_from(["terminal", "read_file"]),
                              arguments=st.sampled_from(['{"command": "ls"}', "{}"])),
                    max_size=5)


@given(calls=calls_st, data=st.data())
def test_every_call_is_run_or_answered_exactly_once_in_emission_order(calls, data):
    ledger = {ledger_key(c): LedgerEntry(content=f"out {c.id}", is_error=False,
                                         claimed=data.draw(st.booleans()))
              for c in calls if data.draw(st.booleans())}
    started = {c.id for c in calls if data.draw(st.booleans())}
    split = split_by_ledger(calls, ledger=ledger, started=started)
    assert sorted([*split.answered, *split.to_run]) == list(range(len(calls)))
    assert list(split.to_run) == sorted(split.to_run)
    for index, result in split.answered.items():
        call = calls[index]
        assert result.tool_call_id == call.id and result.tool_name == call.name
        entry = ledger.get(ledger_key(call))
        if entry is not None:  # a recorded output wins over "started"
            assert result.content.endswith(entry.content)
            assert result.content.startswith(REPLAYED_NOTE) == entry.claimed
        else:
            assert call.id in started and result.content == UNKNOWN_OUTCOME and result.is_error
    for index in split.to_run:  # only calls nobody knows anything about run
        assert ledger_key(calls[index]) not in ledger and calls[index].id not in started


def test_a_reused_id_with_other_arguments_is_a_different_call_and_runs():
    first = ToolCall(id="call_0", name="terminal", arguments='{"command": "ls"}')
    other = ToolCall(id="call_0", name="terminal", arguments='{"command": "pwd"}')
    ledger = {ledger_key(first): LedgerEntry(content="a.txt", is_error=False, claimed=True)}
    assert split_by_ledger([other], ledger=ledger, started=set()).to_run == (0,)
    replay = split_by_ledger([first], ledger=ledger, started=set())
    assert replay.answered[0].content == REPLAYED_NOTE + "a.txt"
