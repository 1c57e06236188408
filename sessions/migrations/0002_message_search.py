"""Full-text search over messages, written only when searchable columns change.

PostgreSQL: a side table holding the tsvector and the session owner (sessions never change
hands), filled by a trigger that fires AFTER INSERT or AFTER UPDATE OF content, tool_name,
tool_calls. The owner column and its (owner_id, message_id) index let a user-scoped query
either AND its bitmap with the GIN one (rare words) or walk the user's rows newest first
and stop at the LIMIT (common words); without them the planner walked every user's
messages (p95 240 ms over 1M messages: benchmarks/bench_context.py). SQLite: an FTS5
external-content table with the same column-limited update trigger. Flipping
active/compacted touches none of those columns, so archiving 10,000 rows in a compaction
does no index work (seed, "Compaction is a flag flip"; DESIGN.md §3).
"""

from django.db import migrations

PG_FORWARD = """
CREATE TABLE agent_sessions_message_search (
    message_id bigint PRIMARY KEY,
    owner_id bigint NOT NULL,
    tsv tsvector NOT NULL
);
CREATE INDEX agent_sessions_message_search_tsv ON agent_sessions_message_search USING gin (tsv);
CREATE INDEX agent_sessions_message_search_owner
    ON agent_sessions_message_search (owner_id, message_id);
CREATE FUNCTION agent_sessions_message_search_write() RETURNS trigger AS $$
BEGIN
    INSERT INTO agent_sessions_message_search (message_id, owner_id, tsv)
    SELECT NEW.id, s.owner_id,
           to_tsvector('simple', coalesce(NEW.content, '') || ' ' ||
                                 coalesce(NEW.tool_name, '') || ' ' ||
                                 coalesce(NEW.tool_calls::text, ''))
    FROM agent_sessions_session s WHERE s.id = NEW.session_id
    ON CONFLICT (message_id) DO UPDATE SET tsv = EXCLUDED.tsv, owner_id = EXCLUDED.owner_id;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE FUNCTION agent_sessions_message_search_delete() RETURNS trigger AS $$
BEGIN
    DELETE FROM agent_sessions_message_search WHERE message_id = OLD.id;
    RETURN OLD;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER agent_sessions_message_search_del AFTER DELETE ON agent_sessions_message
    FOR EACH ROW EXECUTE FUNCTION agent_sessions_message_search_delete();
CREATE TRIGGER agent_sessions_message_search_ins AFTER INSERT ON agent_sessions_message
    FOR EACH ROW EXECUTE FUNCTION agent_sessions_message_search_write();
CREATE TRIGGER agent_sessions_message_search_upd
    AFTER UPDATE OF content, tool_name, tool_calls ON agent_sessions_message
    FOR EACH ROW EXECUTE FUNCTION agent_sessions_message_search_write();
"""
PG_REVERSE = """
DROP TRIGGER IF EXISTS agent_sessions_message_search_del ON agent_sessions_message;
DROP FUNCTION IF EXISTS agent_sessions_message_search_delete();
DROP TRIGGER IF EXISTS agent_sessions_message_search_upd ON agent_sessions_message;
DROP TRIGGER IF EXISTS agent_sessions_message_search_ins ON agent_sessions_message;
DROP FUNCTION IF EXISTS agent_sessions_message_search_write();
DROP TABLE IF EXISTS agent_sessions_message_search;
"""
SQLITE_FORWARD = [
    """CREATE VIRTUAL TABLE agent_sessions_message_fts USING fts5(
        content, tool_name, tool_calls,
        content='agent_sessions_message', content_rowid='id', tokenize='unicode61')""",
    """CREATE TRIGGER agent_sessions_message_fts_ins AFTER INSERT ON agent_sessions_message
       BEGIN
         INSERT INTO agent_sessions_message_fts(rowid, content, tool_name, tool_calls)
         VALUES (new.id, new.content, new.tool_name, new.tool_calls);
       END""",
    """CREATE TRIGGER agent_sessions_message_fts_del AFTER DELETE ON agent_sessions_message
       BEGIN
         INSERT INTO agent_sessions_message_fts(agent_sessions_message_fts, rowid, content,
                                                tool_name, tool_calls)
         VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
       END""",
    """CREATE TRIGGER agent_sessions_message_fts_upd
       AFTER UPDATE OF content, tool_name, tool_calls ON agent_sessions_message
       BEGIN
         INSERT INTO agent_sessions_message_fts(agent_sessions_message_fts, rowid, content,
                                                tool_name, tool_calls)
         VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
         INSERT INTO agent_sessions_message_fts(rowid, content, tool_name, tool_calls)
         VALUES (new.id, new.content, new.tool_name, new.tool_calls);
       END""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS agent_sessions_message_fts_upd",
    "DROP TRIGGER IF EXISTS agent_sessions_message_fts_del",
    "DROP TRIGGER IF EXISTS agent_sessions_message_fts_ins",
    "DROP TABLE IF EXISTS agent_sessions_message_fts",
]


def forward(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(PG_FORWARD)
        elif connection.vendor == "sqlite":
            for statement in SQLITE_FORWARD:
                cursor.execute(statement)


def reverse(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(PG_REVERSE)
        elif connection.vendor == "sqlite":
            for statement in SQLITE_REVERSE:
                cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0001_initial")]
    operations = [migrations.RunPython(forward, reverse)]
