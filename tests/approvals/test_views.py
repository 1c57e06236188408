"""Approval pages over HTTP: the queue scoped to the acting user, deciding from a card
(HTMX and plain form), rules with hit counts, the bypass toggle, CSRF, and errors shown as
messages (never a 500)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalRule, AuditEntry
from approvals.rendering import approval_card_html, approval_event_html
from approvals.services import approval_decide, rule_hit
from sessions.models import Session

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_queue_shows_pending_requests_only_to_the_owner_and_team_admins(people, session_a,
                                                                       login, ask):
    session, turn = session_a
    row = ask(session, turn, command="rm -rf ./build")
    for name, sees in (("alice", True), ("carol", True), ("bob", False), ("dave", False)):
        page = login(people[name]).get(reverse("approval_queue"))
        assert page.status_code == 200
        html = page.content.decode()
        assert (f'id="approval-{row.pk}"' in html) is sees, name
        assert ("rm -rf ./build" in html) is sees, name
        assert (reverse("approval_decide", args=[row.pk]) in html) is sees, name


def test_deciding_from_the_card_swaps_in_the_outcome(people, session_a, login, ask):
    session, turn = session_a
    row = ask(session, turn)
    client = login(people["carol"])
    response = client.post(reverse("approval_decide", args=[row.pk]),
                           {"choice": "deny", "reason": "not on prod"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="approval-{row.pk}"' in html and 'data-state="denied"' in html
    assert "by carol" in html and "not on prod" in html
    again = client.post(reverse("approval_decide", args=[row.pk]), {"choice": "once"}, **HTMX)
    assert again.status_code == 400
    assert "already denied by carol" in again.content.decode()


def test_a_plain_form_decision_redirects_with_a_message(people, session_a, login, ask):
    session, turn = session_a
    row = ask(session, turn)
    client = login(people["alice"])
    response = client.post(reverse("approval_decide", args=[row.pk]),
                           {"decision": "approve", "scope": "session"}, follow=True)
    assert response.redirect_chain[-1] == (reverse("approval_queue"), 302)
    assert ApprovalRequest.objects.get(pk=row.pk).scope == "session"
    assert f"Request #{row.pk} approved." in response.content.decode()
    bad = client.post(reverse("approval_decide", args=[row.pk]), {"choice": "sometimes"},
                      follow=True)
    assert bad.status_code == 200
    assert "Choose approve once" in bad.content.decode()


def test_admin_only_requests_show_why_the_owner_cannot_approve(people, session_a, login, ask):
    from accounts.models import Team

    Team.objects.filter(name="team-a").update(admin_only_risk_classes=["destructive"])
    session, turn = session_a
    row = ask(session, turn, risk_class="destructive")
    client = login(people["alice"])
    card = approval_card_html(row, people["alice"])
    assert 'value="once"' not in card and 'value="deny"' in card and "team admin" in card
    response = client.post(reverse("approval_decide", args=[row.pk]), {"choice": "once"},
                           **HTMX)
    assert response.status_code == 400 and "team admin" in response.content.decode()
    assert ApprovalRequest.objects.get(pk=row.pk).state == "pending"
    assert 'value="once"' in approval_card_html(row, people["carol"])


def test_protected_file_cards_never_offer_always(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn, tool="write_file", rule="protected_file",
              arguments='{"path": "CLAUDE.md", "content": "x"}')
    card = approval_card_html(row, people["alice"])
    assert 'value="once"' in card and 'value="always"' not in card
    assert 'value="always"' in approval_card_html(ask(session, turn), people["alice"])


def test_socket_cards_render_only_for_users_who_may_see_them(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn)
    payload = {"approval": {"id": row.pk}}
    assert f'id="approval-{row.pk}"' in approval_event_html(user=people["carol"],
                                                             payload=payload,
                                                             csrf_token="t" * 32)
    assert approval_event_html(user=people["bob"], payload=payload) == ""
    assert approval_event_html(user=people["alice"], payload={"approval": {}}) == ""


def test_posts_without_a_csrf_token_are_refused(people, session_a, ask):
    session, turn = session_a
    row = ask(session, turn)
    client = Client(enforce_csrf_checks=True)
    client.force_login(people["alice"], backend="django.contrib.auth.backends.ModelBackend")
    for url, data in ((reverse("approval_decide", args=[row.pk]), {"choice": "once"}),
                      (reverse("session_bypass", args=[session.pk]), {"enabled": "on"})):
        assert client.post(url, data).status_code == 403
    assert ApprovalRequest.objects.get(pk=row.pk).state == "pending"
    assert Session.objects.get(pk=session.pk).bypass_approvals is False


def test_rules_page_lists_hit_counts_and_revokes(people, session_a, login, ask):
    session, turn = session_a
    row = ask(session, turn, command="make deploy")
    approval_decide(user=people["alice"], approval_id=row.pk, choice="always")
    rule = ApprovalRule.objects.get()
    for _ in range(3):
        rule_hit(rule.pk)
    html = login(people["carol"]).get(reverse("approval_rules")).content.decode()
    assert f'id="rule-{rule.pk}"' in html and '<td class="hits" data-label="Hits">3</td>' in html
    assert f'id="rule-{rule.pk}"' not in login(people["bob"]).get(
        reverse("approval_rules")).content.decode()
    assert login(people["bob"]).post(
        reverse("approval_rule_revoke", args=[rule.pk])).status_code == 404
    response = login(people["carol"]).post(reverse("approval_rule_revoke", args=[rule.pk]),
                                           follow=True)
    assert response.redirect_chain[-1] == (reverse("approval_rules"), 302)
    assert ApprovalRule.objects.get(pk=rule.pk).revoked is True
    assert f"Rule #{rule.pk} revoked." in response.content.decode()


@pytest.mark.parametrize("name,status", [("carol", 404), ("bob", 404)])
def test_only_the_owner_can_toggle_bypass(people, session_a, login, name, status):
    session, _turn = session_a
    response = login(people[name]).post(reverse("session_bypass", args=[session.pk]),
                                        {"enabled": "on"})
    assert response.status_code == status
    assert Session.objects.get(pk=session.pk).bypass_approvals is False
    assert not AuditEntry.objects.exists()


def test_owner_bypass_toggle_warns_and_is_audited(people, session_a, login):
    session, _turn = session_a
    client = login(people["alice"])
    on = client.post(reverse("session_bypass", args=[session.pk]), {"enabled": "on"}, **HTMX)
    assert on.status_code == 200
    assert "Approval bypass is ON" in on.content.decode()
    assert Session.objects.get(pk=session.pk).bypass_approvals is True
    off = client.post(reverse("session_bypass", args=[session.pk]), {})
    assert off.status_code == 302
    assert off.url == reverse("session_detail", kwargs={"session_id": session.pk})
    assert Session.objects.get(pk=session.pk).bypass_approvals is False
    assert list(AuditEntry.objects.filter(action="session.bypass").order_by("id")
                .values_list("detail__enabled", flat=True)) == [True, False]
