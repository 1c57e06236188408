"""One budget per owner and period, on SQLite too.

0002's constraint used nulls_distinct=False, which SQLite does not have: Django skipped it
there (models.W047 on every start) and embedded mode kept no uniqueness. It becomes one
partial unique index per scope (accounts/models.py Budget.Meta), which both databases hold.
Rows that clash (possible only where the old constraint was missing) are reduced to the
lowest cap of each clash first, so the migration never fails on existing data and no owner
ends up with a higher cap than the lowest one in force (fail closed)."""

from django.db import migrations, models


def budgets_dedupe(apps, schema_editor):
    """Keep, for each (scope, owner, period), the row with the lowest limit (the oldest on a
    tie); delete the others."""
    Budget = apps.get_model("accounts", "Budget")
    kept: set[tuple] = set()
    for budget in Budget.objects.order_by("limit_usd", "pk"):
        key = (budget.scope, budget.user_id, budget.team_id, budget.session_id, budget.period)
        if key in kept:
            budget.delete()
        else:
            kept.add(key)


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0005_alter_team_name"),
    ]

    operations = [
        migrations.RunPython(budgets_dedupe, migrations.RunPython.noop),
        migrations.RemoveConstraint(
            model_name="budget",
            name="uniq_budget_per_scope_period",
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.UniqueConstraint(condition=models.Q(("scope", "user")),
                                               fields=("user", "period"),
                                               name="uniq_budget_user_period"),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.UniqueConstraint(condition=models.Q(("scope", "team")),
                                               fields=("team", "period"),
                                               name="uniq_budget_team_period"),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.UniqueConstraint(condition=models.Q(("scope", "session")),
                                               fields=("session", "period"),
                                               name="uniq_budget_session_period"),
        ),
    ]
