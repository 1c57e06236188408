"""Issue 15 item 5: caching on envelope routes. Real turns through the OpenAI-compatible
transport against the simulator acting as an envelope gateway (cache_control on content
parts, markers on tool-call-only assistant turns and tool messages dropped)."""

from __future__ import annotations

import json

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from sessions.models import Turn, UsageRecord
from sessions.services import workspace_path

pytestmark = pytest.mark.django_db(transaction=True)


def reader(request):
    if request.tool_results:
        return Reply(text="It says hello, " + "and more words " * 40)
    return Reply(tool_calls=(ToolCallSpec(name="read_file", input={"path": "note.txt"}),))


def markers(body) -> list[tuple[str, int, bool]]:
    """(role, index, tool-call-only) of every message carrying a cache_control part."""
    found = []
    for i, m in enumerate(body["messages"]):
        content = m.get("content")
        if isinstance(content, list) and any("cache_control" in p for p in content):
            found.append((m["role"], i, bool(m.get("tool_calls")) and not any(
                p.get("text") for p in content)))
    return found


@pytest.mark.parametrize("provider", ["simulator-envelope"])
def test_an_envelope_route_sends_part_markers_and_reads_its_prefix_back(
        chat, simulator, use_provider, provider):
    use_provider(provider, CACHE_TTL="5m")
    simulator.state.script = Script(reader)
    session, turn = chat("read note.txt please " + "context " * 400)
    (workspace_path(session) / "note.txt").write_text("hello\n" * 50)
    for text in ("again", "and once more"):
        session, turn = chat(text, session=session)
        assert turn.status == Turn.Status.COMPLETED, turn.error
    ok = [r for r in simulator.state.requests if r.status == 200]
    assert all(r.endpoint == "openai" for r in ok)
    for r in ok:
        marked = markers(r.body)
        assert 1 <= len(marked) + 1 <= 4  # + the system message's part
        assert not any(role == "tool" or only_calls for role, _, only_calls in marked)
        assert isinstance(r.body["messages"][0]["content"], list)  # system as parts
        assert "cache_control" in json.dumps(r.body["messages"][0])
    # Every request after the first reads the prefix the one before it wrote.
    reads = [r.usage["prompt_tokens_details"]["cached_tokens"] for r in ok]
    assert reads[0] == 0 and all(n > 0 for n in reads[1:]), reads
    rows = UsageRecord.objects.filter(session=session).order_by("id")
    assert sum(r.cache_read_tokens for r in rows) == sum(reads)
    assert sum(r.cache_write_5m_tokens for r in rows) > 0


def test_a_plain_openai_route_still_sends_no_markers(chat, simulator, use_provider):
    use_provider("simulator-openai")
    simulator.state.script = Script(reader)
    session, turn = chat("read note.txt")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert "cache_control" not in json.dumps([r.body for r in simulator.state.requests])
