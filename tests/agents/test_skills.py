"""Skills: SKILL.md loading, index, invocation with a registered scaffold, tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.cache import REGISTRY, plan_breakpoints
from agents.errors import ToolError
from agents.messages import Message, ModelRequest
from agents.providers import PROFILES
from agents.tools import ToolContext
from agents.tools.skills import (
    SKILL_VIEW, SKILLS_LIST, WORKSPACE_SKILLS_DIR, build_skill_invocation, load_skills,
    parse_skill_command, parse_skill_file, skill_dirs, skill_scaffold, skills_index,
)


def write_skill(root: Path, dirname: str, text: str) -> Path:
    path = root / dirname / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    deployment = tmp_path / "deploy-skills"
    workspace = tmp_path / "ws"
    write_skill(deployment, "deploy", "---\nname: deploy\ndescription: Ship the app\n---\n"
                "1. Run tests.\n2. Tag.\n")
    write_skill(deployment, "review", "---\nname: review\ndescription: 'Review a PR'\n---\n"
                "Read the diff.\n")
    write_skill(workspace / WORKSPACE_SKILLS_DIR, "deploy",
                "---\nname: deploy\ndescription: Ship to staging only\n---\nUse staging.\n")
    write_skill(deployment, "Bad Name", "---\nname: Bad Name\n---\nbody\n")
    write_skill(deployment, "empty", "---\nname: empty\ndescription: nothing\n---\n\n")
    return deployment, workspace


def test_front_matter_fields_and_body():
    fields, body = parse_skill_file('---\nname: x\ndescription: "A: b"\n---\n\nBody\n',
                                    default_name="d")
    assert fields == {"name": "x", "description": "A: b"} and body == "Body"
    fields, body = parse_skill_file("no front matter", default_name="d")
    assert fields == {"name": "d"} and body == "no front matter"


def test_workspace_skill_overrides_deployment_and_invalid_ones_skipped(dirs):
    deployment, workspace = dirs
    skills = load_skills(skill_dirs(deployment_dir=deployment, workspace=workspace))
    assert [s.name for s in skills] == ["deploy", "review"]
    assert skills[0].body == "Use staging." and skills[0].description == "Ship to staging only"
    assert load_skills([None, deployment / "missing"]) == []


def test_index_is_sorted_and_deterministic(dirs):
    deployment, workspace = dirs
    skills = load_skills([deployment])
    index = skills_index(skills)
    assert index == skills_index(list(reversed(skills)))
    assert index.splitlines()[-2:] == ["- deploy: Ship the app", "- review: Review a PR"]
    assert skills_index([]) == ""


def test_invocation_registers_scaffold_and_planner_splits_there(dirs):
    deployment, _ = dirs
    skill = load_skills([deployment])[0]
    text = build_skill_invocation(skill, "v1.2 --dry-run")
    scaffold = skill_scaffold(skill)
    assert text == scaffold + "Arguments: v1.2 --dry-run"
    assert scaffold in REGISTRY.snapshot()
    other = build_skill_invocation(skill, "v1.3")
    assert other.startswith(scaffold) and REGISTRY.find(other) == len(scaffold)
    request = ModelRequest(model="m", system="s", messages=(Message(role="user", content=text),))
    (_, bp) = plan_breakpoints(request, profile_caps=PROFILES["anthropic"]).breakpoints
    assert bp.split_at == len(scaffold)
    assert build_skill_invocation(skill, "   ").endswith("Arguments: (none)")


def test_parse_skill_command(dirs):
    deployment, _ = dirs
    skills = load_skills([deployment])
    skill, args = parse_skill_command("  /Deploy  v1.2 now\nplease ", skills)
    assert skill.name == "deploy" and args == "v1.2 now\nplease"
    assert parse_skill_command("/review", skills)[1] == ""
    assert parse_skill_command("/unknown x", skills) is None
    assert parse_skill_command("deploy v1", skills) is None


def test_tools_list_and_view(dirs, tmp_path: Path):
    deployment, workspace = dirs
    workspace.mkdir(exist_ok=True)
    ctx = ToolContext(workspace=workspace, extras={"skills_dir": str(deployment)})
    listing = SKILLS_LIST.run({}, ctx).text
    assert listing == "deploy: Ship to staging only\nreview: Review a PR"
    assert SKILL_VIEW.run({"name": "review"}, ctx).text == "# review\nReview a PR\n\nRead the diff."
    with pytest.raises(ToolError, match="Available skills: deploy, review"):
        SKILL_VIEW.run({"name": "nope"}, ctx)
    assert SKILLS_LIST.paths({}, ctx) == [] and SKILL_VIEW.read_only
    bare = ToolContext(workspace=tmp_path / "ws")
    assert SKILLS_LIST.run({}, ToolContext(workspace=tmp_path)).text == "No skills are installed."
    assert "deploy" in SKILLS_LIST.run({}, bare).text
