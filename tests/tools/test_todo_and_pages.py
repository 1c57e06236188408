"""The todo list through real turns and the pages of the issue-13 tools: the model writes
and updates its list (todo.updated reaches the chat's event stream), the side panel renders
it, bad items are a tool error with the list unchanged; the memory page shows and edits
the notes with validation (the cap, empty text) and is per user.
"""

from __future__ import annotations

import json

import pytest

from simulator.script import Reply, ScriptRequest, ToolCallSpec
from sessions.models import TodoList, Turn
from sessions.tool_state import memory_change, memory_entries

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = [{"id": "1", "content": "Read the README"}, {"id": "2", "content": "Fix <the> bug"}]


def planning_model(request: ScriptRequest) -> Reply:
    """"plan" → todo (replace), "progress" → todo (merge), "bad" → todo with a bad status."""
    if request.tool_results:
        return Reply(text="List:\n" + request.tool_results[-1].result)
    text = request.last_user_text
    if text == "plan":
        return Reply(tool_calls=(ToolCallSpec(name="todo", input={"todos": PLAN}),))
    if text == "progress":
        return Reply(tool_calls=(ToolCallSpec(name="todo", input={
            "todos": [{"id": "1", "status": "completed"}, {"id": "2", "status": "in_progress"}],
            "merge": True}),))
    if text == "bad":
        return Reply(tool_calls=(ToolCallSpec(name="todo", input={
            "todos": [{"id": "1", "content": "x", "status": "finished"}]}),))
    return Reply(text="echo")


def test_the_model_keeps_its_todo_list_and_the_panel_shows_it(alice, script, chat, login):
    script(planning_model)
    session = chat(alice)
    assert session.say("plan").status == Turn.Status.COMPLETED
    items = TodoList.objects.get(session=session.session).items
    assert [(i["id"], i["status"]) for i in items] == [("1", "pending"), ("2", "pending")]
    session.say("progress")
    items = TodoList.objects.get(session=session.session).items
    assert [(i["id"], i["status"]) for i in items] == [("1", "completed"), ("2", "in_progress")]
    assert "(1/2 completed)" in session.tool_rows()[-1].content
    updates = session.events("todo.updated")
    assert len(updates) == 2 and updates[-1].payload["items"] == items

    session.say("bad")
    bad = session.tool_rows()[-1]
    assert bad.is_error and "status must be one of" in bad.content
    assert "the list is unchanged" in bad.content
    assert TodoList.objects.get(session=session.session).items == items
    assert len(session.events("todo.updated")) == 2

    client = login(alice)
    page = client.get(f"/sessions/{session.session.pk}/").content.decode()
    assert 'id="todo-panel"' in page and "1/2 done" in page
    assert "Fix &lt;the&gt; bug" in page  # escaped, never raw HTML
    assert 'data-status="in_progress"' in page
    assert "todo.js" in page and "clarify.js" in page
    panel = client.get(f"/sessions/{session.session.pk}/todo/")
    assert panel.status_code == 200 and "Read the README" in panel.content.decode()


def test_another_user_cannot_read_the_todo_panel(alice, bob, script, chat, login):
    script(planning_model)
    session = chat(alice)
    session.say("plan")
    assert login(bob).get(f"/sessions/{session.session.pk}/todo/").status_code == 404


def test_the_memory_page_shows_adds_edits_and_deletes_with_validation(alice, bob, login,
                                                                      client, tool_settings):
    tool_settings.HERMES = {**tool_settings.HERMES, "MEMORY_CHAR_LIMIT": 100}
    memory_change(user_id=alice.pk, action="add", content="Prefers tabs over spaces")
    page = login(alice).get("/memory/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Prefers tabs over spaces" in html and "24/100 characters used" in html

    owner = client
    assert owner.post("/memory/", {"op": "add", "content": "Lives in Lisbon"}).status_code == 302
    assert memory_entries(user_id=alice.pk) == ("Prefers tabs over spaces", "Lives in Lisbon")
    assert owner.post("/memory/", {"op": "edit", "index": 0,
                                   "content": "Prefers spaces"}).status_code == 302
    assert memory_entries(user_id=alice.pk)[0] == "Prefers spaces"

    too_long = owner.post("/memory/", {"op": "add", "content": "z" * 120})
    assert too_long.status_code == 400
    assert "capped at 100 characters" in too_long.content.decode()
    empty = owner.post("/memory/", {"op": "add", "content": "   "})
    assert empty.status_code == 400 and "cannot be empty" in empty.content.decode()
    stale = owner.post("/memory/", {"op": "delete", "index": 7})
    assert stale.status_code == 400 and "no longer exists" in stale.content.decode()
    garbage = owner.post("/memory/", {"op": "explode", "index": "x"})
    assert garbage.status_code == 400
    assert memory_entries(user_id=alice.pk) == ("Prefers spaces", "Lives in Lisbon")

    assert owner.post("/memory/", {"op": "delete", "index": 1}).status_code == 302
    assert memory_entries(user_id=alice.pk) == ("Prefers spaces",)

    # Bob's page is his own: he neither sees nor changes Alice's notes.
    client.logout()
    other = login(bob)
    assert "Prefers spaces" not in other.get("/memory/").content.decode()
    other.post("/memory/", {"op": "delete", "index": 0})
    assert memory_entries(user_id=alice.pk) == ("Prefers spaces",)


def test_the_memory_page_needs_a_login(client, db):
    response = client.get("/memory/")
    assert response.status_code == 302 and "login" in response["Location"]
