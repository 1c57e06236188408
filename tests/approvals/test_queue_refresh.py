"""Deciding from the review queue page leaves nothing stale: the HTMX answer is the whole
queue region (count, pending, recent decisions) retargeted over the old one, plus the
header's approvals link out of band. From the chat page the answer stays the single card."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest

pytestmark = pytest.mark.django_db


def _htmx_from(path: str) -> dict:
    return {"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": f"http://testserver{path}"}


def _section(html: str, heading_id: str) -> str:
    """The HTML of the <section> labelled by ``heading_id``."""
    return re.search(rf'<section aria-labelledby="{heading_id}">(.*?)</section>', html,
                     re.S).group(1)


def test_deny_from_the_queue_moves_the_card_and_updates_count_and_badge(people, session_a,
                                                                        login, ask):
    session, turn = session_a
    first = ask(session, turn, command="rm -rf ./build")
    second = ask(session, turn, command="rm -rf ./dist")
    client = login(people["alice"])
    before = client.get(reverse("approval_queue")).content.decode()
    assert "Pending (2)" in before and "No decisions yet." in before
    response = client.post(reverse("approval_decide", args=[first.pk]),
                           {"choice": "deny", "reason": "not now"},
                           **_htmx_from(reverse("approval_queue")))
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#approval-queue"
    assert response["HX-Reswap"] == "outerHTML"
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="approval-queue"')
    pending, recent = _section(html, "pending-h"), _section(html, "recent-h")
    assert "Pending (1)" in pending
    assert f'id="approval-{second.pk}"' in pending and f'id="approval-{first.pk}"' not in pending
    assert f'id="approval-{first.pk}"' in recent and 'data-state="denied"' in recent
    assert "No decisions yet." not in html
    badge = re.search(r'<a [^>]*id="approvals-link"[^>]*>.*?</a>', html, re.S).group(0)
    assert 'hx-swap-oob="true"' in badge and '<span class="badge" id="approvals-badge"' in badge
    assert ">1</span>" in badge


def test_last_approval_from_the_queue_empties_pending_and_drops_the_badge(people, session_a,
                                                                         login, ask):
    session, turn = session_a
    row = ask(session, turn)
    client = login(people["alice"])
    html = client.post(reverse("approval_decide", args=[row.pk]), {"choice": "once"},
                       **_htmx_from(reverse("approval_queue") + "?x=1")).content.decode()
    assert "Pending (0)" in html and "Nothing is waiting for a decision." in html
    assert f'id="approval-{row.pk}"' in _section(html, "recent-h")
    assert 'id="approvals-badge"' not in html and 'id="approvals-link"' in html
    assert ApprovalRequest.objects.get(pk=row.pk).state == "approved"


def test_an_error_from_the_queue_stays_on_its_card_in_the_region(people, session_a, login,
                                                                 ask):
    session, turn = session_a
    row = ask(session, turn)
    client = login(people["alice"])
    response = client.post(reverse("approval_decide", args=[row.pk]), {"choice": "sometimes"},
                           **_htmx_from(reverse("approval_queue")))
    assert response.status_code == 400 and response["HX-Retarget"] == "#approval-queue"
    card = re.search(rf'<article class="approval-card" id="approval-{row.pk}".*?</article>',
                     response.content.decode(), re.S).group(0)
    assert "Choose approve once" in card


def test_from_the_chat_page_the_answer_is_still_the_single_card(people, session_a, login,
                                                                ask):
    session, turn = session_a
    row = ask(session, turn)
    client = login(people["alice"])
    chat = reverse("session_detail", args=[session.pk])
    response = client.post(reverse("approval_decide", args=[row.pk]), {"choice": "deny"},
                           **_htmx_from(chat))
    assert response.status_code == 200 and "HX-Retarget" not in response
    html = response.content.decode()
    assert html.lstrip().startswith(f'<article class="approval-card" id="approval-{row.pk}"')
    assert "approval-queue" not in html and 'data-state="denied"' in html
