"""Schedules end to end in embedded mode: pages through the test client (forms that explain,
ownership = 404), a run fired into an existing session through the real runner and
simulator, an unattended run whose command needs approval getting a deny result, a run whose
session is gone failing visibly, and Celery beat's DatabaseScheduler firing a schedule in a
thread of this process (what hermes_web/embedded.py starts)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec
from approvals.models import ApprovalRequest
from schedules.models import Schedule, ScheduleRun
from schedules.services import schedule_create, schedule_fire
from sessions.models import Message, Session, Turn, UsageRecord
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice", team="red")


@pytest.fixture
def bob(make_user):
    return make_user("bob")


def _form(**over):
    data = {"name": "nightly", "prompt": "Say hello.", "kind": "cron",
            "cron_expression": "*/15 * * * *", "interval_seconds": "", "target": "session"}
    data.update(over)
    return data


def test_create_page_explains_a_bad_cron_expression_and_stores_nothing(alice, login):
    session = session_create(user=alice)
    client = login(alice)
    response = client.post("/schedules/", _form(cron_expression="61 * * * *",
                                                session=session.pk))
    assert response.status_code == 400
    assert "not a valid cron expression" in response.content.decode()
    response = client.post("/schedules/", _form(cron_expression="* * *", session=session.pk))
    assert "has 3" in response.content.decode()
    response = client.post("/schedules/", _form(kind="interval", interval_seconds="5",
                                                session=session.pk))
    assert "shortest interval is 60 seconds" in response.content.decode()
    assert not Schedule.objects.exists() and not PeriodicTask.objects.filter(
        task="schedules.fire").exists()


@pytest.mark.parametrize("interval", ["0", "-5", "1", "59"])
def test_every_interval_below_60_gets_the_same_sentence(alice, login, interval):
    session = session_create(user=alice)
    response = login(alice).post("/schedules/", _form(kind="interval", interval_seconds=interval,
                                                      session=session.pk))
    page = response.content.decode()
    assert response.status_code == 400
    assert "The shortest interval is 60 seconds" in page
    assert "greater than or equal" not in page and 'min="60"' in page
    assert not Schedule.objects.exists()


def test_create_stores_the_beat_row_and_the_page_shows_description_and_next_runs(alice, login):
    session = session_create(user=alice)
    client = login(alice)
    response = client.post("/schedules/", _form(session=session.pk))
    schedule = Schedule.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/schedules/{schedule.pk}/"
    task = schedule.periodic_task
    assert task.task == "schedules.fire" and task.args == f"[{schedule.pk}]" and task.enabled
    assert (task.crontab.minute, task.crontab.hour) == ("*/15", "*")
    page = client.get(f"/schedules/{schedule.pk}/").content.decode()
    assert "Every 15 minutes (UTC)" in page and page.count("UTC</li>") == 5
    preview = client.get("/schedules/preview/", {"kind": "cron", "cron_expression": "0 3 * * *"})
    assert "03:00" in preview.content.decode()
    assert "Schedules</a>" in client.get("/").content.decode()  # the nav links here
    for action, enabled in (("pause", False), ("resume", True)):
        client.post(f"/schedules/{schedule.pk}/{action}/")
        task.refresh_from_db()
        assert task.enabled is enabled
    client.post(f"/schedules/{schedule.pk}/delete/")
    assert not Schedule.objects.exists() and not PeriodicTask.objects.filter(pk=task.pk).exists()


def test_another_users_schedule_and_session_are_out_of_reach(alice, bob, login):
    theirs = session_create(user=bob)
    client = login(alice)
    response = client.post("/schedules/", _form(session=theirs.pk))
    assert response.status_code == 400 and "Choose one of your sessions" in response.content.decode()
    assert not Schedule.objects.exists()
    bobs = schedule_create(user=bob, name="b", prompt="p", kind="cron",
                           cron_expression="0 * * * *", target="session", session=theirs)
    for url in (f"/schedules/{bobs.pk}/",):
        assert client.get(url).status_code == 404
    for action in ("pause", "resume", "run", "delete"):
        assert client.post(f"/schedules/{bobs.pk}/{action}/").status_code == 404
    assert "b" not in [s.name for s in Schedule.objects.filter(owner=alice)]
    bobs.refresh_from_db()
    assert bobs.enabled and bobs.run_count == 0
    with pytest.raises(Exception, match="Choose one of your sessions"):
        schedule_create(user=alice, name="x", prompt="p", kind="cron",
                        cron_expression="0 * * * *", target="session", session=theirs)


def test_run_now_appends_to_the_same_conversation_with_a_registered_scaffold(alice, login,
                                                                             simulator):
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="hello first")
    turn_run_task.apply(args=[session.pk])
    schedule = schedule_create(user=alice, name="nightly", prompt="Report the weather.",
                               kind="cron", cron_expression="0 3 * * *", target="session",
                               session=session)
    client = login(alice)
    for _ in range(2):
        client.post(f"/schedules/{schedule.pk}/run/")
        turn_run_task.apply(args=[session.pk])
    runs = list(ScheduleRun.objects.order_by("number"))
    assert [r.number for r in runs] == [1, 2] and all(r.session_id == session.pk for r in runs)
    assert all(r.turn.origin == "schedule" and r.turn.status == Turn.Status.COMPLETED
               for r in runs)
    users = list(Message.objects.filter(session=session, role="user").order_by("id"))
    assert [u.content for u in users][0] == "hello first"
    first, second = users[1], users[2]
    assert first.content.startswith("[schedule: nightly · run 1]")
    assert first.stable_prefix_chars and first.sent_content.startswith("<scheduled-run")
    assert (first.sent_content[:first.stable_prefix_chars]
            == second.sent_content[:second.stable_prefix_chars])
    assert first.sent_content != second.sent_content  # the tail moved: run number, time
    # The request carried the scaffold and the tail as two blocks, the marker on the scaffold.
    scaffold = second.sent_content[:second.stable_prefix_chars]
    blocks = next(r.body["messages"][-1]["content"] for r in reversed(simulator.state.requests)
                  if isinstance(r.body["messages"][-1]["content"], list)
                  and r.body["messages"][-1]["content"][0].get("text") == scaffold)
    assert blocks[1]["text"] == second.sent_content[second.stable_prefix_chars:]
    assert blocks[0].get("cache_control") and "cache_control" not in blocks[1]
    page = client.get(f"/schedules/{schedule.pk}/").content.decode()
    assert page.count('class="run-completed"') == 2 and f"#msg-{second.pk}" in page
    assert UsageRecord.objects.filter(turn=runs[1].turn).exists()


def test_an_unattended_run_gets_a_deny_result_instead_of_an_approval_request(alice, simulator):
    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="result: " + request.tool_results[0].result)
        return Reply(text="cleaning", tool_calls=(ToolCallSpec(
            name="terminal", input={"command": "rm -rf build"}),))

    simulator.state.script = Script(policy)
    session = session_create(user=alice)
    schedule = schedule_create(user=alice, name="cleanup", prompt="Clean the build dir.",
                               kind="interval", interval_seconds=3600, target="session",
                               session=session)
    run = schedule_fire(schedule_id=schedule.pk, trigger="manual")
    turn_run_task.apply(args=[session.pk])
    run.turn.refresh_from_db()
    assert run.turn.status == Turn.Status.COMPLETED, run.turn.error
    assert not ApprovalRequest.objects.exists()
    result = Message.objects.get(session=session, role="tool")
    assert result.is_error
    assert result.content.startswith("not executed: no human is present to approve this")
    # The same command from a person asks (the deny is the unattended rule, not the floor).
    turn_start(session=session, user=alice, text="clean it yourself")
    turn_run_task.apply(args=[session.pk])
    assert Turn.objects.filter(session=session, origin="").get().status == \
        Turn.Status.AWAITING_APPROVAL
    assert ApprovalRequest.objects.count() == 1


def test_a_run_whose_session_is_gone_fails_visibly_and_pauses(alice, login):
    session = session_create(user=alice)
    schedule = schedule_create(user=alice, name="gone", prompt="p", kind="cron",
                               cron_expression="0 * * * *", target="session", session=session)
    Session.objects.filter(pk=session.pk).delete()
    run = schedule_fire(schedule_id=schedule.pk)
    schedule.refresh_from_db()
    assert run.status == ScheduleRun.Status.FAILED and run.turn_id is None
    assert not schedule.enabled and "deleted" in schedule.paused_reason
    page = login(alice).get(f"/schedules/{schedule.pk}/").content.decode()
    assert "Failed to start" in page and "no longer exists" in page
    assert schedule_fire(schedule_id=schedule.pk) is None  # paused: beat's firing is a no-op


def test_new_session_per_run_and_a_failed_turn_shows_in_the_history(alice, login, simulator):
    from simulator.faults import Fault

    schedule = schedule_create(user=alice, name="fresh", prompt="Write a haiku.", kind="cron",
                               cron_expression="0 * * * *", target="new")
    run = schedule_fire(schedule_id=schedule.pk)
    assert run.session.owner == alice and run.session.title == "fresh · run 1"
    for _ in range(3):
        simulator.state.faults.push(Fault(kind="server_error"))
    turn_run_task.apply(args=[run.session_id])
    run.turn.refresh_from_db()
    assert run.turn.status == Turn.Status.FAILED
    page = login(alice).get(f"/schedules/{schedule.pk}/").content.decode()
    assert 'class="run-failed"' in page and run.turn.error[:30] in page


def test_a_run_is_skipped_while_the_previous_one_has_not_started(alice):
    session = session_create(user=alice)
    schedule = schedule_create(user=alice, name="busy", prompt="p", kind="cron",
                               cron_expression="* * * * *", target="session", session=session)
    first = schedule_fire(schedule_id=schedule.pk)
    second = schedule_fire(schedule_id=schedule.pk)
    assert first.turn_id and second.status == ScheduleRun.Status.SKIPPED
    assert Turn.objects.filter(session=session).count() == 1


@pytest.mark.timeout(90)
def test_embedded_beat_fires_a_schedule_into_an_existing_session(alice, worker, settings):
    """Celery's embedded beat service with the DatabaseScheduler (hermes_web/embedded.py
    start_beat), the in-memory broker and a real worker: the beat row fires, the run lands
    in the session as an unattended turn and completes."""
    from hermes_web.embedded import start_beat

    session = session_create(user=alice)
    schedule = schedule_create(user=alice, name="beat", prompt="Say hi.", kind="interval",
                               interval_seconds=60, target="session", session=session)
    task = schedule.periodic_task
    task.last_run_at = timezone.now() - timedelta(seconds=58)  # due in ~2 s, not a minute
    task.save()
    beat = start_beat(user_schedules=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            run = ScheduleRun.objects.filter(schedule=schedule).select_related("turn").first()
            if run and run.turn and run.turn.status == Turn.Status.COMPLETED:
                break
            time.sleep(0.3)
        else:
            raise AssertionError("the beat schedule did not fire and complete in 60 s")
    finally:
        beat.stop()
    assert run.trigger == "beat" and run.session_id == session.pk
    assert Message.objects.filter(session=session, role="assistant").exists()


def test_new_session_runs_share_one_prompt_so_the_scaffold_is_read_from_cache(alice, simulator):
    """The registered prefix pays off: the second run's request reads system prompt AND
    scaffold from the simulator's cache; only the tail (and the reply) is uncached."""
    from simulator.script import Reply, Script

    simulator.state.script = Script(lambda request: Reply(text="done"))
    prompt = "\n".join(f"Step {i}: check report {i} and note changes." for i in range(200))
    schedule = schedule_create(user=alice, name="brief", prompt=prompt, kind="cron",
                               cron_expression="0 * * * *", target="new")
    usages = []
    for _ in range(2):
        before = len(simulator.state.requests)
        run = schedule_fire(schedule_id=schedule.pk)
        turn_run_task.apply(args=[run.session_id])
        usages.append(simulator.state.requests[before].usage)
    first, second = ScheduleRun.objects.order_by("number")
    assert first.session_id != second.session_id
    assert first.session.system_prompt == Session.objects.get(pk=second.session_id).system_prompt
    assert "a run of schedule" in first.session.system_prompt
    assert usages[0]["cache_read_input_tokens"] < usages[1]["cache_read_input_tokens"]
    assert usages[1]["cache_creation_input_tokens"] == 0
    assert usages[1]["input_tokens"] < 40  # the one-line tail


def test_budgets_apply_to_scheduled_runs_and_the_stop_shows_in_the_history(make_user,
                                                                           hermes_settings,
                                                                           login):
    from decimal import Decimal

    from accounts.models import Team
    from accounts.services import budget_set

    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    boss = make_user("boss", team="acme", role="admin")
    mia = make_user("mia", team="acme")
    team = Team.objects.get(name="acme")
    budget_set(actor=boss, scope="team", team=team, period="day", limit="0.05")
    UsageRecord.objects.create(session=session_create(user=boss), user=boss, team=team,
                               provider="simulator", model="hermes-simulator",
                               cost_usd=Decimal("0.0499"))
    session = session_create(user=mia)
    schedule = schedule_create(user=mia, name="nightly", prompt="list the files and read "
                               "README.md", kind="cron", cron_expression="0 2 * * *",
                               target="session", session=session)
    run = schedule_fire(schedule_id=schedule.pk)
    turn_run_task.apply(args=[session.pk])
    run.turn.refresh_from_db()
    assert run.turn.status == Turn.Status.BUDGET_BLOCKED
    page = login(mia).get(f"/schedules/{schedule.pk}/").content.decode()
    assert 'class="run-budget_blocked"' in page and "Stopped by a budget" in page
