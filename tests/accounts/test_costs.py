"""Cost on every UsageRecord at write time (real turns on the simulator), re-pricing, and
budgets that stop a real turn and let it resume once the cap is raised."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.utils import timezone

from accounts.models import Budget, RateOverride, SpendReservation, Team
from accounts.services import budget_set, turn_budget_resume
from approvals.models import AuditEntry
from sessions.events import event_to_dict
from sessions.models import Message, RunEvent, Session, Turn, UsageRecord
from sessions.rendering import event_frame
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)

D = Decimal
# Claude Sonnet 4.5 list prices, USD per million tokens (the simulator is priced as it):
# https://www.anthropic.com/pricing#api
SONNET = {"input": D(3), "output": D(15), "cache_read": D("0.3"), "cache_write_5m": D("3.75"),
          "cache_write_1h": D(6)}


def independent_price(row: UsageRecord) -> Decimal:
    return (row.input_tokens * SONNET["input"] + row.output_tokens * SONNET["output"]
            + row.cache_read_tokens * SONNET["cache_read"]
            + row.cache_write_5m_tokens * SONNET["cache_write_5m"]
            + row.cache_write_1h_tokens * SONNET["cache_write_1h"]) / 1_000_000


@pytest.fixture
def team_users(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "BUDGET_WAIT_SECONDS": 0.5}
    return make_user("boss", team="acme", role="admin"), make_user("mia", team="acme")


def run(session_id: int) -> None:
    turn_run_task.apply(args=[session_id])


def test_every_call_is_priced_when_written(team_users):
    _, mia = team_users
    session = session_create(user=mia)
    turn_start(session=session, user=mia, text="list the files and read README.md")
    run(session.pk)
    rows = list(UsageRecord.objects.filter(session=session))
    assert len(rows) >= 2
    for row in rows:
        assert row.cost_usd is not None and row.cost_usd > 0
        assert row.cost_usd == independent_price(row)
        assert row.rate_source.startswith("genai-prices 0.2.3 anthropic/claude-sonnet-4-5")
        assert row.rate_fetched_at is not None and row.cost_unknown_reason == ""
    usage_events = [e.payload for e in RunEvent.objects.filter(session=session, type="usage")]
    assert all(D(p["cost_usd"]) > 0 for p in usage_events)
    finished = RunEvent.objects.get(session=session, type="turn.finished").payload
    assert D(finished["usage"]["cost_usd"]) == sum(r.cost_usd for r in rows)


def test_reprice_is_idempotent_and_follows_overrides(team_users):
    _, mia = team_users
    session = session_create(user=mia)
    turn_start(session=session, user=mia, text="hello")
    run(session.pk)
    original = {r.pk: r.cost_usd for r in UsageRecord.objects.all()}
    UsageRecord.objects.update(cost_usd=None, rate_source="")
    call_command("hermes", "reprice")
    assert {r.pk: r.cost_usd for r in UsageRecord.objects.all()} == original
    before = list(UsageRecord.objects.values())
    call_command("hermes", "reprice")  # nothing left to change
    assert list(UsageRecord.objects.values()) == before
    # a negotiated price: every row re-priced at it, source "operator"
    RateOverride.objects.create(provider="simulator", model="*", input=D(0), output=D(0),
                                cache_read=D(0), cache_write_5m=D(0), cache_write_1h=D(0))
    call_command("hermes", "reprice", "--since", (timezone.now() - timedelta(days=1))
                 .strftime("%Y-%m-%d"))
    assert set(UsageRecord.objects.values_list("cost_usd", "rate_source")) == {
        (D(0), "operator")}


def test_unknown_rate_is_stored_null_with_reason(team_users):
    _, mia = team_users
    session = session_create(user=mia)
    row = UsageRecord.objects.create(session=session, user=mia, provider="openai",
                                     model="gpt-unheard-of", input_tokens=10, output_tokens=5)
    call_command("hermes", "reprice")
    row.refresh_from_db()
    assert row.cost_usd is None and row.cost_unknown_reason == "no rate for gpt-unheard-of"


def test_a_team_cap_stops_a_real_turn_keeps_everything_and_resumes(team_users):
    boss, mia = team_users
    team = Team.objects.get(name="acme")
    budget_set(actor=boss, scope="team", team=team, period="day", limit="0.05")
    session = session_create(user=mia)
    # a teammate's work earlier today brought the team near the cap
    UsageRecord.objects.create(session=session_create(user=boss), user=boss, team=team,
                               provider="simulator", model="hermes-simulator",
                               cost_usd=D("0.048"))
    turn_start(session=session, user=mia, text="list the files and read README.md")
    run(session.pk)
    spent = sum(r.cost_usd for r in UsageRecord.objects.filter(team=team))
    blocked = Turn.objects.filter(session=session).last()
    assert blocked.status == Turn.Status.BUDGET_BLOCKED, (spent, blocked.error)
    event = RunEvent.objects.filter(session=session, type="budget.exceeded").get()
    assert event.payload["reason"] == "team budget of $0.05/day reached; resets at 00:00 UTC"
    assert event.payload["resumable"] is True
    # nothing lost: the user's message and the first call's tool work are stored, no
    # reservation is left open
    assert blocked.user_message_id is not None
    assert Message.objects.filter(pk=blocked.user_message_id, role="user").exists()
    assert Message.objects.filter(session=session, role="tool").count() == 2
    assert SpendReservation.objects.count() == 0
    # the overshoot is below one call (agents/spend_caps.py bound)
    calls = list(UsageRecord.objects.filter(team=team).order_by("id"))
    assert spent - D("0.05") < max(r.cost_usd for r in calls)
    # resuming under the same cap stops again; raising it lets the turn finish
    assert turn_budget_resume(session=session, user=mia) == blocked.pk
    run(session.pk)
    assert Turn.objects.get(pk=blocked.pk).status == Turn.Status.BUDGET_BLOCKED
    budget_set(actor=boss, scope="team", team=team, period="day", limit="5")
    assert turn_budget_resume(session=session, user=mia) == blocked.pk
    run(session.pk)
    blocked.refresh_from_db()
    assert blocked.status == Turn.Status.COMPLETED
    users = Message.objects.filter(session=session, role="user", active=True)
    assert users.count() == 1  # the resumed turn did not store its message twice
    assert Message.objects.filter(session=session, role="tool").count() == 2  # not re-run
    assert AuditEntry.objects.filter(action="budget.set").count() == 2


def test_warning_event_at_80_percent(team_users):
    boss, mia = team_users
    session = session_create(user=mia)
    UsageRecord.objects.create(session=session, user=mia, team=mia.memberships.first().team,
                               provider="simulator", model="x", cost_usd=D("0.85"))
    budget_set(actor=boss, scope="user", user=mia, period="month", limit="1")
    turn_start(session=session, user=mia, text="hello")
    run(session.pk)
    warning = RunEvent.objects.filter(session=session, type="budget.warning").first()
    assert warning is not None and "your budget of $1.00/month" in warning.payload["reason"]


@pytest.mark.parametrize("bad", ["-1", "abc", "NaN", "", "0", "99999999"])
def test_bad_budget_input_stores_nothing(team_users, bad):
    boss, _ = team_users
    team = Team.objects.get(name="acme")
    if bad == "":
        assert budget_set(actor=boss, scope="team", team=team, period="day", limit=bad) is None
    else:
        with pytest.raises(ValidationError):
            budget_set(actor=boss, scope="team", team=team, period="day", limit=bad)
    assert Budget.objects.count() == 0 and AuditEntry.objects.count() == 0


def test_a_member_cannot_set_the_team_budget(team_users):
    from django.core.exceptions import PermissionDenied

    _, mia = team_users
    with pytest.raises(PermissionDenied):
        budget_set(actor=mia, scope="team", team=Team.objects.get(name="acme"), period="day",
                   limit="100")
    assert Budget.objects.count() == 0


def test_unknown_cost_policy_blocks_by_default_and_can_allow(team_users):
    boss, mia = team_users
    team = Team.objects.get(name="acme")
    session = session_create(user=mia)
    Session.objects.filter(pk=session.pk).update(provider="openrouter", model="x/unknown")
    from accounts.budgets import budget_reserve
    from agents.spend_caps import BudgetExceeded

    session.refresh_from_db()
    budget_set(actor=boss, scope="team", team=team, period="day", limit="10")
    with pytest.raises(BudgetExceeded, match="unknown"):
        budget_reserve(session=session, model="x/unknown", prompt_estimate=10, max_tokens=10)
    budget_set(actor=boss, scope="team", team=team, period="day", limit="10",
               unknown_policy="allow")
    budget_reserve(session=session, model="x/unknown", prompt_estimate=10, max_tokens=10)
    assert SpendReservation.objects.filter(session=session).count() == 1


def test_a_reload_draws_the_cost_line_the_live_page_drew(team_users, login):
    """The cost line of a finished turn, as the socket drew it (turn.finished's partial) and
    as a reload of the page draws it (the stored UsageRecords summed): the same tokens, the
    same dollars, the same "served by". A reload used to drop who served the turn."""
    _, mia = team_users
    session = session_create(user=mia)
    turn = turn_start(session=session, user=mia, text="list the files and read README.md")
    run(session.pk)
    finished = RunEvent.objects.get(session=session, type="turn.finished")
    live = re.search(r'<p class="usage"[^>]*>.*?</p>',
                     event_frame(event_to_dict(finished))["html"], re.S).group(0)
    assert f'id="usage-{turn.pk}"' in live and "served by simulator/" in live
    page = login(mia).get(f"/sessions/{session.pk}/").content.decode()
    assert re.search(rf'<p class="usage" id="usage-{turn.pk}">.*?</p>', page, re.S).group(0) \
        == live
