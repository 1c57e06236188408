"""Short text people or the model choose and other people read (a session's title, a team's
name) never reaches a page with its bidi or control characters raw (sessions/visible.py
VisibleCharField; the approval card's tool name and usernames through visible_html). A title
"invoice⟨U+202E⟩fdp.exe" drawn raw reads "invoiceexe.pdf": the reviewer would be fooled
about which session an approval belongs to.

Every title is set the way a user sets it (the Rename form, a first message, a staff
member's team form) and every page is read with the test client."""

from __future__ import annotations

import json
import re

import pytest
from django.apps import apps
from django.db import connection

from accounts.membership import team_create
from accounts.models import Membership, Team
from sessions.models import RunEvent, Session, UsageRecord
from sessions.services import session_create, turn_start
from sessions.visible import visible_line, visible_rows_migration

pytestmark = pytest.mark.django_db(transaction=True)

RLO = "\u202e"
SPOOF = f"invoice{RLO}fdp.exe"
SHOWN = "invoice⟨U+202E⟩fdp.exe"


def assert_safe(page: str, *, shown: str = SHOWN) -> None:
    assert RLO not in page
    assert shown in page


def test_a_renamed_title_is_escaped_on_every_page_that_shows_it(people, session_a, login,
                                                               ask, make_user):
    session, turn = session_a
    alice, carol = people["alice"], people["carol"]
    client = login(alice)
    assert client.post(f"/sessions/{session.pk}/rename/", {"title": SPOOF}).status_code == 302
    session.refresh_from_db()
    assert session.title == SHOWN  # stored visible-safe
    event = RunEvent.objects.filter(session=session, type="session.updated").last()
    assert event.payload["title"] == SHOWN  # what static/chat.js draws live
    approval = ask(session, turn)
    UsageRecord.objects.create(session=session, user=alice, team=session.team,
                               provider="simulator", model="sim-1", cost_usd=1)
    pages = {
        "detail (header, sidebar)": f"/sessions/{session.pk}/",
        "list": "/",
        "sidebar": "/sidebar/",
        "search": "/search/?q=invoice",
        "approvals": "/approvals/",
        "arguments": f"/approvals/{approval.pk}/arguments/",
        "spend": "/spend/",
        "events": f"/sessions/{session.pk}/events/",
        "export": f"/sessions/{session.pk}/export.json",
    }
    for name, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, name
        page = response.content.decode()
        if url.endswith((".json", "/events/")):
            page = json.dumps(json.loads(page), ensure_ascii=False)
        assert RLO not in page, name
        assert SHOWN in page or "session.updated" not in page, name
    # a team admin reviewing the approval, and staff in the Django admin
    assert_safe(login(carol).get("/approvals/").content.decode())
    assert_safe(login(carol).get(f"/sessions/{session.pk}/").content.decode())
    staff = make_user("root", staff=True)
    staff.is_superuser = True
    staff.save()
    assert_safe(login(staff).get("/admin/agent_sessions/session/").content.decode())


def test_a_title_from_the_first_message_is_escaped(people, login, hermes_settings):
    alice = people["alice"]
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text=f"pay {SPOOF} \x1b[2K now")
    session.refresh_from_db()
    assert session.title == f"pay {SHOWN} ⟨ESC⟩[2K now"
    event = RunEvent.objects.filter(session=session, type="session.updated").get()
    assert event.payload["title"] == session.title
    page = login(alice).get(f"/sessions/{session.pk}/").content.decode()
    # The message itself is the transcript, shown as sent (not short display text; out of
    # this fix's scope): every other place on the page carries the title escaped.
    outside = re.sub(r'<article class="msg msg-user.*?</article>', "", page, flags=re.S)
    assert_safe(outside)
    assert "\x1b" not in outside
    assert f"<title>pay {SHOWN}" in page and f'id="session-title"' in page


def test_a_team_name_is_escaped(people, login, make_user):
    staff = make_user("root", staff=True)
    team = team_create(actor=staff, name=f"ops{RLO}nimda", admin_username="carol")
    team.refresh_from_db()
    assert team.name == "ops⟨U+202E⟩nimda"
    Membership.objects.create(user=people["alice"], team=team)
    for user, url in ((people["alice"], "/settings/"), (people["carol"], f"/spend/?team={team.pk}"),
                      (people["carol"], f"/settings/teams/{team.pk}/members/"),
                      (staff, "/people/")):
        response = login(user).get(url)
        assert response.status_code == 200, url
        assert_safe(response.content.decode(), shown="ops⟨U+202E⟩nimda")
    # QuerySet.update goes through the field too
    Team.objects.filter(pk=team.pk).update(name=f"x{RLO}y")
    assert Team.objects.get(pk=team.pk).name == "x⟨U+202E⟩y"


def test_rows_stored_before_the_fix_are_escaped_by_the_migration(people, session_a, login):
    session, _ = session_a
    with connection.cursor() as cursor:  # a row as an older version stored it
        cursor.execute(f'UPDATE "{Session._meta.db_table}" SET "title" = %s WHERE "id" = %s',
                       [SPOOF, session.pk])
    assert Session.objects.get(pk=session.pk).title == SPOOF
    visible_rows_migration("agent_sessions", "session", "title")(apps, None)
    assert Session.objects.get(pk=session.pk).title == SHOWN
    assert_safe(login(people["alice"]).get(f"/sessions/{session.pk}/").content.decode())


def test_a_long_title_is_cut_whole_escapes_only():
    assert visible_line("a" * 195 + RLO + "b", 200) == "a" * 195  # never "⟨U+20"
    assert visible_line("a" * 191 + RLO + "b", 200) == "a" * 191 + "⟨U+202E⟩b"
    assert visible_line("ab" + RLO, None) == "ab⟨U+202E⟩"
    assert visible_line("plain ⟨U+20 text", 11) == "plain ⟨U+20"  # typed, not an escape
