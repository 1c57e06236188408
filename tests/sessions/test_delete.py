"""Deleting a session through the real views (Django test client): owner only (404 for
anyone else, a team admin included), a confirmation page and a CSRF-checked POST, refused
while a turn is busy, the money it cost still counted (/spend/, team spend, caps), its
approvals no longer decidable, its schedules paused and webhooks gone, its workspace removed
without following a link out of it, a second POST of the same delete answered clearly."""

from __future__ import annotations

import html
import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.budgets import budget_spent
from accounts.models import Budget, Team
from accounts.spend import DELETED_SESSIONS, spend_periods, usage_scope
from agents.messages import ToolCall
from agents.policy import Decision
from approvals.models import ApprovalRequest, AuditEntry
from approvals.services import approval_request_create
from schedules.models import Schedule
from schedules.services import SESSION_DELETED, schedule_create
from sessions.events import event_append
from sessions.models import Message, RunEvent, Session, Turn, UsageRecord
from sessions.services import (DELETE_BUSY, DELETE_CHILD, DELETE_GONE, session_create,
                               turn_stop, workspace_path)
from webhooks.models import Webhook
from webhooks.services import webhook_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(make_user, hermes_settings):
    return make_user("alice", team="blue")


@pytest.fixture
def chat(alice):
    session = session_create(user=alice, title="Alice's chat")
    Message.objects.create(session=session, role="user", content="hello there")
    turn = Turn.objects.create(session=session, input_text="hello there",
                               status=Turn.Status.COMPLETED)
    event_append(session_id=session.pk, type="turn.queued", payload={"turn_id": turn.pk})
    return session


def delete_url(session) -> str:
    return reverse("session_delete", args=[session.pk])


def usage(session, usd: str, *, days_ago: int = 0) -> UsageRecord:
    return UsageRecord.objects.create(
        session=session, user=session.owner, team=session.team, provider="anthropic",
        model="claude-sonnet-4-5", input_tokens=1000, output_tokens=100,
        cost_usd=Decimal(usd), created_at=timezone.now() - timedelta(days=days_ago))


def test_owner_confirms_on_a_page_then_the_post_deletes_everything(login, alice, chat):
    client = login(alice)
    page = client.get(delete_url(chat))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Delete “Alice's chat”?" in html.unescape(text)
    assert 'id="delete-confirm"' in text and "csrfmiddlewaretoken" in text
    assert "1 message" in text
    assert Session.objects.filter(pk=chat.pk).exists()  # a GET deletes nothing

    response = client.post(delete_url(chat), follow=True)
    assert response.redirect_chain == [(reverse("session_list"), 302)]
    assert "Deleted “Alice" in response.content.decode()
    assert not Session.objects.filter(pk=chat.pk).exists()
    assert not Message.objects.filter(session_id=chat.pk).exists()
    assert not Turn.objects.filter(session_id=chat.pk).exists()
    assert not RunEvent.objects.filter(session_id=chat.pk).exists()
    assert client.get(reverse("session_detail", args=[chat.pk])).status_code == 404
    entry = AuditEntry.objects.get(action="session.deleted")
    assert entry.detail["session_id"] == chat.pk and entry.detail["deleted_by"] == "alice"
    assert entry.session_id is None  # the row it named is gone; the record stays


def test_the_session_page_and_the_list_link_to_the_confirmation(login, alice, chat):
    client = login(alice)
    assert delete_url(chat) in client.get(reverse("session_detail", args=[chat.pk])
                                          ).content.decode()
    assert delete_url(chat) in client.get(reverse("session_list")).content.decode()


@pytest.mark.parametrize("who", ["stranger", "team_admin", "team_member"])
def test_anyone_but_the_owner_gets_404_like_an_unknown_session(make_user, login, chat, who):
    other = {"stranger": lambda: make_user("mallory"),
             "team_admin": lambda: make_user("boss", team="blue", role="admin"),
             "team_member": lambda: make_user("carol", team="blue")}[who]()
    client = login(other)
    unknown = reverse("session_delete", args=[chat.pk + 1000])
    for method in ("get", "post"):
        theirs = getattr(client, method)(delete_url(chat))
        missing = getattr(client, method)(unknown)
        assert theirs.status_code == missing.status_code == 404
        assert b"Alice" not in theirs.content
    assert Session.objects.filter(pk=chat.pk).exists()


def test_the_delete_post_needs_the_csrf_token(alice, chat):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    assert client.post(delete_url(chat)).status_code == 403
    assert Session.objects.filter(pk=chat.pk).exists()
    page = client.get(delete_url(chat))
    token = page.context["csrf_token"]
    assert client.post(delete_url(chat), {"csrfmiddlewaretoken": str(token)}).status_code == 302
    assert not Session.objects.filter(pk=chat.pk).exists()


