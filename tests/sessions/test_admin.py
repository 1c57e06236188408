"""The Django admin for conversations: staff see every page (with the read-only transcript
inline and search over content); everyone else is sent to the admin login."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from sessions.models import Message, RunEvent, Turn, UsageRecord
from sessions.services import session_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(make_user, hermes_settings):
    owner = make_user("alice", team="blue")
    session = session_create(user=owner, title="Quarterly report")
    Message.objects.create(session=session, role="user", content="find the walrus numbers")
    Message.objects.create(session=session, role="assistant", content="summarised text",
                           sent_content="exact bytes", active=False, compacted=True)
    turn = Turn.objects.create(session=session, input_text="x", status=Turn.Status.COMPLETED)
    RunEvent.objects.create(session=session, seq=1, type="turn.started", payload={})
    UsageRecord.objects.create(session=session, turn=turn, user=owner, provider="simulator",
                               model="sim", input_tokens=10, created_at=timezone.now())
    return session


PAGES = ["session", "message", "turn", "runevent", "usagerecord"]


@pytest.mark.parametrize("model", PAGES)
def test_admin_changelists_render_for_staff(make_user, login, chat, model, django_user_model):
    root = make_user("root", staff=True)
    django_user_model.objects.filter(pk=root.pk).update(is_superuser=True)
    response = login(root).get(reverse(f"admin:agent_sessions_{model}_changelist"))
    assert response.status_code == 200
    assert "Quarterly report" in response.content.decode()


def test_session_change_page_shows_transcript_inline_flags_and_readonly_breaker(
        make_user, login, chat, django_user_model):
    root = make_user("root", staff=True)
    django_user_model.objects.filter(pk=root.pk).update(is_superuser=True)
    page = login(root).get(reverse("admin:agent_sessions_session_change", args=[chat.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Transcript" in html and "find the walrus numbers" in html
    assert "Has sidecar" in html and "summarised text" in html
    # Breaker state is shown, not editable.
    assert 'name="compaction_ineffective_count"' not in html
    assert "Compaction ineffective count" in html


def test_session_search_covers_message_content_and_filters_render(make_user, login, chat,
                                                                  django_user_model):
    root = make_user("root", staff=True)
    django_user_model.objects.filter(pk=root.pk).update(is_superuser=True)
    client = login(root)
    url = reverse("admin:agent_sessions_session_changelist")
    hit = client.get(url, {"q": "walrus"}).content.decode()
    miss = client.get(url, {"q": "narwhal"}).content.decode()
    assert "Quarterly report" in hit and "Quarterly report" not in miss
    filtered = client.get(url, {"cache_warning__exact": "0", "owner__id__exact": chat.owner_id})
    assert filtered.status_code == 200 and "Quarterly report" in filtered.content.decode()


def test_admin_redirects_non_staff_to_admin_login(make_user, login, chat):
    client = login(make_user("bob"))
    for model in PAGES:
        response = client.get(reverse(f"admin:agent_sessions_{model}_changelist"))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))


def test_admin_index_shows_english_plurals(make_user, login, django_user_model):
    """Django's default plural adds an "s" ("Audit entrys", "Webhook deliverys"); the index
    must list every model of the apps under its real plural."""
    import re

    from django.contrib import admin

    root = make_user("root", staff=True)
    django_user_model.objects.filter(pk=root.pk).update(is_superuser=True)
    html = login(root).get(reverse("admin:index")).content.decode()
    assert "Audit entries" in html and "Webhook deliveries" in html
    assert "entrys" not in html.lower() and "deliverys" not in html.lower()
    ours = ("accounts", "approvals", "agent_sessions", "schedules", "webhooks")
    for model in admin.site._registry:
        plural = str(model._meta.verbose_name_plural)
        if model._meta.app_label in ours:
            # a consonant before "ys" is the default plural of a "-y" noun
            assert not re.search(r"[^aeiou]ys$", plural), model._meta.label
            assert plural[:1].upper() + plural[1:] in html, plural
