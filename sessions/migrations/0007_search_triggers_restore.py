"""Restore the SQLite full-text triggers after a table remake.

SQLite cannot add a column with a default in place, so Django's schema editor rebuilds
``agent_sessions_message`` (0003_web_tool_meta added ``tool_meta``) and the rebuild drops the
table's triggers: the FTS5 index then stopped seeing new messages and search found nothing
in embedded mode. This re-creates the triggers of 0002_message_search and rebuilds the
index from the content table. PostgreSQL adds columns in place and is untouched. A later
migration that rebuilds the message table on SQLite must end with the same step
(tests/sessions/test_search_snippets.py fails without it).
"""

import importlib

from django.db import migrations

_SEARCH = importlib.import_module("sessions.migrations.0002_message_search")


def forward(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for name in ("agent_sessions_message_fts_ins", "agent_sessions_message_fts_del",
                     "agent_sessions_message_fts_upd"):
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        for statement in _SEARCH.SQLITE_FORWARD[1:]:  # the triggers, not the table
            cursor.execute(statement)
        cursor.execute("INSERT INTO agent_sessions_message_fts(agent_sessions_message_fts) "
                       "VALUES ('rebuild')")


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0006_merge_20261201_1432")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
