"""Merge of the money (0003/0004) and web (0003) branches; no operations."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0003_web_tool_meta"),
                    ("agent_sessions", "0004_money_usage_covering")]
    operations = []
