"""Dollars where the user looks: the chat's usage line, the session header and list, the
export, /spend/ for a user, a team admin and staff, the CSV, budgets set in the UI."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounts.models import Budget, Team
from accounts.money import usd
from approvals.models import AuditEntry
from sessions.models import Turn, UsageRecord
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)
D = Decimal


@pytest.fixture
def people(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "BUDGET_WAIT_SECONDS": 0.2}
    return {"boss": make_user("boss", team="acme", role="admin"),
            "mia": make_user("mia", team="acme"), "zed": make_user("zed", team="other"),
            "staff": make_user("root", staff=True)}


def usage(user, *, usd, days_ago=0, session=None, model="claude-sonnet-4-5", reason="",
          **tokens):
    session = session or session_create(user=user)
    return UsageRecord.objects.create(
        session=session, user=user, team=user.memberships.first().team if
        user.memberships.exists() else None, provider="anthropic", model=model,
        cost_usd=usd, cost_unknown_reason=reason,
        created_at=timezone.now() - timedelta(days=days_ago), **tokens)


def test_a_real_turn_shows_its_dollars_in_chat_header_list_and_export(people, login):
    mia = people["mia"]
    session = session_create(user=mia)
    turn_start(session=session, user=mia, text="hello")
    turn_run_task.apply(args=[session.pk])
    total = sum(r.cost_usd for r in UsageRecord.objects.filter(session=session))
    assert total > 0
    client = login(mia)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'class="cost"' in page and 'id="session-cost"' in page
    assert usd(total) in page
    listing = client.get("/").content.decode()
    assert usd(total) in listing
    export = client.get(f"/sessions/{session.pk}/export.json").json()
    assert sum(D(u["cost_usd"]) for u in export["usage"]) == total
    assert export["usage"][0]["rate_source"].startswith("genai-prices")


def test_unknown_cost_is_said_in_the_usage_line(people, login):
    mia = people["mia"]
    session = session_create(user=mia)
    turn = Turn.objects.create(session=session, input_text="x", status="completed")
    from sessions.models import Message

    msg = Message.objects.create(session=session, role="user", content="x")
    Turn.objects.filter(pk=turn.pk).update(user_message=msg)
    UsageRecord.objects.create(session=session, turn=turn, user=mia, provider="openai",
                               model="gpt-new", input_tokens=5,
                               cost_unknown_reason="no rate for gpt-new")
    page = login(mia).get(f"/sessions/{session.pk}/").content.decode()
    assert "cost unknown: no rate for gpt-new" in page


def test_spend_page_for_a_user(people, login):
    mia = people["mia"]
    usage(mia, usd=D("1.25"), input_tokens=1000, cache_read_tokens=9000, output_tokens=10)
    usage(mia, usd=D("2"), days_ago=10)
    usage(mia, usd=None, reason="no rate for gpt-x", model="gpt-x")
    usage(people["boss"], usd=D("50"))  # someone else's: not shown to mia
    page = login(mia).get("/spend/").content.decode()
    assert 'id="spend-today">$1.25<' in page
    assert 'id="spend-30d">$3.25<' in page
    assert 'id="spend-total">$3.25<' in page
    assert "<svg" in page and "spend-chart" in page and "<script" not in page.split("<svg")[1]
    assert "1 × cost unknown: no rate for gpt-x" in page
    assert "hit ratio <strong>90%" in page
    assert "Members" not in page  # not a team admin view


def test_spend_page_counts_one_call_in_english(people, login):
    """One priced call is "1 call", never "1 calls" (a fresh user's report)."""
    usage(people["mia"], usd=D("0.5"))
    page = login(people["mia"]).get("/spend/").content.decode()
    assert " · 1 call · " in page and "1 calls" not in page


@pytest.mark.parametrize(("start", "end", "error"), [
    ("2026-05-02", "2026-05-01", "before the start"),
    ("2020-01-01", "2026-01-01", "at most 366 days"),
    ("garbage", "2026-01-01", "valid date")])
def test_a_bad_date_range_is_a_form_error(people, login, start, end, error):
    response = login(people["mia"]).get(f"/spend/?start={start}&end={end}")
    assert response.status_code == 400
    assert error in response.content.decode()


def test_team_admin_sees_members_sorted_and_the_csv(people, login):
    boss, mia = people["boss"], people["mia"]
    usage(mia, usd=D("3"))
    usage(boss, usd=D("1"))
    usage(people["zed"], usd=D("99"))  # another team
    team = Team.objects.get(name="acme")
    client = login(boss)
    page = client.get(f"/spend/?team={team.pk}").content.decode()
    assert 'id="members-table"' in page and 'id="spend-total">$4.00<' in page
    table = page.split('id="members-table"')[1]
    assert table.index("mia") < table.index("boss")  # dearest first
    cheap_first = client.get(f"/spend/?team={team.pk}&sort=-spend").content.decode()
    table = cheap_first.split('id="members-table"')[1]
    assert table.index("boss") < table.index("mia")
    rows = list(csv.reader(io.StringIO(
        client.get(f"/spend/teams/{team.pk}/members.csv").content.decode())))
    assert rows[0][:3] == ["member", "role", "usd"]
    assert [r[0] for r in rows[1:]] == ["mia", "boss"] and D(rows[1][2]) == D("3")
    member = client.get(f"/spend/?team={team.pk}&member={mia.pk}").content.decode()
    assert 'id="spend-total">$3.00<' in member


def test_members_and_outsiders_cannot_see_a_team(people, login):
    team = Team.objects.get(name="acme")
    assert login(people["mia"]).get(f"/spend/?team={team.pk}").status_code == 404
    assert login(people["zed"]).get(f"/spend/teams/{team.pk}/members.csv").status_code == 404


def test_staff_see_every_team(people, login):
    usage(people["zed"], usd=D("7"))
    other = Team.objects.get(name="other")
    page = login(people["staff"]).get(f"/spend/?team={other.pk}").content.decode()
    assert 'id="spend-total">$7.00<' in page and "Team acme" in page


def test_team_admin_sets_a_budget_in_the_ui_and_bad_input_stores_nothing(people, login):
    team = Team.objects.get(name="acme")
    client = login(people["boss"])
    for bad in ("-5", "abc", "NaN", "1e9"):
        response = client.post(f"/spend/teams/{team.pk}/budgets/", {
            "scope": "team", "period": "day", "limit": bad, "unknown_policy": "block"})
        assert response.status_code == 400 and 'id="budget-error"' in response.content.decode()
    assert Budget.objects.count() == 0 and AuditEntry.objects.count() == 0
    response = client.post(f"/spend/teams/{team.pk}/budgets/", {
        "scope": "team", "period": "day", "limit": "0.05", "unknown_policy": "block"})
    assert response.status_code == 302
    budget = Budget.objects.get()
    assert budget.team == team and budget.limit_usd == D("0.05")
    entry = AuditEntry.objects.get(action="budget.set")
    assert entry.actor == people["boss"] and entry.detail["limit_after"] == "0.05"
    client.post(f"/spend/teams/{team.pk}/budgets/", {
        "scope": "user", "member": people["mia"].pk, "period": "month", "limit": "3",
        "unknown_policy": "allow"})
    assert Budget.objects.filter(scope="user", user=people["mia"], limit_usd=3).exists()
    # a member of the team cannot
    response = login(people["mia"]).post(f"/spend/teams/{team.pk}/budgets/", {
        "scope": "team", "period": "day", "limit": "100", "unknown_policy": "block"})
    assert response.status_code == 404
    assert Budget.objects.get(scope="team").limit_usd == D("0.05")


def test_a_budget_stopped_turn_shows_resume_and_resumes(people, login):
    boss, mia = people["boss"], people["mia"]
    team = Team.objects.get(name="acme")
    usage(boss, usd=D("1"))
    from accounts.services import budget_set

    budget_set(actor=boss, scope="team", team=team, period="day", limit="0.5")
    session = session_create(user=mia)
    turn_start(session=session, user=mia, text="hello")
    turn_run_task.apply(args=[session.pk])
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.BUDGET_BLOCKED
    client = login(mia)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "team budget of $0.50/day reached" in page and 'id="budget-resume"' in page
    budget_set(actor=boss, scope="team", team=team, period="day", limit="10")
    before = client.get(f"/sessions/{session.pk}/events/").json()["last_seq"]
    assert client.post(f"/sessions/{session.pk}/resume-budget/").status_code == 302
    turn_run_task.apply(args=[session.pk])
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    # The resumed turn's message is already on the page: its frames (as the socket sends
    # them) add no queued bubble, which nothing would ever replace (a user's finding).
    frames = client.get(f"/sessions/{session.pk}/events/?after={before}").json()["events"]
    assert [f for f in frames if f["type"] == "turn.queued"]
    assert not any("queued-input" in (f.get("html") or "") for f in frames)
    # someone else cannot resume it
    assert login(people["zed"]).post(f"/sessions/{session.pk}/resume-budget/").status_code == 404


def test_staff_set_budgets_and_rates_in_the_admin(people, login):
    people["staff"].is_superuser = True  # model permissions in the admin
    people["staff"].save()
    client = login(people["staff"])
    team = Team.objects.get(name="acme")
    response = client.post("/admin/accounts/budget/add/", {
        "scope": "team", "team": team.pk, "period": "day", "limit_usd": "20",
        "unknown_policy": "block"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert AuditEntry.objects.filter(action="budget.set", actor=people["staff"]).exists()
    bad = client.post("/admin/accounts/budget/add/", {
        "scope": "team", "team": team.pk, "period": "month", "limit_usd": "-1",
        "unknown_policy": "block"})
    assert bad.status_code == 200 and Budget.objects.count() == 1
    from accounts.models import RateOverride

    unknown = client.post("/admin/accounts/rateoverride/add/", {
        "provider": "nosuch", "model": "*", "input": "1"})
    assert unknown.status_code == 200 and "unknown provider" in unknown.content.decode()
    negative = client.post("/admin/accounts/rateoverride/add/", {
        "provider": "openai", "model": "*", "input": "-1"})
    assert negative.status_code == 200 and RateOverride.objects.count() == 0
    ok = client.post("/admin/accounts/rateoverride/add/", {
        "provider": "vllm", "model": "*", "input": "0.1", "output": "0.2"})
    assert ok.status_code == 302 and RateOverride.objects.count() == 1


def test_another_teams_admin_cannot_lift_or_remove_a_members_cap(make_user, hermes_settings,
                                                                 login):
    """F4: a member cap (team=NULL) binds the member in every team, so an admin of only one
    of the member's teams gets a form error, nothing stored or audited, and the cap still
    stops the member's real turn; an admin of all the member's teams, and staff, may."""
    from accounts.models import Membership

    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "BUDGET_WAIT_SECONDS": 0.2}
    alice = make_user("alice", team="alpha", role="admin")
    bob = make_user("bob", team="alpha")
    mallory = make_user("mallory", team="mteam", role="admin")
    alpha, mteam = Team.objects.get(name="alpha"), Team.objects.get(name="mteam")
    cap = {"scope": "user", "member": bob.pk, "period": "day", "unknown_policy": "block"}
    assert login(alice).post(f"/spend/teams/{alpha.pk}/budgets/",
                             {**cap, "limit": "0.01"}).status_code == 302
    Membership.objects.create(user=bob, team=mteam, role=Membership.Role.MEMBER)
    audits = AuditEntry.objects.count()
    client = login(mallory)
    for limit in ("", "99999"):  # remove it, raise it
        response = client.post(f"/spend/teams/{mteam.pk}/budgets/", {**cap, "limit": limit})
        page = response.content.decode()
        assert response.status_code == 400 and 'id="budget-error"' in page
        assert "admin of all of those teams" in page
    assert client.post(f"/spend/teams/{alpha.pk}/budgets/",
                       {**cap, "limit": ""}).status_code == 404
    assert list(Budget.objects.values_list("user", "team", "limit_usd")) == [
        (bob.pk, None, D("0.01"))]
    assert AuditEntry.objects.count() == audits
    # The cap still holds on a real turn.
    usage(bob, usd=D("0.02"))
    session = session_create(user=bob)
    turn_start(session=session, user=bob, text="hello")
    turn_run_task.apply(args=[session.pk])
    assert Turn.objects.get(session=session).status == Turn.Status.BUDGET_BLOCKED
    # Alice no longer admins every team bob is in either; an admin of both, and staff, may.
    assert login(alice).post(f"/spend/teams/{alpha.pk}/budgets/",
                             {**cap, "limit": "5"}).status_code == 400
    carol = make_user("carol", team="alpha", role="admin")
    Membership.objects.create(user=carol, team=mteam, role=Membership.Role.ADMIN)
    assert login(carol).post(f"/spend/teams/{mteam.pk}/budgets/",
                             {**cap, "limit": "5"}).status_code == 302
    assert Budget.objects.get(user=bob).limit_usd == D("5")
    root = make_user("root", staff=True)
    assert login(root).post(f"/spend/teams/{alpha.pk}/budgets/",
                            {**cap, "limit": ""}).status_code == 302
    assert not Budget.objects.exists()
    assert list(AuditEntry.objects.filter(action__startswith="budget.").order_by("id")
                .values_list("actor__username", "action"))[-2:] == [
        ("carol", "budget.set"), ("root", "budget.removed")]