def test_a_second_post_of_the_same_delete_says_already_deleted(login, make_user, alice, chat):
    client = login(alice)
    assert client.post(delete_url(chat)).status_code == 302
    again = client.post(delete_url(chat), follow=True)
    assert again.redirect_chain == [(reverse("session_list"), 302)]
    assert DELETE_GONE in again.content.decode()
    # Only to the login that deleted it: anyone else still gets the plain 404.
    assert login(make_user("mallory")).post(delete_url(chat)).status_code == 404


@pytest.mark.parametrize("status", [Turn.Status.QUEUED, Turn.Status.RUNNING,
                                    Turn.Status.AWAITING_APPROVAL, Turn.Status.AWAITING_ANSWER,
                                    Turn.Status.AWAITING_CHILDREN])
def test_refused_while_a_turn_is_busy_and_nothing_changes(login, alice, chat, status):
    Turn.objects.create(session=chat, input_text="work", status=status)
    client = login(alice)
    page = client.get(delete_url(chat)).content.decode()
    assert DELETE_BUSY in page and 'id="delete-confirm"' not in page
    response = client.post(delete_url(chat), follow=True)
    assert response.redirect_chain == [(delete_url(chat), 302)]
    assert DELETE_BUSY in response.content.decode()
    assert Session.objects.filter(pk=chat.pk).exists()
    assert Message.objects.filter(session=chat).count() == 1
    assert not AuditEntry.objects.filter(action="session.deleted").exists()


def test_refused_while_a_worker_holds_the_turn_lease(login, alice, chat):
    Session.objects.filter(pk=chat.pk).update(
        lease_owner="worker-1", lease_expires_at=timezone.now() + timedelta(seconds=60))
    login(alice).post(delete_url(chat))
    assert Session.objects.filter(pk=chat.pk).exists()


def test_a_busy_child_agent_blocks_its_parents_delete_and_a_child_is_not_deleted_alone(
        login, alice, chat):
    child = Session.objects.create(owner=alice, team=chat.team, parent=chat, provider="x",
                                   model="y", title="child")
    Turn.objects.create(session=child, input_text="sub-task", status=Turn.Status.RUNNING)
    client = login(alice)
    client.post(delete_url(chat))
    assert Session.objects.filter(pk__in=[chat.pk, child.pk]).count() == 2
    response = client.post(delete_url(child), follow=True)
    assert DELETE_CHILD in html.unescape(response.content.decode())
    Turn.objects.filter(session=child).update(status=Turn.Status.COMPLETED)
    client.post(delete_url(chat))
    assert not Session.objects.filter(pk__in=[chat.pk, child.pk]).exists()


def test_money_spent_stays_counted_on_spend_team_spend_and_caps(login, make_user, alice, chat):
    team = Team.objects.get(name="blue")
    usage(chat, "1.25")
    usage(chat, "0.75")
    # A session of no team counts toward its owner's teams (accounts/spend.py team_usage).
    personal = session_create(user=alice, title="personal", team=None)
    Session.objects.filter(pk=personal.pk).update(team=None)
    personal.refresh_from_db()
    usage(personal, "0.50")
    caps = [Budget.objects.create(scope="team", team=team, period="month",
                                  limit_usd=Decimal("10")),
            Budget.objects.create(scope="user", user=alice, period="day",
                                  limit_usd=Decimal("10"))]
    now = timezone.now()

    def figures():
        return (spend_periods(usage_scope(user=alice), now=now),
                spend_periods(usage_scope(team=team), now=now),
                [budget_spent(b, now=now) for b in caps])

    before = figures()
    assert before[2] == [Decimal("2.50"), Decimal("2.50")]
    client = Client()
    client.force_login(alice, backend="django.contrib.auth.backends.ModelBackend")
    for session in (chat, personal):
        assert client.post(delete_url(session)).status_code == 302
    assert not Session.objects.filter(pk__in=[chat.pk, personal.pk]).exists()
    assert figures() == before
    assert UsageRecord.objects.filter(session__isnull=True).count() == 3
    # /spend/ (the user's, and the team's for its admin) shows it as "Deleted sessions".
    boss = login(make_user("boss", team="blue", role="admin"))
    for viewer, query in ((client, {}), (boss, {"team": team.pk})):
        page = viewer.get(reverse("spend"), query)
        assert page.status_code == 200
        text = page.content.decode()
        assert DELETED_SESSIONS in text and "2.50" in text


