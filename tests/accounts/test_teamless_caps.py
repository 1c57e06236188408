"""A session of no team is bound by the caps of every team its owner belongs to, and its
spend counts in those teams' totals (accounts/budgets.py "Teams", accounts/spend.py
``team_usage``): real turns on the simulator until the team cap refuses the call, the team's
/spend/ page showing the teamless spend, and reservations of a teamless call holding back a
team call (and the reverse) under the same budget row."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounts.money import usd
from accounts.budgets import budget_reserve, budget_spent, reservations_settle
from accounts.models import Budget, Membership, SpendReservation, Team
from accounts.services import budget_set
from agents.spend_caps import BudgetExceeded
from sessions.models import RunEvent, Turn, UsageRecord
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)

D = Decimal
CAP = "0.05"


@pytest.fixture
def people(make_user, hermes_settings):
    """boss admins team acme; mia made a session, then joined acme (so it has no team);
    olga is in no team at all."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "BUDGET_WAIT_SECONDS": 0.3}
    boss = make_user("boss", team="acme", role="admin")
    mia = make_user("mia")
    personal = session_create(user=mia)
    team = Team.objects.get(name="acme")
    Membership.objects.create(user=mia, team=team)
    assert personal.team_id is None
    return {"boss": boss, "mia": mia, "team": team, "personal": personal,
            "olga": make_user("olga")}


def run_turn(session, user, text="list the files and read README.md") -> Turn:
    turn_start(session=session, user=user, text=text)
    turn_run_task.apply(args=[session.pk])
    return Turn.objects.filter(session=session).order_by("id").last()


def test_a_members_teamless_session_runs_until_the_team_cap_refuses(people):
    boss, mia, team, personal = people["boss"], people["mia"], people["team"], people["personal"]
    budget_set(actor=boss, scope="team", team=team, period="day", limit=CAP)
    statuses = []
    for _ in range(12):
        turn = run_turn(personal, mia)
        statuses.append(turn.status)
        if turn.status != Turn.Status.COMPLETED:
            break
    assert statuses[-1] == Turn.Status.BUDGET_BLOCKED, statuses
    assert len(statuses) >= 2, "the cap should let the first turn through: raise CAP"
    event = RunEvent.objects.filter(session=personal, type="budget.exceeded").get()
    assert event.payload["reason"] == (
        "team acme budget of $0.05/day reached; resets at 00:00 UTC")
    rows = list(UsageRecord.objects.filter(session=personal))
    assert rows and all(r.team_id is None and r.user_id == mia.pk for r in rows)
    spent = sum(r.cost_usd for r in rows)
    assert spent >= D(CAP)
    assert spent - D(CAP) < max(r.cost_usd for r in rows)  # the bound: below one call
    assert SpendReservation.objects.count() == 0
    # the cap holds the team's own sessions too now: the teamless spend used it up
    team_turn = run_turn(session_create(user=boss), boss, text="hello")
    assert team_turn.status == Turn.Status.BUDGET_BLOCKED
    assert RunEvent.objects.get(session=team_turn.session_id, type="budget.exceeded"
                                ).payload["reason"].startswith("team budget of $0.05/day")
    # someone in no team is bound by no team's cap
    olga_turn = run_turn(session_create(user=people["olga"]), people["olga"], text="hello")
    assert olga_turn.status == Turn.Status.COMPLETED


def test_the_team_spend_page_counts_a_members_teamless_spend(people, login):
    boss, mia, team, personal = people["boss"], people["mia"], people["team"], people["personal"]
    budget = budget_set(actor=boss, scope="team", team=team, period="day", limit="5")
    assert run_turn(personal, mia).status == Turn.Status.COMPLETED
    assert run_turn(session_create(user=boss), boss, text="hello").status == (
        Turn.Status.COMPLETED)
    assert run_turn(session_create(user=people["olga"]), people["olga"],
                    text="hello").status == Turn.Status.COMPLETED
    teamless = sum(r.cost_usd for r in UsageRecord.objects.filter(session=personal))
    in_team = sum(r.cost_usd for r in UsageRecord.objects.filter(team=team))
    assert teamless > 0 and in_team > 0
    total = teamless + in_team  # olga's is not the team's
    from_cap = budget_spent(Budget.objects.get(pk=budget.pk),
                            now=UsageRecord.objects.latest("id").created_at)
    assert from_cap == total  # the cap is checked against what the page shows
    page = login(boss).get(f"/spend/?team={team.pk}").content.decode()
    shown = usd(total)  # the interface's one money format (accounts/money.py)
    assert f'id="spend-today">{shown}<' in page
    assert f'id="spend-total">{shown}<' in page
    assert f'id="budget-{budget.pk}-spent">{shown} spent this day<' in page
    members = page.split('id="members-table"')[1].split("</table>")[0]
    assert "mia" in members and personal.title in page  # her session is in "By session"
    member = login(boss).get(f"/spend/?team={team.pk}&member={mia.pk}").content.decode()
    mine = usd(teamless)
    assert f'id="spend-total">{mine}<' in member
    # mia's own page lists the team cap as hers, with the same figure
    own = login(mia).get("/spend/").content.decode()
    assert f'id="budget-{budget.pk}-spent">{shown} spent this day<' in own


def test_a_teamless_reservation_holds_back_a_team_call_and_the_reverse(people):
    """Two calls in flight at once: what one reserved under the team cap the other sees,
    whichever of them is the session of no team (the same Budget row, the same lock)."""
    boss, mia, team, personal = people["boss"], people["mia"], people["team"], people["personal"]
    budget_set(actor=boss, scope="team", team=team, period="day", limit="0.01")
    team_session = session_create(user=boss)
    model = personal.model
    # a worst case of ~$0.0105 (simulator at Sonnet rates): one call fills the cap
    big = {"model": model, "prompt_estimate": 1000, "max_tokens": 500}
    for first, second in ((personal, team_session), (team_session, personal)):
        admitted = budget_reserve(session=first, **big)
        assert [c.scope for c in admitted.caps] == ["team"]
        assert SpendReservation.objects.filter(session=first,
                                               budget__team=team).count() == 1
        with pytest.raises(BudgetExceeded) as refused:
            budget_reserve(session=second, **big)
        assert "budget of $0.01/day reached" in refused.value.reason
        reservations_settle(session_id=first.pk)  # the first call is recorded or failed
        assert budget_reserve(session=second, **big).caps
        reservations_settle(session_id=second.pk)
    assert SpendReservation.objects.count() == 0
