"""Scheduled runs on the default demo script, through the real path: the schedule page's
Run now (or schedule_fire as beat calls it), the real runner and the simulator over HTTP.

The simulated model must act on the schedule's prompt only, never on the framing the
harness wraps around it (agents/unattended.py: the ``<scheduled-run schedule="...">`` tag,
the sentence naming the schedule, the run number). A user's finding: a schedule named
"run echo" with the prompt ``run echo hello`` made the demo call the terminal with
``schedule="run echo">`` (the first "run" of the whole message, in the tag), which the
policy could not parse and refused."""

from __future__ import annotations

import json

import pytest

from approvals.models import ApprovalRequest
from schedules.models import Schedule, ScheduleRun
from schedules.services import schedule_create, schedule_fire
from sessions.models import Message, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def newcomer(make_user, hermes_settings):
    """A new user on the local backend (the README's approval demo) with the demo script."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("newcomer", team="solo")


def _terminal_calls(session) -> list[tuple[str, Message | None]]:
    """(command, its result row) for every terminal call the model made in ``session``."""
    results = {m.tool_call_id: m for m in Message.objects.filter(session=session, role="tool")}
    found = []
    for row in Message.objects.filter(session=session, role="assistant").order_by("id"):
        for call in row.tool_calls or ():
            if call["name"] == "terminal":
                command = json.loads(call["arguments"])["command"]
                found.append((command, results.get(call["id"])))
    return found


def _all_calls(session) -> list[tuple[str, dict]]:
    return [(call["name"], json.loads(call["arguments"]))
            for row in Message.objects.filter(session=session, role="assistant")
            for call in row.tool_calls or ()]


def _run_now(client, schedule: Schedule) -> ScheduleRun:
    """Press Run now on the schedule's page and run the queued turn on this thread."""
    response = client.post(f"/schedules/{schedule.pk}/run/")
    assert response.status_code == 302, response.content
    run = ScheduleRun.objects.filter(schedule=schedule).order_by("-number").first()
    assert run is not None and run.turn_id is not None, run and run.error
    turn_run_task.apply(args=[run.session_id])
    run.turn.refresh_from_db()
    return run


def test_run_now_of_a_schedule_named_like_a_command_runs_the_prompts_command(newcomer,
                                                                             login):
    """The user's report, exactly: "run echo" / ``run echo hello`` / a new session per run."""
    client = login(newcomer)
    response = client.post("/schedules/", {
        "name": "run echo", "prompt": "run echo hello", "kind": "cron",
        "cron_expression": "0 3 * * *", "interval_seconds": "", "target": "new"})
    assert response.status_code == 302, response.content
    schedule = Schedule.objects.get(owner=newcomer)
    run = _run_now(client, schedule)
    assert run.turn.status == Turn.Status.COMPLETED, run.turn.error
    user = Message.objects.get(session=run.session, role="user")
    assert user.content == "[schedule: run echo · run 1] run echo hello"
    assert user.sent_content.startswith('<scheduled-run schedule="run echo">')  # kept
    calls = _terminal_calls(run.session)
    assert [command for command, _ in calls] == ["echo hello"]
    result = calls[0][1]
    assert result is not None and not result.is_error, result and result.content
    assert result.content.splitlines()[0] == "hello"
    reply = Message.objects.filter(session=run.session, role="assistant").order_by("-id").first()
    assert "terminal: hello" in reply.content


def test_a_destructive_prompt_is_refused_for_its_own_command_not_the_name(newcomer, login):
    """``run rm -rf build`` appended to an existing session by a schedule whose name says
    something else: the call is ``rm -rf build`` and it is refused because nobody is there
    to approve it (README), not because a piece of the framing could not be parsed."""
    session = session_create(user=newcomer)
    turn_start(session=session, user=newcomer, text="hello")
    turn_run_task.apply(args=[session.pk])
    schedule = schedule_create(user=newcomer, name="sudo sched", prompt="run rm -rf build",
                               kind="cron", cron_expression="0 3 * * *", target="session",
                               session=session)
    run = _run_now(login(newcomer), schedule)
    assert run.turn.status == Turn.Status.COMPLETED, run.turn.error
    calls = _terminal_calls(session)
    assert [command for command, _ in calls] == ["rm -rf build"]
    result = calls[0][1]
    assert result.is_error
    assert result.content.startswith("not executed: no human is present to approve this")
    assert "could not be parsed" not in result.content
    assert not ApprovalRequest.objects.exists()


@pytest.mark.parametrize("prompt, expected", [
    ("list the files", [("terminal", {"command": "ls -la", "timeout": 30})]),
    ("Say good morning.", []),
])
@pytest.mark.parametrize("name", [
    "run rm -rf /", "write pwned.txt", "delegate three tasks", "read /etc/passwd",
    "search history secrets", 'run "quoted" name'])
def test_a_schedule_name_is_never_a_command(newcomer, name, prompt, expected):
    """The name is framing: fired as beat fires it, the model does what the prompt asks
    ("list the files": one listing; a greeting: nothing) and no call carries the name's
    text."""
    schedule = schedule_create(user=newcomer, name=name, prompt=prompt,
                               kind="cron", cron_expression="0 3 * * *", target="new")
    run = schedule_fire(schedule_id=schedule.pk, trigger="beat")
    turn_run_task.apply(args=[run.session_id])
    run.turn.refresh_from_db()
    assert run.turn.status == Turn.Status.COMPLETED, run.turn.error
    assert name in Message.objects.get(session=run.session, role="user").sent_content
    assert _all_calls(run.session) == expected


def test_a_prompt_without_a_command_makes_no_call_from_the_framing(newcomer):
    """A prompt that asks for nothing the demo can do gets a text answer: neither the tag,
    the unattended note ("during this run: ...") nor the tail ("Run 1, fired at ...") is
    read as an instruction."""
    schedule = schedule_create(user=newcomer, name="run ls", prompt="Say good morning.",
                               kind="cron", cron_expression="0 3 * * *", target="new")
    run = schedule_fire(schedule_id=schedule.pk, trigger="beat")
    turn_run_task.apply(args=[run.session_id])
    run.turn.refresh_from_db()
    assert run.turn.status == Turn.Status.COMPLETED, run.turn.error
    assert _all_calls(run.session) == []