def test_a_pending_approval_of_the_session_cannot_be_decided_after_the_delete(
        login, make_user, alice, chat):
    admin = make_user("boss", team="blue", role="admin")
    turn = Turn.objects.create(session=chat, input_text="clean",
                               status=Turn.Status.AWAITING_APPROVAL)
    [request] = approval_request_create(
        session=chat, turn=turn, workspace="/ws",
        pending=[(ToolCall(id="call_1", name="terminal",
                           arguments=json.dumps({"command": "rm -rf build"})),
                  Decision(verdict="ask", rule="dangerous", reason="deletes a tree",
                           risk_class="destructive", normalized="rm -rf build"))])
    client = login(alice)
    client.post(delete_url(chat))  # refused: the turn waits for the approval
    assert ApprovalRequest.objects.get(pk=request.pk).state == ApprovalRequest.State.PENDING
    assert turn_stop(session=chat) is True
    assert client.post(delete_url(chat)).status_code == 302
    assert not ApprovalRequest.objects.filter(pk=request.pk).exists()
    decide = login(admin).post(reverse("approval_decide", args=[request.pk]),
                               {"choice": "once"})
    assert decide.status_code == 404
    assert request.pk not in [r.pk for r in ApprovalRequest.objects.filter(
        state=ApprovalRequest.State.PENDING)]


def test_schedules_are_paused_and_webhooks_deleted_and_the_page_says_so(login, alice, chat):
    schedule = schedule_create(user=alice, name="nightly", prompt="summarise", kind="cron",
                               cron_expression="0 3 * * *", target="session", session=chat)
    hook = webhook_create(user=alice, session=chat, name="ci")
    client = login(alice)
    page = client.get(delete_url(chat)).content.decode()
    assert "Schedule “nightly”" in page and "paused" in page
    assert "Webhook “ci”" in page and "deleted" in page
    assert client.post(delete_url(chat)).status_code == 302
    schedule = Schedule.objects.select_related("periodic_task").get(pk=schedule.pk)
    assert schedule.session_id is None and not schedule.enabled
    assert schedule.paused_reason == SESSION_DELETED
    detail = client.get(reverse("schedule_detail", args=[schedule.pk])).content.decode()
    assert SESSION_DELETED in detail
    assert not Webhook.objects.filter(pk=hook.pk).exists()
    inbound = Client().post(reverse("webhook_inbound", args=[hook.token]), data="{}",
                            content_type="application/json")
    assert inbound.status_code == 404


def test_the_workspace_is_removed_but_a_symlinked_outside_file_survives(
        login, alice, chat, tmp_path, django_capture_on_commit_callbacks):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("keep me")
    (outside / "dir").mkdir()
    (outside / "dir" / "inner.txt").write_text("keep me too")
    ws = workspace_path(chat)
    (ws / "notes.txt").write_text("mine")
    deep = ws / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "file.txt").write_text("x")
    (ws / "link-to-file").symlink_to(outside / "secret.txt")
    (ws / "a" / "link-to-dir").symlink_to(outside / "dir")
    (ws / "dangling").symlink_to(tmp_path / "nowhere")
    with django_capture_on_commit_callbacks(execute=True):
        assert login(alice).post(delete_url(chat)).status_code == 302
    assert not ws.exists() and not ws.is_symlink()
    assert (outside / "secret.txt").read_text() == "keep me"
    assert (outside / "dir" / "inner.txt").read_text() == "keep me too"


def test_a_workspace_that_is_itself_a_link_loses_the_link_not_the_target(
        login, alice, chat, tmp_path, django_capture_on_commit_callbacks):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "data.txt").write_text("keep")
    ws = workspace_path(chat)
    for entry in ws.iterdir():
        entry.unlink()
    ws.rmdir()
    ws.symlink_to(target, target_is_directory=True)
    with django_capture_on_commit_callbacks(execute=True):
        assert login(alice).post(delete_url(chat)).status_code == 302
    assert not ws.is_symlink()
    assert (target / "data.txt").read_text() == "keep"


def test_the_admin_offers_no_delete(make_user, login, chat):
    staff = make_user("root", staff=True)
    staff.is_superuser = True
    staff.save()
    client = login(staff)
    page = client.get(reverse("admin:agent_sessions_session_change", args=[chat.pk]))
    assert page.status_code == 200
    assert client.post(reverse("admin:agent_sessions_session_delete", args=[chat.pk]),
                       {"post": "yes"}).status_code == 403
    assert Session.objects.filter(pk=chat.pk).exists()
