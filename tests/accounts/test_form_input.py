"""Input a new user typed on the account pages, through the real views and forms on the
real database: a budget written with a decimal comma or a grouping separator is refused with
a sentence saying how to write it (on /spend/ and in the Django admin), never stored ten
times higher; staff manage the members of a team they are not in, from the link /people/
shows them; team names are unique regardless of case (create, admin rename, the database
constraint); the system checks print no warning on SQLite or PostgreSQL."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core import checks
from django.db import IntegrityError, transaction
from django.urls import reverse

from accounts.models import Budget, Membership, RateOverride, Team
from approvals.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """PBKDF2's cost is ~0.5 s per user; passwords are not under test here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def people(make_user, django_user_model, hermes_settings):
    return {"boss": make_user("boss", team="acme", role="admin"),
            "mia": make_user("mia", team="acme"),
            "zoe": make_user("zoe"),
            "root": make_user("root", staff=True),
            "su": django_user_model.objects.create_superuser("su", password="pw-su")}


def as_(client, user):
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


# 1. money ---------------------------------------------------------------------------------

@pytest.mark.parametrize("typed", ["1,5", "1.000,50", "1 000", "$1,000", "1'000", "1_000"])
def test_a_budget_with_a_comma_or_grouping_is_refused_with_how_to_write_it(client, people,
                                                                          typed):
    team = Team.objects.get(name="acme")
    response = as_(client, people["boss"]).post(
        reverse("budget_set", args=[team.pk]),
        {"scope": "team", "period": "day", "limit": typed, "unknown_policy": "block"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "use a dot for cents" in page and "e.g. 1.50" in page
    assert not Budget.objects.exists()


def test_a_budget_with_a_dot_is_stored_as_written(client, people):
    team = Team.objects.get(name="acme")
    response = as_(client, people["boss"]).post(
        reverse("budget_set", args=[team.pk]),
        {"scope": "team", "period": "day", "limit": "1.5", "unknown_policy": "block"})
    assert response.status_code == 302
    assert Budget.objects.get(team=team).limit_usd == Decimal("1.5")


def test_the_admin_refuses_a_comma_in_a_budget_and_in_a_rate_with_the_same_sentence(client,
                                                                                     people):
    team = Team.objects.get(name="acme")
    c = as_(client, people["su"])
    response = c.post(reverse("admin:accounts_budget_add"), {
        "scope": "team", "team": team.pk, "period": "day", "limit_usd": "1,5",
        "unknown_policy": "block"})
    assert response.status_code == 200 and "use a dot for cents" in response.content.decode()
    assert not Budget.objects.exists()
    response = c.post(reverse("admin:accounts_rateoverride_add"), {
        "provider": "anthropic", "model": "*", "input": "3,5", "note": ""})
    assert response.status_code == 200 and "use a dot for cents" in response.content.decode()
    assert not RateOverride.objects.exists()
    response = c.post(reverse("admin:accounts_budget_add"), {
        "scope": "team", "team": team.pk, "period": "day", "limit_usd": "1.5",
        "unknown_policy": "block"})
    assert response.status_code == 302
    assert Budget.objects.get(team=team).limit_usd == Decimal("1.5")


# 2. staff and a team's members ------------------------------------------------------------

def test_staff_follow_every_members_link_on_people_and_manage_a_team_they_are_not_in(
        client, people):
    c = as_(client, people["root"])
    assert c.post(reverse("people"), {"action": "team", "name": "blue",
                                      "admin_username": "boss"}).status_code == 302
    blue = Team.objects.get(name="blue")
    assert not Membership.objects.filter(team=blue, user=people["root"]).exists()
    page = c.get(reverse("people")).content.decode()
    for team in Team.objects.all():
        url = reverse("team_members", args=[team.pk])
        assert f'href="{url}"' in page
        members = c.get(url)
        assert members.status_code == 200, url
        # the policy page and the sessions are the team admins': not linked for staff outside
        assert reverse("team_settings", args=[team.pk]) not in members.content.decode()
    url = reverse("team_members", args=[blue.pk])
    assert c.post(url, {"action": "add", "username": "zoe",
                        "role": "member"}).status_code == 302
    assert Membership.objects.filter(team=blue, user=people["zoe"], role="member").exists()
    assert c.post(url, {"action": "role", "user_id": people["zoe"].pk,
                        "role": "admin"}).status_code == 302
    assert c.post(url, {"action": "remove", "user_id": people["zoe"].pk}).status_code == 302
    last = c.post(url, {"action": "remove", "user_id": people["boss"].pk})
    assert last.status_code == 400 and "only admin" in last.content.decode()
    assert {"team.member_add", "team.member_role", "team.member_remove"} <= set(
        AuditEntry.objects.values_list("action", flat=True))


def test_non_members_and_plain_members_still_get_404(client, people):
    team = Team.objects.get(name="acme")
    url = reverse("team_members", args=[team.pk])
    for name in ("mia", "zoe"):
        c = as_(client, people[name])
        assert c.get(url).status_code == 404
        assert c.post(url, {"action": "add", "username": "zoe"}).status_code == 404
    assert as_(client, people["root"]).get(
        reverse("team_members", args=[team.pk + 1000])).status_code == 404
    # a team admin still sees the policy link and the sessions
    page = as_(client, people["boss"]).get(url).content.decode()
    assert reverse("team_settings", args=[team.pk]) in page and "The team's sessions" in page


# 3. team names regardless of case ---------------------------------------------------------

@pytest.mark.parametrize("name", ["ACME", "Acme", " acme "])
def test_a_team_name_differing_only_by_case_is_refused(client, people, name):
    response = as_(client, people["root"]).post(reverse("people"),
                                                {"action": "team", "name": name})
    assert response.status_code == 400
    assert "exists already" in response.content.decode()
    assert list(Team.objects.values_list("name", flat=True)) == ["acme"]


def test_a_rename_in_the_admin_to_another_teams_name_in_other_case_is_refused(client, people):
    other = Team.objects.create(name="blue")
    response = as_(client, people["su"]).post(
        reverse("admin:accounts_team_change", args=[other.pk]),
        {"name": "ACME", "admin_only_risk_classes": "[]", "deny_rules": "[]",
         "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
         "memberships-MIN_NUM_FORMS": "0", "memberships-MAX_NUM_FORMS": "1000"})
    assert response.status_code == 200
    assert "exists already" in response.content.decode()
    other.refresh_from_db()
    assert other.name == "blue"


def test_the_database_refuses_a_name_differing_only_by_case(people):
    with pytest.raises(IntegrityError), transaction.atomic():
        Team.objects.create(name="AcMe")


# 5. system checks --------------------------------------------------------------------------

def test_the_models_pass_the_system_checks_of_this_database_without_warnings():
    found = [m for m in checks.run_checks(databases=["default"])
             if m.level >= checks.WARNING]
    assert found == [], [str(m) for m in found]


def test_one_budget_per_owner_and_period_is_still_enforced(people):
    team = Team.objects.get(name="acme")
    Budget.objects.create(scope="team", team=team, period="day", limit_usd=Decimal("5"))
    Budget.objects.create(scope="team", team=team, period="month", limit_usd=Decimal("5"))
    Budget.objects.create(scope="user", user=people["mia"], period="day",
                          limit_usd=Decimal("5"))
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(scope="team", team=team, period="day", limit_usd=Decimal("9"))
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(scope="user", user=people["mia"], period="day",
                              limit_usd=Decimal("9"))
