"""Durable memory through real turns (issue 13 item 2): the agent remembers a fact across
two sessions, the snapshot sits in the volatile tier (the cached stable prefix never moves
on a memory write, read from the simulator's recorded request bytes), the cap is a clear
tool error, a child agent cannot write, and the user sees and edits the notes on /memory/.
"""

from __future__ import annotations

import pytest

from agents.memory import MemoryRefused, memory_apply
from simulator.script import Reply, ScriptRequest, ToolCallSpec
from sessions.models import MemoryStore, Session, Turn
from sessions.tool_state import memory_entries

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The user's deploy target is the staging cluster 'kestrel'."


def remembering_model(request: ScriptRequest) -> Reply:
    """"remember X" → memory add X; "where do I deploy?" → answers from the system prompt
    only (what the snapshot gave it); tool results are echoed."""
    if request.tool_results:
        return Reply(text="Noted: " + request.tool_results[0].result)
    text = request.last_user_text
    if text.startswith("remember "):
        return Reply(tool_calls=(ToolCallSpec(name="memory", input={
            "action": "add", "content": text.removeprefix("remember ")}),))
    if text.startswith("forget "):
        return Reply(tool_calls=(ToolCallSpec(name="memory", input={
            "action": "remove", "old_text": text.removeprefix("forget ")}),))
    system = _system_text(request.body)
    return Reply(text="kestrel" if "kestrel" in system else "I do not know.")


def _system_blocks(body: dict) -> list[str]:
    system = body.get("system") or []
    if isinstance(system, str):
        return [system]
    return [block["text"] for block in system]


def _system_text(body: dict) -> str:
    return "".join(_system_blocks(body))


def _stable_prefix(body: dict) -> str:
    """The system text up to the first cache breakpoint: the stable tier."""
    system = body.get("system")
    assert isinstance(system, list) and system[0].get("cache_control"), system
    return system[0]["text"]


def test_the_agent_remembers_a_fact_across_sessions_and_the_stable_prefix_never_moves(
        alice, script, chat):
    sim = script(remembering_model)
    first = chat(alice)
    assert first.say("where do I deploy?").status == Turn.Status.COMPLETED
    assert first.final_text() == "I do not know."
    turn = first.say("remember " + FACT)
    assert turn.status == Turn.Status.COMPLETED
    (result,) = first.tool_rows()
    assert not result.is_error and "added" in result.content
    assert "characters used" in result.content
    assert memory_entries(user_id=alice.pk) == (FACT,)
    # Same session after the write: its prompt (snapshot taken when it was built) is
    # byte-identical, so the cached prefix is reused; the fact is not in it.
    first.say("where do I deploy?")
    assert first.final_text() == "I do not know."
    bodies = [r.body for r in sim.state.requests]
    assert len({_system_text(b) for b in bodies}) == 1
    assert FACT not in _system_text(bodies[-1])

    second = chat(alice)
    second.say("where do I deploy?")
    assert second.final_text() == "kestrel"
    new_body = sim.state.requests[-1].body
    assert FACT in _system_text(new_body)
    # The snapshot is in the volatile tier: the stable tier's bytes are the same as in
    # the session that was running before the write.
    assert _stable_prefix(new_body) == _stable_prefix(bodies[0])
    assert FACT not in _stable_prefix(new_body)
    assert _system_text(new_body).index(FACT) > len(_stable_prefix(new_body))
    stored = Session.objects.get(pk=second.session.pk).system_prompt
    assert "# Memory\n\n" + FACT in stored

    # Removing it works the same way: the next session no longer knows.
    second.say("forget kestrel")
    assert memory_entries(user_id=alice.pk) == ()
    assert chat(alice).say("where do I deploy?").status == Turn.Status.COMPLETED
    assert FACT not in _system_text(sim.state.requests[-1].body)


def test_memory_is_per_user(alice, bob, script, chat):
    script(remembering_model)
    chat(alice).say("remember " + FACT)
    other = chat(bob)
    other.say("where do I deploy?")
    assert other.final_text() == "I do not know."
    assert memory_entries(user_id=bob.pk) == ()


def test_past_the_cap_the_tool_result_names_the_cap_and_nothing_is_written(
        alice, script, chat, tool_settings):
    tool_settings.HERMES = {**tool_settings.HERMES, "MEMORY_CHAR_LIMIT": 60}
    script(remembering_model)
    session = chat(alice)
    session.say("remember short note")
    turn = session.say("remember " + "x" * 80)
    assert turn.status == Turn.Status.COMPLETED
    result = session.tool_rows()[-1]
    assert result.is_error
    assert "capped at 60 characters" in result.content
    assert "nothing changed" in result.content
    assert memory_entries(user_id=alice.pk) == ("short note",)


def test_a_child_agent_gets_an_error_and_writes_nothing(alice, script, chat):
    script(remembering_model)
    parent = chat(alice).session
    child = Session.objects.create(owner=alice, team=parent.team, title="child",
                                   provider=parent.provider, model=parent.model,
                                   parent=parent)
    session = chat(alice, child)
    # A child's session takes no messages from a person (it is read-only): its turn is the
    # one its parent's delegate call queued, made here directly.
    Turn.objects.create(session=child, input_text="remember " + FACT, origin="child")
    session.run()
    (result,) = session.tool_rows()
    assert result.is_error and "child agents" in result.content
    assert not MemoryStore.objects.filter(user=alice).exclude(entries=[]).exists()


def test_memory_rules_replace_needs_a_unique_match():
    entries = ("likes tea", "likes coffee")
    with pytest.raises(MemoryRefused, match="2 memory entries contain"):
        memory_apply(entries, "replace", old_text="likes", content="likes water")
    changed = memory_apply(entries, "replace", old_text="tea", content="likes green tea")
    assert changed.entries == ("likes green tea", "likes coffee")
    with pytest.raises(MemoryRefused, match="no memory entry contains"):
        memory_apply(entries, "remove", old_text="juice")
    with pytest.raises(MemoryRefused, match="unknown action"):
        memory_apply(entries, "delete", old_text="tea")
