"""Rolling summaries get their own Message.kind (issue 11 item 4): until now they were
stored as "summary" and recognised by their first line. The one-off data step reads that
line for the last time; from here on the kind alone says what a row is."""

from django.db import migrations, models

ROLLING_PREFIX = "[ROLLING SUMMARY — absorbed messages through #"


def forwards(apps, schema_editor):
    Message = apps.get_model("agent_sessions", "Message")
    Message.objects.filter(kind="summary", role="user",
                           content__startswith=ROLLING_PREFIX).update(kind="rolling_summary")


def backwards(apps, schema_editor):
    Message = apps.get_model("agent_sessions", "Message")
    Message.objects.filter(kind="rolling_summary").update(kind="summary")


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0008_turn_waits_origin")]
    operations = [
        migrations.AlterField(  # help text only: no SQL on either database
            model_name="message", name="kind",
            field=models.CharField(blank=True, default="", max_length=20, help_text=(
                "'summary' for compaction summaries, 'rolling_summary' for the "
                "micro-compaction summary, 'incomplete', 'refusal', '' otherwise."))),
        migrations.RunPython(forwards, backwards),
    ]
