"""Skills: reusable instructions stored as SKILL.md files, their index, invocation and tools.

A skill is a directory ``<skills dir>/<name>/SKILL.md``: front-matter with ``name`` and
``description``, then the body (the instructions). Two skills dirs are read, in this order:
the deployment's (``ToolContext.extras["skills_dir"]``, set from settings) and the session
workspace's ``<workspace>/.hermes/skills`` (the ``.hermes`` dir is where the workspace keeps
harness state, so project files named ``skills/`` are never mistaken for skills). A workspace
skill overrides a deployment skill of the same name. Both are read through the confined
Workspace (agents/tools/workspace.py): a SKILL.md that is a symlink to a host file is never
read (issue 8 finding 1), whether by skills_list, skill_view or the ``/name`` expansion.

``/name args`` in the chat becomes a machine-built message: the skill body plus an activation
note (the scaffold, identical on every invocation) followed by the arguments (the tail). The
builder registers the scaffold with agents/cache.py so the planner can cache it separately
(seed, "When only the builder knows where the prefix ends"). The skills index goes in the
volatile prompt tier (agents/prompt.py). Not here: running a skill's steps (the model does)
or storing skills from the web UI.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from agents.cache import register_stable_prefix
from agents.errors import ToolError
from agents.messages import ToolSpec
from agents.tools import Access, PathScope, ToolContext, ToolOutput
from agents.tools.workspace import Workspace

SKILL_FILE = "SKILL.md"
WORKSPACE_SKILLS_DIR = Path(".hermes") / "skills"
"""Per-workspace skills dir, relative to the workspace."""
DESCRIPTION_MAX_CHARS = 300
"""Index lines are cut to this many chars of description so the volatile tier stays small."""
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One loaded skill: ``name`` (lowercase, ``[a-z0-9_-]``), one-line ``description``,
    ``body`` (instructions, front-matter removed, stripped) and the ``path`` of its SKILL.md."""

    name: str
    description: str
    body: str
    path: Path


def parse_skill_file(text: str, *, default_name: str) -> tuple[dict[str, str], str]:
    """Split SKILL.md text into (front-matter fields, body).

    Front-matter is a leading ``---`` line, ``key: value`` lines, and a closing ``---`` line;
    values may be quoted with ' or ". Without front-matter the fields are {} and the body is the
    whole text. ``default_name`` fills a missing ``name``.
    """
    fields: dict[str, str] = {}
    body = text
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() == "---":
                for line in lines[1:end]:
                    key, sep, value = line.partition(":")
                    if sep and key.strip() and not line.startswith((" ", "\t")):
                        value = value.strip()
                        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                            value = value[1:-1]
                        fields[key.strip().lower()] = value
                body = "\n".join(lines[end + 1:])
                break
    fields.setdefault("name", default_name)
    return fields, body.strip()


@dataclass(frozen=True, slots=True)
class SkillSource:
    """A skills dir read through a confined Workspace: ``workspace`` (the tree whose root is
    trusted) and ``relative`` (the skills dir below it, "." for the root). Every component
    below the root is opened without following links (issue 8 finding 1: a SKILL.md, a
    skill dir, ``.hermes`` or ``skills`` planted as a symlink by a command is skipped)."""

    workspace: Workspace
    relative: str = "."


def load_skills(dirs: Iterable[SkillSource | Path | None]) -> list[Skill]:
    """Skills found as ``<dir>/<name>/SKILL.md`` in each of ``dirs`` (None and missing dirs are
    skipped; a bare Path is a SkillSource rooted at it), sorted by name. A later dir's skill
    replaces an earlier one of the same name. Files with an invalid name, an empty body, that
    cannot be read as text, or that are links, hard links, FIFOs or sockets are skipped."""
    found: dict[str, Skill] = {}
    for directory in dirs:
        if directory is None:
            continue
        source = directory if isinstance(directory, SkillSource) else SkillSource(
            Workspace(directory, label="skills directory"))
        for skill in _read_source(source):
            found[skill.name] = skill
    return [found[name] for name in sorted(found)]


def _read_source(source: SkillSource) -> list[Skill]:
    ws, base = source.workspace, source.relative
    try:
        entries = ws.entries(base)
    except ToolError:
        return []  # missing, or the dir itself (or a parent) is a link
    skills = []
    for entry, info in entries:
        if not stat.S_ISDIR(info.st_mode):
            continue
        relative = f"{base}/{entry}/{SKILL_FILE}"
        try:
            text = ws.read_bytes(relative).decode("utf-8")
        except (ToolError, UnicodeDecodeError):
            continue
        fields, body = parse_skill_file(text, default_name=entry)
        name = fields["name"].strip().lower()
        if not _NAME.match(name) or not body:
            continue
        description = " ".join(fields.get("description", "").split())
        skills.append(Skill(name=name, description=description, body=body,
                            path=ws.root / base / entry / SKILL_FILE))
    return skills


