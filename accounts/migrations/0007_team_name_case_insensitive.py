"""Team names unique regardless of case ("demo" and "DEMO" could not be told apart).

Existing names that clash are made distinct first: the oldest team keeps its name, each
later one gets " (2)", " (3)", … (shortened to fit 100 characters), so adding the constraint
never fails on existing data."""

import django.db.models.functions.text
from django.db import migrations, models

NAME_MAX = 100


def _with_suffix(name: str, n: int) -> str:
    """``name`` + " (n)", the name shortened so the whole fits NAME_MAX."""
    suffix = f" ({n})"
    return name[:NAME_MAX - len(suffix)] + suffix


def team_names_distinct(apps, schema_editor):
    """Rename every team whose lower-cased name an older team already holds."""
    Team = apps.get_model("accounts", "Team")
    teams = list(Team.objects.order_by("pk"))
    taken = {team.name.lower() for team in teams}
    seen: set[str] = set()
    for team in teams:
        key = team.name.lower()
        if key not in seen:
            seen.add(key)
            continue
        n = 2
        while _with_suffix(team.name, n).lower() in taken:
            n += 1
        team.name = _with_suffix(team.name, n)
        taken.add(team.name.lower())
        seen.add(team.name.lower())
        team.save(update_fields=["name"])


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0006_budget_unique_per_scope"),
    ]

    operations = [
        migrations.RunPython(team_names_distinct, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="team",
            constraint=models.UniqueConstraint(
                django.db.models.functions.text.Lower("name"), name="uniq_team_name_ci",
                violation_error_message="A team with this name exists already (names are "
                                        "compared without regard to case)."),
        ),
    ]
