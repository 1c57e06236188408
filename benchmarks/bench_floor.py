"""The floor every request carries (issue 13 item 6): the stable prompt tier plus the tool
schemas, per toolset, for the built-ins and with each test MCP server added (a real
connection to tests/mcp_servers over the official SDK; its listing goes through the same
name and schema checks as production). Estimates from agents/context/tokens.py, as the Settings
page shows them. Run: ``HERMES_DATA_DIR=/tmp/x python benchmarks/bench_floor.py``.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")


def main() -> None:
    import django

    django.setup()
    from agents.floor import floor_tokens
    from agents.mcp_client import ServerConfig, probe_server
    from agents.prompt import build_stable_tier
    from agents.tools.mcp import McpTool
    from sessions.toolbox import _full_registry
    from tests.mcp_servers.launch import stdio_command

    registry = _full_registry()
    system = build_stable_tier(home=None, tool_names=registry.names(),
                               model="claude-sonnet-4", provider="anthropic")
    base = floor_tokens(system=system, tools=registry.specs())
    print(f"built-ins: system {base['system']} + tools {base['tools']} = {base['total']} "
          "tokens")
    for toolset in base["toolsets"]:
        print(f"  {toolset['name']:<10} {toolset['tokens']:>6}  {', '.join(toolset['tools'])}")
    specs = list(registry.specs())
    for name in ("stdio_tools", "malformed"):
        good, rejected = probe_server(ServerConfig(
            key=name, name=name.replace("_", "-"), transport="stdio",
            argv=tuple(shlex.split(stdio_command(name)))))
        specs += [McpTool(server=name.replace("_", "-"), remote=t, policy="ask",
                          caller=lambda *a, **k: None).spec for t in good]
        now = floor_tokens(system=system, tools=specs)
        print(f"+ {name}: {len(good)} tools ({len(rejected)} rejected) → total "
              f"{now['total']} tokens (+{now['total'] - base['total']} over the built-ins)")


if __name__ == "__main__":
    main()
