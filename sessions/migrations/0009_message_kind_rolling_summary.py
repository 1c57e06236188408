"""State in fields (issue 11 item 4), for rows stored before it:

- rolling summaries get their own Message.kind: until now they were stored as "summary" and
  recognised by their first line;
- terminal results stored before tool metadata was kept get ``tool_meta["exit_code"]``
  from their last line, so the renderer reads the field only.

Each one-off step reads the old text for the last time; from here on fields decide."""

import re

from django.db import migrations, models

ROLLING_PREFIX = "[ROLLING SUMMARY — absorbed messages through #"
EXIT_LINE = re.compile(r"\[exit code (-?\d+)\]\s*$")


def forwards(apps, schema_editor):
    Message = apps.get_model("agent_sessions", "Message")
    Message.objects.filter(kind="summary", role="user",
                           content__startswith=ROLLING_PREFIX).update(kind="rolling_summary")
    legacy = Message.objects.filter(role="tool", tool_name="terminal", tool_meta={})
    for row in legacy.only("id", "content").iterator():
        match = EXIT_LINE.search(row.content or "")
        if match:  # only tool_meta changes: the search triggers watch other columns
            Message.objects.filter(pk=row.pk).update(
                tool_meta={"exit_code": int(match.group(1))})


def backwards(apps, schema_editor):
    Message = apps.get_model("agent_sessions", "Message")
    Message.objects.filter(kind="rolling_summary").update(kind="summary")  # exit codes stay


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
