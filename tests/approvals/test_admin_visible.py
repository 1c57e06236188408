"""The Django admin shows approval commands the way the approval card does: hidden and
control characters (U+202E, U+2066, CR, ESC...) as marked visible escapes (sessions/visible.py),
never raw, so a staff member reads what ran; long commands are whole and wrapped on the
detail page and cut with "…" in the change list. Requests are made the way the runner makes
them (the ``ask`` fixture: approval_request_create); pages are read with the test client as
a superuser."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.admin import LIST_COMMAND_CHARS
from approvals.models import ApprovalRule, AuditEntry
from approvals.services import approval_decide
from sessions.visible import HIDDEN_WARNING, visible_html

pytestmark = pytest.mark.django_db

HIDDEN_COMMAND = "echo ok\u202e dm- mr\u2066 x\u2069\u200f\rrm -rf ~ \x1b[2K"
RAW = ("\u202e", "\u2066", "\u2069", "\u200f", "\x1b", "\r")


@pytest.fixture
def admin_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root")
    client.force_login(root, backend="django.contrib.auth.backends.ModelBackend")
    return client


def _page(client, name: str, *args) -> str:
    response = client.get(reverse(f"admin:approvals_{name}", args=args))
    assert response.status_code == 200
    return response.content.decode()


def test_the_admin_shows_hidden_characters_of_a_command_visibly(admin_client, session_a, ask,
                                                                people):
    session, turn = session_a
    row = ask(session, turn, command=HIDDEN_COMMAND)
    assert row.command == HIDDEN_COMMAND  # stored (and run) unchanged
    approval_decide(user=people["alice"], approval_id=row.pk, choice="always")
    rule = ApprovalRule.objects.get()
    audit = AuditEntry.objects.filter(approval=row).first()
    pages = {
        "list": _page(admin_client, "approvalrequest_changelist"),
        "detail": _page(admin_client, "approvalrequest_change", row.pk),
        "rule list": _page(admin_client, "approvalrule_changelist"),
        "rule detail": _page(admin_client, "approvalrule_change", rule.pk),
        "audit detail": _page(admin_client, "auditentry_change", audit.pk),
    }
    for name, page in pages.items():
        for char in RAW:
            assert char not in page, (name, hex(ord(char)))
        assert '<span class="ctl" title="hidden character">⟨U+202E⟩</span>' in page, name
        assert HIDDEN_WARNING in page, name
    assert str(visible_html(HIDDEN_COMMAND)) in pages["detail"]  # the whole command
    assert "⟨U+2066⟩" in pages["rule detail"] and "⟨ESC⟩" in pages["list"]
    assert "approvals_admin.css" in pages["detail"]  # the wrapping style (CSP: no inline)


def test_a_long_command_is_whole_and_wrapped_on_the_detail_and_cut_in_the_list(
        admin_client, session_a, ask):
    session, turn = session_a
    command = "printf '%s\\n' " + " ".join(f"argument-{n}" for n in range(200)) + " END-MARK"
    row = ask(session, turn, command=command)
    listed = _page(admin_client, "approvalrequest_changelist").replace("&#x27;", "'")
    assert command[:LIST_COMMAND_CHARS] + "…" in listed and "END-MARK" not in listed
    detail = _page(admin_client, "approvalrequest_change", row.pk)
    assert f'<pre class="admin-command">{command}</pre>' in detail.replace("&#x27;", "'")
