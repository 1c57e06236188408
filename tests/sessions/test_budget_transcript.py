"""A turn stopped by a budget and resumed, drawn on a reload: the budget warning the live
page showed is kept where it showed (after the message stored before it, with the live DOM
id), and the turn's usage line comes once, after the resumed reply (the live page moves it
there too: static/chat.js place). Real turns on the simulator, real caps."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounts.models import Team
from accounts.services import budget_set, turn_budget_resume
from sessions.models import RunEvent, Turn, UsageRecord
from sessions.rendering import transcript_context
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_reload_after_a_budget_stop_and_resume_keeps_the_warning_and_ends_with_usage(
        make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "BUDGET_WAIT_SECONDS": 0.5}
    boss, mia = make_user("boss", team="acme", role="admin"), make_user("mia", team="acme")
    team = Team.objects.get(name="acme")
    budget_set(actor=boss, scope="team", team=team, period="day", limit="0.05")
    UsageRecord.objects.create(session=session_create(user=boss), user=boss, team=team,
                               provider="simulator", model="hermes-simulator",
                               cost_usd=Decimal("0.048"))  # past 80%: the first call warns
    session = session_create(user=mia)
    turn_start(session=session, user=mia, text="list the files and read README.md")
    turn_run_task.apply(args=[session.pk])
    turn = Turn.objects.get(session=session)
    assert turn.status == Turn.Status.BUDGET_BLOCKED
    budget_set(actor=boss, scope="team", team=team, period="day", limit="5")
    assert turn_budget_resume(session=session, user=mia) == turn.pk
    turn_run_task.apply(args=[session.pk])
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.COMPLETED

    warning = RunEvent.objects.get(session=session, type="budget.warning")
    items = transcript_context(session=session, user=mia)["items"]
    kinds = [(i["kind"], i.get("dom_id") or (i.get("item") or {}).get("dom_id")
              or (i.get("usage") or {}).get("dom_id")) for i in items]
    notice = ("notice", f"event-{warning.seq}")
    assert notice in kinds, kinds
    assert "budget of $0.05/day" in items[kinds.index(notice)]["text"]
    # the warning came after the user's message, before the resumed reply
    assert kinds[0][0] == "message" and kinds.index(notice) > 0
    assert kinds.index(notice) < len(kinds) - 2 and kinds[-2][0] == "message"
    # one usage line, the turn's last item
    assert [k for k in kinds if k[0] == "usage"] == [("usage", f"usage-{turn.pk}")]
    assert kinds[-1] == ("usage", f"usage-{turn.pk}")
