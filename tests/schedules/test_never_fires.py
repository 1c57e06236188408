"""Cron expressions that parse but never fire (30/31 February, 31 April, …), through the real
pages: the preview explains, the form refuses, and a row stored before the check existed
neither breaks the Schedules pages nor the beat (django-celery-beat's DatabaseScheduler).

A tester's finding: "0 0 31 2 *" answered the preview with a 500 (CroniterBadDateError), was
accepted by the form, and from then on /schedules/ and the schedule's page were 500s until it
was deleted."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from celery.schedules import crontab
from django_celery_beat.models import CrontabSchedule, PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from agents.schedule_rules import ScheduleError, cron_next_runs, cron_parse
from hermes_web.celery import app as celery_app
from schedules.models import Schedule
from schedules.services import FIRE_TASK, schedule_create

pytestmark = pytest.mark.django_db(transaction=True)

NEVER = ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4 *", "0 0 31 4,6,9,11 *", "0 0 30-31 2 *",
         # day-of-month AND day-of-week, as celery's crontab (beat) reads them: 31 February
         # is never a Monday either, though croniter's default (OR) would fire every Monday.
         "0 0 31 2 1"]
T0 = datetime(2026, 1, 1, 12, 7, tzinfo=timezone.utc)


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice")


def _form(**over):
    data = {"name": "feb", "prompt": "Say hello.", "kind": "cron",
            "cron_expression": "0 0 31 2 *", "interval_seconds": "", "target": "new"}
    data.update(over)
    return data


def _stored_never_firing(user, name="legacy", expression="0 0 31 2 *") -> Schedule:
    """A schedule row as the form stored it before the check: the beat row too."""
    minute, hour, dom, month, dow = expression.split()
    schedule = Schedule.objects.create(owner=user, name=name, prompt="p", kind="cron",
                                       cron_expression=expression, target="new")
    cron = CrontabSchedule.objects.create(minute=minute, hour=hour, day_of_month=dom,
                                          month_of_year=month, day_of_week=dow,
                                          timezone="UTC")
    schedule.periodic_task = PeriodicTask.objects.create(
        name=f"hermes-schedule-{schedule.pk}", task=FIRE_TASK, args=json.dumps([schedule.pk]),
        enabled=True, crontab=cron)
    schedule.save(update_fields=["periodic_task"])
    return schedule


@pytest.mark.parametrize("expression", NEVER)
def test_rules_refuse_a_cron_that_never_fires(expression):
    with pytest.raises(ScheduleError, match="never fires"):
        cron_parse(expression)
    with pytest.raises(ScheduleError, match="never fires"):
        cron_next_runs(expression, after=T0)


@pytest.mark.parametrize("expression", ["0 0 29 2 *", "0 0 31 1-12 *", "0 0 31 2,3 *",
                                        "0 0 13 * 5", "0 0 29 2 1"])
def test_rare_but_real_dates_are_accepted_and_agree_with_beat(expression):
    """The preview's next run is the one celery's crontab (what beat fires) computes: with
    both day fields restricted, a run needs both (Friday the 13th), not either."""
    first = cron_next_runs(expression, after=T0, count=1)[0]
    minute, hour, dom, month, dow = expression.split()
    beat = crontab(minute=minute, hour=hour, day_of_month=dom, month_of_year=month,
                   day_of_week=dow, nowfun=lambda: T0)
    assert T0 + beat.remaining_estimate(T0) == first


@pytest.mark.parametrize("expression", NEVER)
def test_preview_explains_instead_of_a_500(alice, login, expression):
    response = login(alice).get("/schedules/preview/",
                                {"kind": "cron", "cron_expression": expression})
    assert response.status_code == 200
    text = response.content.decode()
    assert "never fires" in text and 'role="alert"' in text and "Traceback" not in text


def test_the_form_refuses_a_cron_that_never_fires_and_stores_nothing(alice, login):
    client = login(alice)
    response = client.post("/schedules/", _form())
    assert response.status_code == 400
    assert "never fires" in response.content.decode()
    assert not Schedule.objects.exists()
    assert not PeriodicTask.objects.filter(task=FIRE_TASK).exists()
    assert client.get("/schedules/").status_code == 200
    with pytest.raises(Exception, match="never fires"):
        schedule_create(user=alice, name="x", prompt="p", kind="cron",
                        cron_expression="0 0 31 4 *", target="new")


def test_a_stored_never_firing_schedule_is_shown_and_can_be_deleted(alice, login):
    legacy = _stored_never_firing(alice)
    client = login(alice)
    listing = client.get("/schedules/")
    assert listing.status_code == 200
    row = listing.content.decode().split(f'id="schedule-{legacy.pk}"')[1].split("</tr>")[0]
    assert "never fires" in row
    page = client.get(f"/schedules/{legacy.pk}/")
    assert page.status_code == 200 and "never fires" in page.content.decode()
    assert "Delete</button>" in page.content.decode()
    # Other work on the page goes on: a refused form re-renders the list, a valid one saves.
    refused = client.post("/schedules/", _form(name="", cron_expression="0 3 * * *"))
    assert refused.status_code == 400 and "Give the schedule a name" in refused.content.decode()
    assert "never fires" in refused.content.decode()
    created = client.post("/schedules/", _form(name="daily", cron_expression="0 3 * * *"))
    assert created.status_code == 302
    assert client.post(f"/schedules/{legacy.pk}/pause/").status_code == 302
    assert client.get(f"/schedules/{legacy.pk}/").status_code == 200
    assert client.post(f"/schedules/{legacy.pk}/delete/").status_code == 302
    assert list(Schedule.objects.values_list("name", flat=True)) == ["daily"]
    assert not PeriodicTask.objects.filter(name=f"hermes-schedule-{legacy.pk}").exists()


def test_beat_skips_a_stored_never_firing_schedule_and_keeps_the_others(alice):
    """The DatabaseScheduler the beat runs (embedded and services mode) loads the enabled
    rows; the impossible one is left out without stopping the beat, the valid one stays."""
    legacy = _stored_never_firing(alice)
    valid = schedule_create(user=alice, name="hourly", prompt="p", kind="cron",
                            cron_expression="0 * * * *", target="new")
    scheduler = DatabaseScheduler(app=celery_app)
    entries = scheduler.schedule
    assert valid.periodic_task.name in entries
    assert legacy.periodic_task.name not in entries
    scheduler.tick()  # one beat step: no exception escapes


@pytest.mark.parametrize("expression", ["0 0 L * *", "0 0 * * 7", "0 0 * * 1#2", "0 0 15W * *",
                                        "0 0 ? * *"])
def test_forms_croniter_accepts_but_beat_cannot_load_are_refused(alice, login, expression):
    """croniter says these parse, but celery's crontab (what the DatabaseScheduler builds
    from the row) refuses them, so beat would skip the schedule silently: it would never
    fire while the page showed next runs."""
    client = login(alice)
    preview = client.get("/schedules/preview/", {"kind": "cron", "cron_expression": expression})
    assert preview.status_code == 200 and "cannot be run by the scheduler" in \
        preview.content.decode()
    response = client.post("/schedules/", _form(cron_expression=expression))
    assert response.status_code == 400
    assert "cannot be run by the scheduler" in response.content.decode()
    assert not Schedule.objects.exists()
    legacy = _stored_never_firing(alice, expression=expression)
    page = client.get(f"/schedules/{legacy.pk}/")
    assert page.status_code == 200 and "cannot be run by the scheduler" in page.content.decode()
    assert "Next runs" not in page.content.decode()
