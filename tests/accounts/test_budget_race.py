"""The budget race: 20 turns at once under one team cap, through real Celery workers on
Redis and PostgreSQL row locks. The overshoot stays within agents/spend_caps.py's bound:
below one call plus the amount by which calls beat their worst-case reservation. Run twice:
every session in the team, and half of them sessions of no team made by members before they
joined (bound by the team's cap and reserving under it the same way: accounts/budgets.py
"Teams")."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.conf import settings as dj_settings

from accounts.models import Membership, SpendReservation, Team
from accounts.pricing import buckets_of
from accounts.services import budget_set
from agents.pricing import rates_resolve
from agents.spend_caps import worst_case_usd
from sessions.models import Turn, UsageRecord
from sessions.services import session_create, turn_start

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

TURNS = 20
CAP = Decimal("0.03")


@pytest.fixture
def many_workers(settings):
    """A real Celery worker with 20 threads consuming from the Redis broker."""
    from celery.contrib.testing.worker import start_worker

    from hermes_web.celery import app

    assert settings.CELERY_BROKER_URL.startswith("redis://"), "services tests need REDIS_URL"
    assert dj_settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    app.control.purge()
    with start_worker(app, pool="threads", concurrency=TURNS, perform_ping_check=False,
                      shutdown_timeout=60) as worker:
        yield worker


@pytest.mark.parametrize("teamless", [False, True], ids=["team-sessions", "half-teamless"])
def test_twenty_concurrent_turns_overshoot_by_less_than_one_call(make_user, hermes_settings,
                                                                 many_workers, capsys,
                                                                 teamless):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local",
                              "BUDGET_WAIT_SECONDS": 120}
    boss = make_user("boss", team="race", role="admin")
    team = Team.objects.get(name="race")
    budget_set(actor=boss, scope="team", team=team, period="day", limit=str(CAP))
    users = [make_user(f"m{i}", team=None if teamless and i % 2 else "race")
             for i in range(TURNS)]
    sessions = [session_create(user=u) for u in users]
    for user in users[1::2] if teamless else ():  # joined after making their session
        Membership.objects.create(user=user, team=team)
    assert sum(s.team_id is None for s in sessions) == (TURNS // 2 if teamless else 0)
    for user, session in zip(users, sessions):  # all enqueued at once
        turn_start(session=session, user=user, text="list the files and read README.md")
    deadline = time.monotonic() + 300
    done = {Turn.Status.COMPLETED, Turn.Status.BUDGET_BLOCKED, Turn.Status.FAILED}
    while time.monotonic() < deadline:
        if Turn.objects.filter(session__in=sessions).exclude(status__in=done).count() == 0:
            break
        time.sleep(0.5)
    turns = list(Turn.objects.filter(session__in=sessions))
    assert all(t.status in done for t in turns), [t.status for t in turns]
    assert not [t.error for t in turns if t.status == Turn.Status.FAILED]
    blocked = [t for t in turns if t.status == Turn.Status.BUDGET_BLOCKED]
    assert blocked, "the cap was never reached: raise TURNS or lower CAP"
    assert SpendReservation.objects.count() == 0  # every reservation settled

    calls = list(UsageRecord.objects.filter(session__in=sessions))
    if teamless:
        assert {c.team_id for c in calls} == {team.pk, None}
    spent = sum(c.cost_usd for c in calls)
    overshoot = spent - CAP
    # the bound: the dearest call plus every call's excess over its worst case
    excess = Decimal(0)
    for c in calls:
        rates, _ = rates_resolve(c.provider, c.model, prompt_tokens=buckets_of(c).prompt)
        worst = worst_case_usd(rates, prompt_estimate=c.estimated_prompt_tokens or 0,
                               max_tokens=hermes_settings.HERMES["MAX_OUTPUT_TOKENS"])
        excess += max(Decimal(0), c.cost_usd - worst)
    dearest = max(c.cost_usd for c in calls)
    mean = spent / len(calls)
    with capsys.disabled():
        print(f"\nbudget race ({'half teamless' if teamless else 'team sessions'}): {TURNS} turns, cap ${CAP}/day, {len(calls)} calls, spent "
              f"${spent:.6f}, overshoot ${overshoot:.6f} = {overshoot / mean:.2f} mean calls "
              f"(dearest call ${dearest:.6f}, estimate excess ${excess:.6f}), "
              f"{len(blocked)} turns stopped by the cap")
    assert overshoot < dearest + excess
