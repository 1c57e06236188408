"""The migrations that add the case-insensitive team name constraint and the per-scope budget
constraints, run on rows that clash: they make the names distinct (" (2)", " (3)") and keep
the lowest of clashing caps, so they never fail on existing data. Real migrations on the
test database (SQLite or PostgreSQL), migrated back, filled, migrated forward."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_NAMES = ("accounts", "0006_budget_unique_per_scope")
BEFORE_BUDGETS = ("accounts", "0005_alter_team_name")


def _migrate(target):
    """Migrate the test database to ``target`` (a list of (app, migration) or None for the
    latest of every app); the apps registry of that state."""
    executor = MigrationExecutor(connection)
    targets = target or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.fixture
def at():
    """at(migration) -> the historical apps at that accounts migration; the database is
    migrated back to the latest after the test, whatever happened."""
    yield lambda key: _migrate([key])
    _migrate(None)


def test_clashing_team_names_are_made_distinct_before_the_constraint(at):
    apps = at(BEFORE_NAMES)
    Team = apps.get_model("accounts", "Team")
    names = ["demo", "DEMO", "Demo", "demo (2)", "x" * 100, "X" * 100, "other"]
    for name in names:
        Team.objects.create(name=name)
    apps = _migrate(None)
    Team = apps.get_model("accounts", "Team")
    after = list(Team.objects.order_by("pk").values_list("name", flat=True))
    assert after[0] == "demo" and after[3] == "demo (2)" and after[6] == "other"
    assert after[1] == "DEMO (3)" and after[2] == "Demo (4)"  # "demo (2)" was taken
    assert after[4] == "x" * 100 and after[5] == "X" * 96 + " (2)"
    assert len({name.lower() for name in after}) == len(after)


def test_clashing_budgets_keep_the_lowest_cap_before_the_constraint(at, make_user):
    if connection.features.supports_nulls_distinct_unique_constraints:
        pytest.skip("the old constraint held on this database: no clashing rows can exist")
    owner = make_user("mia")
    apps = at(BEFORE_BUDGETS)
    Budget = apps.get_model("accounts", "Budget")
    for limit in ("20", "5", "9"):
        Budget.objects.create(scope="user", user_id=owner.pk, period="day",
                              limit_usd=Decimal(limit))
    Budget.objects.create(scope="user", user_id=owner.pk, period="month",
                          limit_usd=Decimal("50"))
    apps = _migrate(None)
    Budget = apps.get_model("accounts", "Budget")
    assert sorted((b.period, b.limit_usd) for b in Budget.objects.all()) == [
        ("day", Decimal("5")), ("month", Decimal("50"))]
