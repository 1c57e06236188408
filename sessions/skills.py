"""Skills for a session: where they are found, the prompt's index, and the user message a
`/skill-name args` turn becomes (agents/tools/skills.py holds the rules)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from agents.messages import Message as AgentMessage
from agents.tools.skills import (build_skill_invocation, load_skills, parse_skill_command,
                                 skill_dirs, skill_scaffold, skills_index)
from sessions.inputs import turn_input_built
from sessions.models import Session, Turn


def deployment_skills_dir() -> Path:
    """The deployment-wide skills directory: <HERMES_HOME>/skills."""
    return Path(settings.HERMES["HOME"]) / "skills"


def skills_for(workspace: Path):
    """Skills visible to a session: the deployment's, overridden by the workspace's."""
    return load_skills(skill_dirs(deployment_dir=deployment_skills_dir(), workspace=workspace))


def skills_index_for(session: Session, workspace: Path) -> str:
    """The skills index for the volatile prompt tier (deterministic text)."""
    return skills_index(skills_for(workspace))


def user_message_for(session: Session, turn: Turn, workspace: Path) -> AgentMessage:
    """The user message a queued turn becomes. ``/skill-name args`` expands to the skill's
    scaffold plus the arguments (the builder registers the scaffold as a stable prefix), kept
    as sent_content so replay is byte-exact while the chat shows what the user typed. A
    machine-built input (a schedule's or a webhook's: sessions/inputs.py) comes first."""
    built = turn_input_built(turn)
    if built is not None:
        return built
    text = turn.input_text
    if turn.kind == "skill":
        parsed = parse_skill_command(text, skills_for(workspace))
        if parsed is not None:
            skill, args = parsed
            return AgentMessage(role="user", content=text,
                                sent_content=build_skill_invocation(skill, args),
                                stable_prefix_len=len(skill_scaffold(skill)))
    return AgentMessage(role="user", content=text)
