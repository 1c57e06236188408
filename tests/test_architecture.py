"""The rules that keep the architecture visible: the loop stays short, modules stay small,
every tool is documented and declares what the policy judges, the sessions app keeps its
label. Who may import whom (agents/ imports no Django, arrows point down, no cycle) is
tests/test_imports.py."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "agents"


def test_agents_never_reads_the_environment():
    """Only hermes_web/settings.py reads os.environ (issue 2, item 1)."""
    offenders = [str(p.relative_to(ROOT)) for p in AGENTS.rglob("*.py")
                 if "os.environ" in p.read_text() or "getenv(" in p.read_text()]
    assert offenders == []


def test_loop_stays_within_its_line_budget():
    assert len((AGENTS / "loop.py").read_text().splitlines()) <= 150


def test_agents_modules_stay_under_400_lines():
    big = {str(p.relative_to(ROOT)): n for p in AGENTS.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 400}
    assert big == {}


def test_every_agents_module_has_a_docstring():
    missing = [str(p.relative_to(ROOT)) for p in AGENTS.rglob("*.py")
               if p.stat().st_size and ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


def test_every_registered_tool_has_a_description_and_schema():
    from sessions.toolbox import _full_registry

    registry = _full_registry()
    assert {"read_file", "write_file", "patch", "search_files", "terminal", "skills_list",
            "skill_view", "session_search"} <= set(registry.names())
    for spec in registry.specs():
        assert spec.description.strip(), spec.name
        assert spec.input_schema.get("type") == "object", spec.name
    for name in registry.names():  # the policy judges these declarations (issue 11 item 5)
        tool = registry.get(name)
        assert isinstance(tool.read_only, bool) and callable(tool.targets), name
        assert callable(tool.command) and callable(tool.paths), name


def test_sessions_app_label_is_agent_sessions():
    from django.apps import apps

    assert apps.get_app_config("agent_sessions").name == "sessions"
    assert apps.get_app_config("sessions").name == "django.contrib.sessions"


def test_no_utils_or_helpers_modules():
    assert not [p for p in ROOT.rglob("*.py") if p.stem in {"utils", "helpers"}
                and ".venv" not in p.parts]
