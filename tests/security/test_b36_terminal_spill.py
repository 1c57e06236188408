"""B36 through a real turn: a terminal command printing 60,000+ characters is never cut
inline. The one spill layer writes all of it to a file in the workspace and the model gets
a preview plus how to page it; paging it back with read_file returns the lines asked for."""

from __future__ import annotations

import re

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from sessions.models import Turn
from tests.security.conftest import run_turn, terminal, tool_results

pytestmark = pytest.mark.django_db(transaction=True)


LINES = 30_000
"""30,000 lines of 6 chars + newline: 210,000 chars, past the spill layer's per-result
limit (100,000) and far past the 50,000 the terminal once cut at."""


def _pager(request) -> Reply:
    """Run the big command; then page the spill file its result names; then stop."""
    if not request.tool_results:
        return Reply(text="running", tool_calls=(terminal(f"seq -f 'L%05g' 1 {LINES}"),))
    newest = request.tool_results[-1].result
    if "<persisted-output>" in newest:
        shown = re.search(r'read_file\(path="([^"]+)"', newest)
        return Reply(text="paging", tool_calls=(ToolCallSpec(name="read_file", input={
            "path": shown.group(1), "offset": 15000, "limit": 2}),))
    return Reply(text="done")


def test_b36_a_large_terminal_output_is_spilled_whole_and_paged_back(
        alice_session, people, simulator):
    session, ws = alice_session
    simulator.state.script = Script(_pager)
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.COMPLETED, turn.error
    first, second = tool_results(session)
    sent = first.sent_content or first.content
    assert "<persisted-output>" in sent and len(sent) < 20_000  # a preview, not 210,000
    assert "L00001" in sent and f"L{LINES:05d}" in sent  # head and tail of the preview
    files = [p for p in ws.rglob("*") if p.is_file() and "L15000" in p.read_text()]
    assert len(files) == 1, "the whole output is in one spill file"
    lines = files[0].read_text().splitlines()
    assert [ln for ln in lines if ln.startswith("L")] == [f"L{i:05d}" for i in range(1, LINES + 1)]
    assert "L15000" in second.content and "L15001" in second.content


def test_b36_a_60000_char_output_reaches_the_model_whole(alice_session, people, model):
    session, _ = alice_session
    model.plan = [terminal("seq -f 'L%05g' 1 8600")]  # 60,200 chars: once cut at 50,000
    turn = run_turn(session, people["alice"])
    assert turn.status == Turn.Status.COMPLETED, turn.error
    (result,) = tool_results(session)
    sent = result.sent_content or result.content
    assert "omitted" not in sent and "L04300" in sent and "L08600" in sent
