"""The default cache strategy reaches the wire: real turns on the simulator, with the
session's idle gaps planted in its stored rows (issue 15 item 4)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from simulator.script import Reply, Script, ToolCallSpec
from sessions.models import Message, Turn
from sessions.services import session_create, turn_start, workspace_path
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)


def reader(request):
    if request.tool_results:
        return Reply(text="It says hello.")
    return Reply(text="Reading.", tool_calls=(
        ToolCallSpec(name="read_file", input={"path": "note.txt"}),))


@pytest.fixture
def session(make_user, hermes_settings, simulator):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local", "CACHE_TTL": "auto"}
    simulator.state.script = Script(reader)
    user = make_user("tess")
    session = session_create(user=user)
    (workspace_path(session) / "note.txt").write_text("hello\n")
    return user, session


def chat(user, session, text):
    turn_start(session=session, user=user, text=text)
    turn_run_task.apply(args=[session.pk])
    return Turn.objects.filter(session=session).order_by("-id").first()


def message_ttls(body) -> set[str]:
    """TTLs of the cache markers on message blocks of one Anthropic request body."""
    found = set()
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else ():
            marker = block.get("cache_control")
            if marker:
                found.add(marker.get("ttl", "5m"))
    return found


def system_ttls(body) -> set[str]:
    system = body.get("system")
    return {b["cache_control"].get("ttl", "5m") for b in system
            if isinstance(b, dict) and b.get("cache_control")} if isinstance(system, list) else set()


def age_everything(session, minutes):
    """Move the stored past back by ``minutes``: the session went idle that long ago."""
    then = timedelta(minutes=minutes)
    for turn in Turn.objects.filter(session=session):
        Turn.objects.filter(pk=turn.pk).update(created_at=turn.created_at - then,
                                               finished_at=turn.finished_at - then)
    for m in Message.objects.filter(session=session):
        Message.objects.filter(pk=m.pk).update(created_at=m.created_at - then)


def test_gaps_under_an_hour_with_little_to_prune_keep_the_conversation_warm(session, simulator):
    user, session = session
    assert chat(user, session, "read note.txt").status == "completed"
    age_everything(session, 15)
    assert chat(user, session, "read it again").status == "completed"
    age_everything(session, 15)
    first_of_third = len(simulator.state.requests)
    assert chat(user, session, "and once more").status == "completed"
    third = [r.body for r in simulator.state.requests[first_of_third:] if r.status == 200]
    assert third and all(message_ttls(b) == {"1h"} for b in third), [message_ttls(b) for b in third]
    assert all(system_ttls(b) <= {"1h"} for b in third)
    # A warm tail is not pruned on resume.
    assert not session.events.filter(type="prune").exists()


def test_a_gapless_session_writes_at_five_minutes(session, simulator):
    user, session = session
    for text in ("read note.txt", "again", "once more"):
        assert chat(user, session, text).status == "completed"
    last = [r.body for r in simulator.state.requests if r.status == 200][-1]
    assert message_ttls(last) == {"5m"} and system_ttls(last) <= {"5m"}


def test_a_fixed_ttl_still_wins_when_configured(session, simulator, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "CACHE_TTL": "1h"}
    user, session = session
    assert chat(user, session, "read note.txt").status == "completed"
    last = [r.body for r in simulator.state.requests if r.status == 200][-1]
    assert message_ttls(last) == {"1h"}
