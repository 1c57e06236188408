"""The chat's HTTP edges fixed for issue 14: an htmx request after logout is sent to the
login page with HX-Redirect (never the login page drawn inside the chat), and Stop on a turn
waiting for an approval cancels the request and ends the turn."""

from __future__ import annotations

import json
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest

from agents.messages import ToolCall
from agents.policy import Decision
from approvals.models import ApprovalRequest
from approvals.services import approval_request_create
from sessions.models import RunEvent, Turn, UsageRecord
from sessions.services import session_create, turn_stop

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(make_user, hermes_settings):
    return session_create(user=make_user("alice"), title="Alice's chat")


def test_htmx_post_after_logout_is_a_401_with_hx_redirect(client, chat):
    page = f"http://testserver/sessions/{chat.pk}/"
    response = client.post(f"/sessions/{chat.pk}/messages/", {"text": "hello"},
                           headers={"HX-Request": "true", "HX-Current-URL": page})
    assert response.status_code == 401
    target = urlsplit(response["HX-Redirect"])
    assert target.path == "/login/"
    assert parse_qs(target.query)["next"] == [f"/sessions/{chat.pk}/"]
    assert Turn.objects.count() == 0


def test_hx_redirect_never_points_at_another_host(client, chat):
    response = client.post(f"/sessions/{chat.pk}/messages/", {"text": "hello"},
                           headers={"HX-Request": "true",
                                    "HX-Current-URL": "https://evil.example/phish/"})
    assert parse_qs(urlsplit(response["HX-Redirect"]).query)["next"] == ["/"]


def test_plain_posts_still_get_the_ordinary_redirect(client, chat):
    response = client.post(f"/sessions/{chat.pk}/messages/", {"text": "hello"})
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_stop_while_waiting_for_an_approval_cancels_it(chat):
    turn = Turn.objects.create(session=chat, input_text="clean up",
                               status=Turn.Status.AWAITING_APPROVAL)
    approval_request_create(
        session=chat, turn=turn, workspace="/ws",
        pending=[(ToolCall(id="call_1", name="terminal",
                           arguments=json.dumps({"command": "rm -rf build"})),
                  Decision(verdict="ask", rule="dangerous", reason="deletes a tree",
                           risk_class="destructive", normalized="rm -rf build"))])
    assert turn_stop(session=chat) is True
    turn.refresh_from_db()
    chat.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED and turn.finished_at is not None
    assert ApprovalRequest.objects.get().state == ApprovalRequest.State.CANCELLED
    assert RunEvent.objects.filter(session=chat, type="turn.cancelled").count() == 1
    assert chat.stop_requested is False  # no worker would ever clear it
    assert turn_stop(session=chat) is False  # nothing left to stop


def test_a_renamed_row_keeps_its_cost_and_says_seconds_not_minutes(client, chat):
    """The session list's rename swaps the row in place (htmx): it showed no cost until a
    reload. The row's time reads "… seconds ago"/"now" under a minute, never "0 minutes"."""
    UsageRecord.objects.create(session=chat, user=chat.owner, provider="simulator",
                               model="hermes-simulator", cost_usd=Decimal("0.0125"))
    client.force_login(chat.owner)
    # timesince joins "0" and "minutes" with a no-break space
    listing = client.get("/").content.decode().replace("\xa0", " ")
    assert '<span class="session-cost">$0.0125</span>' in listing
    assert "0 minutes" not in listing
    response = client.post(f"/sessions/{chat.pk}/rename/", {"title": "Renamed"},
                           headers={"HX-Request": "true"})
    row = response.content.decode().replace("\xa0", " ")
    assert response.status_code == 200 and "Renamed" in row
    assert '<span class="session-cost">$0.0125</span>' in row
    assert "0 minutes" not in row and ("seconds ago" in row or "now" in row)
