"""The one money formatter (accounts/money.py usd) and its JS twin (static/money.js): the
same table through both, and the budget sentences a user reads written with it, so a cap and
a spend never contradict each other ("$0.13" cap beside "$0.12 spent (99%)")."""

from __future__ import annotations

import json
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from accounts.models import Budget, Team
from accounts.money import usd
from accounts.services import budget_set
from sessions.models import RunEvent, Turn, UsageRecord
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

ROOT = Path(__file__).resolve().parents[2]
D = Decimal

TABLE = [
    (None, "—"), ("", "—"), ("0", "$0.00"), ("0E-9", "$0.00"), ("20", "$20.00"),
    ("0.125", "$0.125"), ("0.1249", "$0.1249"), ("0.12499999", "$0.1249"),
    ("0.1250", "$0.125"), ("0.12", "$0.12"), ("0.0042", "$0.0042"), ("0.004200000", "$0.0042"),
    ("0.019999", "$0.0199"), ("0.0001", "$0.0001"), ("0.000012345", "$0.000012"),
    ("0.00001", "$0.000010"), ("0.000000001", "$0.0000000010"), ("1234.5", "$1,234.50"),
    ("1000000", "$1,000,000.00"), ("-0.125", "-$0.125"), ("3.999999999", "$3.9999"),
]


@pytest.mark.parametrize("amount, text", TABLE)
def test_usd_shows_exact_caps_and_never_rounds_a_spend_up(amount, text):
    assert usd(amount if amount is None or amount == "" else D(amount)) == text
    assert usd(amount) == text  # the string a payload carries reads the same


def test_the_js_twin_formats_the_same_table():
    """static/money.js run by node on the decimal strings the events carry."""
    script = (f"{(ROOT / 'static/money.js').read_text()}\n"
              f"const rows = {json.dumps([a for a, _ in TABLE])};\n"
              "console.log(JSON.stringify(rows.map(r => window.hermesMoney.usd(r))));\n")
    out = subprocess.run(["node", "-e", "var window = {};\n" + script], check=True,
                         capture_output=True, text=True).stdout
    assert json.loads(out) == [t for _, t in TABLE]


def test_the_js_twin_sums_exactly():
    script = (f"var window = {{}};\n{(ROOT / 'static/money.js').read_text()}\n"
              "const m = window.hermesMoney;\n"
              "const total = m.nanos('0.100000001') + m.nanos('0.024999999') + m.nanos('0.1');\n"
              "console.log(m.fromNanos(total) + ' ' + m.usd(m.fromNanos(total)));\n")
    out = subprocess.run(["node", "-e", script], check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == "0.225000000 $0.225"


@pytest.mark.django_db(transaction=True)
def test_budget_notices_name_the_cap_and_the_spend_with_the_same_precision(make_user,
                                                                           hermes_settings):
    """A $0.125/day cap with $0.1249 spent: the 80% warning and the stop name $0.125, not
    the "$0.13" (cap, rounded up) beside "$0.12 spent" they used to."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "BUDGET_WAIT_SECONDS": 0.5}
    boss, mia = make_user("boss", team="acme", role="admin"), make_user("mia", team="acme")
    team = Team.objects.get(name="acme")
    budget_set(actor=boss, scope="team", team=team, period="day", limit="0.125")
    UsageRecord.objects.create(session=session_create(user=boss), user=boss, team=team,
                               provider="simulator", model="hermes-simulator",
                               cost_usd=D("0.1249"))
    session = session_create(user=mia)
    turn_start(session=session, user=mia, text="list the files and read README.md")
    turn_run_task.apply(args=[session.pk])
    warning = RunEvent.objects.filter(session=session, type="budget.warning").first()
    assert warning.payload["reason"] == "team budget of $0.125/day: $0.1249 spent (99%)"
    stop = RunEvent.objects.get(session=session, type="budget.exceeded")
    assert stop.payload["reason"] == "team budget of $0.125/day reached; resets at 00:00 UTC"
    assert Turn.objects.get(session=session).error == stop.payload["reason"]


def test_a_budget_reads_the_same_in_the_admin():
    """The Django admin lists budgets by their str(): the cap as the pages write it."""
    budget = Budget(scope="session", session_id=3, period="day", limit_usd=D("0.1250"))
    assert str(budget) == "session 3: $0.125/day"