def skill_dirs(*, deployment_dir: Path | None,
               workspace: Path | None) -> list[SkillSource | None]:
    """The dirs ``load_skills`` reads, lowest precedence first: the deployment's (rooted at
    itself) and ``.hermes/skills`` walked from the workspace root."""
    return [SkillSource(Workspace(deployment_dir, label="skills directory"))
            if deployment_dir is not None else None,
            SkillSource(Workspace(workspace), str(WORKSPACE_SKILLS_DIR))
            if workspace is not None else None]


def skills_index(skills: Iterable[Skill]) -> str:
    """The skills section of the volatile prompt tier: a header line and one
    ``- name: description`` line per skill, sorted by name; "" when there are none. The same
    skills give the same bytes."""
    lines = []
    for skill in sorted(skills, key=lambda s: s.name):
        description = skill.description[:DESCRIPTION_MAX_CHARS] or "(no description)"
        lines.append(f"- {skill.name}: {description}")
    if not lines:
        return ""
    return ("# Skills\n\nRead a skill with skill_view before following it; the user can also "
            "invoke one with /name.\n" + "\n".join(lines))


def skill_scaffold(skill: Skill) -> str:
    """The static part of an invocation message: the body and the activation note. Identical
    for every invocation of the same skill (the arguments never appear in it)."""
    return (f'<skill name="{skill.name}">\n{skill.body}\n</skill>\n\n'
            f'The user invoked the skill "{skill.name}". Follow its instructions above.\n\n')


def build_skill_invocation(skill: Skill, args: str) -> str:
    """The user-message text for ``/name args``: ``skill_scaffold(skill)`` + a tail naming the
    arguments (never blank, so the registry can split it). Registers the scaffold with
    agents.cache.register_stable_prefix at construction time."""
    scaffold = skill_scaffold(skill)
    register_stable_prefix(scaffold)
    tail = f"Arguments: {args.strip()}" if args.strip() else "Arguments: (none)"
    return scaffold + tail


def parse_skill_command(text: str, skills: Iterable[Skill]) -> tuple[Skill, str] | None:
    """``(skill, args)`` when ``text`` is ``/name`` or ``/name args`` for a known skill
    (name matched case-insensitively; args stripped, may be ""), else None."""
    match = re.match(r"/(\S+)\s*(.*)", text.strip(), re.DOTALL)
    if match is None:
        return None
    wanted = match.group(1).lower()
    for skill in skills:
        if skill.name == wanted:
            return skill, match.group(2).strip()
    return None


def _context_skills(ctx: ToolContext) -> list[Skill]:
    deployment = ctx.extras.get("skills_dir")
    return load_skills(skill_dirs(deployment_dir=Path(deployment) if deployment else None,
                                  workspace=ctx.workspace))


class SkillsListTool:
    """``skills_list`` {}: every available skill as ``name: description`` lines."""

    spec = ToolSpec(name="skills_list",
                    description="List the available skills (reusable instructions) with a "
                                "one-line description each.",
                    input_schema={"type": "object", "properties": {},
                                  "additionalProperties": False})
    read_only = True
    interactive = False

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return []

    def command(self, args: dict[str, Any]) -> str | None:
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        skills = _context_skills(ctx)
        if not skills:
            return ToolOutput(text="No skills are installed.")
        return ToolOutput(text="\n".join(f"{s.name}: {s.description or '(no description)'}"
                                         for s in skills))


class SkillViewTool:
    """``skill_view`` {"name"}: the named skill's full instructions. Raises ToolError for an
    unknown name, listing the known ones."""

    spec = ToolSpec(name="skill_view",
                    description="Read a skill's full instructions by name.",
                    input_schema={"type": "object",
                                  "properties": {"name": {"type": "string",
                                                          "description": "The skill name."}},
                                  "required": ["name"], "additionalProperties": False})
    read_only = True
    interactive = False

    def targets(self, args: dict[str, Any]) -> list[tuple[str, Access]]:
        return []

    def command(self, args: dict[str, Any]) -> str | None:
        return None

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        name = str(args.get("name", "")).strip().lower().lstrip("/")
        skills = _context_skills(ctx)
        for skill in skills:
            if skill.name == name:
                header = f"# {skill.name}\n{skill.description}\n\n" if skill.description else ""
                return ToolOutput(text=header + skill.body)
        known = ", ".join(s.name for s in skills) or "none"
        raise ToolError(f"Unknown skill {name!r}. Available skills: {known}.")


SKILLS_LIST = SkillsListTool()
SKILL_VIEW = SkillViewTool()
TOOLS = (SKILLS_LIST, SKILL_VIEW)
"""The skills toolset, for the registry."""
