"""People and teams without the Django admin: team admins add members, set roles, remove
them (never the last admin) and see the team's sessions; users change their password; staff
create users and teams. Through the test client on the real database; every write audited."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from accounts.models import Membership, Team, TeamInvitation
from approvals.models import AuditEntry
from sessions.services import session_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(make_user, hermes_settings):
    return {"ann": make_user("ann", team="red", role="admin"),
            "max": make_user("max", team="red"),
            "zoe": make_user("zoe"),
            "sam": make_user("sam", staff=True)}


def as_(client, user):
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


def test_team_admin_adds_sets_roles_and_cannot_remove_the_last_admin(client, people):
    team = Team.objects.get(name="red")
    url = reverse("team_members", args=[team.pk])
    c = as_(client, people["ann"])
    session_create(user=people["max"], title="Max's work")
    page = c.get(url).content.decode()
    assert "Max&#x27;s work" in page or "Max's work" in page
    assert c.post(url, {"action": "add", "username": "zoe", "role": "member"}).status_code == 302
    # a team admin invites; zoe joins only when she accepts
    assert not Membership.objects.filter(team=team, user=people["zoe"]).exists()
    again = c.post(url, {"action": "add", "username": "zoe", "role": "member"})
    assert again.status_code == 400 and "invited to it" in again.content.decode()
    invitation = TeamInvitation.objects.get(team=team, user=people["zoe"])
    assert as_(client, people["zoe"]).post(
        reverse("invitation_answer", args=[invitation.pk]),
        {"answer": "accept"}).status_code == 302
    assert Membership.objects.filter(team=team, user=people["zoe"], role="member").exists()
    c = as_(client, people["ann"])
    again = c.post(url, {"action": "add", "username": "zoe", "role": "member"})
    assert again.status_code == 400 and "already in red" in again.content.decode()
    ghost = c.post(url, {"action": "add", "username": "nobody", "role": "member"})
    assert ghost.status_code == 400 and "No user is called" in ghost.content.decode()
    last = c.post(url, {"action": "role", "user_id": people["ann"].pk, "role": "member"})
    assert last.status_code == 400 and "only admin" in last.content.decode()
    assert c.post(url, {"action": "role", "user_id": people["max"].pk,
                        "role": "admin"}).status_code == 302
    assert c.post(url, {"action": "role", "user_id": people["ann"].pk,
                        "role": "member"}).status_code == 302  # max is an admin now
    bad = as_(client, people["max"]).post(url, {"action": "role", "user_id": people["zoe"].pk,
                                                "role": "owner"})
    assert bad.status_code == 400 and "member” or “admin" in bad.content.decode()
    assert as_(client, people["max"]).post(url, {"action": "remove",
                                                 "user_id": people["zoe"].pk}).status_code == 302
    assert not Membership.objects.filter(team=team, user=people["zoe"]).exists()
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"team.member_invite", "team.invite_accept", "team.member_role",
            "team.member_remove"} <= actions


def test_a_member_or_stranger_sees_404_and_changes_nothing(client, people):
    team = Team.objects.get(name="red")
    url = reverse("team_members", args=[team.pk])
    for name in ("max", "zoe"):
        c = as_(client, people[name])
        assert c.get(url).status_code == 404
        assert c.post(url, {"action": "add", "username": "zoe"}).status_code == 404
    assert Membership.objects.filter(team=team).count() == 2


def test_staff_create_users_and_teams_with_validation(client, people):
    url = reverse("people")
    assert as_(client, people["ann"]).get(url).status_code == 404
    c = as_(client, people["sam"])
    weak = c.post(url, {"action": "user", "username": "neo", "password1": "123",
                        "password2": "123", "role": "member"})
    assert weak.status_code == 400 and "too short" in weak.content.decode()
    team = c.post(url, {"action": "team", "name": "blue", "admin_username": "zoe"})
    assert team.status_code == 302
    blue = Team.objects.get(name="blue")
    assert Membership.objects.get(team=blue).user == people["zoe"]
    dup = c.post(url, {"action": "team", "name": "blue"})
    assert dup.status_code == 400 and "exists already" in dup.content.decode()
    ok = c.post(url, {"action": "user", "username": "neo", "password1": "a-long-pass-phrase-9",
                      "password2": "a-long-pass-phrase-9", "team": blue.pk, "role": "admin"})
    assert ok.status_code == 302
    neo = get_user_model().objects.get(username="neo")
    assert neo.check_password("a-long-pass-phrase-9") and not neo.is_staff
    assert Membership.objects.get(user=neo).role == "admin"
    taken = c.post(url, {"action": "user", "username": "neo", "password1": "a-long-pass-phrase-9",
                         "password2": "a-long-pass-phrase-9", "role": "member"})
    assert taken.status_code == 400


def test_password_change_checks_the_old_one_and_keeps_the_login(client, people):
    c = as_(client, people["max"])
    url = reverse("password_change")
    wrong = c.post(url, {"old_password": "nope", "new_password1": "x-new-phrase-42",
                         "new_password2": "x-new-phrase-42"})
    assert wrong.status_code == 200 and "incorrectly" in wrong.content.decode()
    ok = c.post(url, {"old_password": "pw-max", "new_password1": "x-new-phrase-42",
                      "new_password2": "x-new-phrase-42"})
    assert ok.status_code == 302 and ok["Location"] == reverse("settings")
    assert c.get(reverse("settings")).status_code == 200  # still signed in
    people["max"].refresh_from_db()
    assert people["max"].check_password("x-new-phrase-42")


def test_nobody_joins_a_team_without_agreeing(client, people, make_user):
    """A second user's report: a team admin added any user to their team and then read that
    user's new sessions. Now the admin only invites; until the user accepts nothing changes
    (their sessions stay out of the team), another user cannot answer for them, declining
    leaves no trace but the audit, and staff still add directly."""
    mallory = make_user("mallory", team="mteam", role="admin")
    mteam = Team.objects.get(name="mteam")
    url = reverse("team_members", args=[mteam.pk])
    assert as_(client, mallory).post(url, {"action": "add", "username": "zoe",
                                           "role": "admin"}).status_code == 302
    invitation = TeamInvitation.objects.get(user=people["zoe"])
    work = session_create(user=people["zoe"], title="zoe's secrets")
    assert work.team_id is None
    assert as_(client, mallory).get(reverse("session_detail", args=[work.pk])).status_code == 404
    answer = reverse("invitation_answer", args=[invitation.pk])
    for other in (mallory, people["max"]):  # nobody answers for zoe
        assert as_(client, other).post(answer, {"answer": "accept"}).status_code == 404
    assert not Membership.objects.filter(user=people["zoe"]).exists()
    zoe = as_(client, people["zoe"])
    page = zoe.get(reverse("settings")).content.decode()
    assert "mteam as admin" in page and "from mallory" in page
    bad = zoe.post(answer, {"answer": "maybe"}, follow=True)
    assert "Accept or Decline" in bad.content.decode()
    assert zoe.post(answer, {"answer": "decline"}).status_code == 302
    assert not TeamInvitation.objects.exists() and not Membership.objects.filter(
        user=people["zoe"]).exists()
    assert zoe.post(answer, {"answer": "accept"}).status_code == 404  # gone
    # staff add directly
    staff = as_(client, people["sam"])
    mteam.memberships.create(user=people["sam"], role="admin")
    assert staff.post(url, {"action": "add", "username": "zoe",
                            "role": "member"}).status_code == 302
    assert Membership.objects.filter(team=mteam, user=people["zoe"]).exists()
