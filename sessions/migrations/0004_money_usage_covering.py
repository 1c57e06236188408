"""Covering indexes for /spend/ on PostgreSQL (benchmarks/bench_spend.py): every aggregate
the spend views run over one user's or one team's date range is answered by an index-only
scan, never by reading scattered heap pages of a large usage table. Other databases keep the
plain (user, created_at) and (team, created_at) indexes of migration 0003."""

from django.db import migrations

INCLUDE = ("session_id, user_id, provider, model, cost_usd, cost_unknown_reason, "
           "input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens, "
           "cache_write_1h_tokens, cost_input_usd, cost_output_usd, cost_cache_read_usd, "
           "cost_cache_write_usd, cost_uncached_usd")
INDEXES = {"usage_user_created_cover": "user_id, created_at",
           "usage_team_created_cover": "team_id, created_at"}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, keys in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON "
                              f"agent_sessions_usagerecord ({keys}) INCLUDE ({INCLUDE})")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0003_money_usage_cost")]
    operations = [migrations.RunPython(create, drop)]
