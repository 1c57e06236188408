"""Per-session tool wiring: the registry, the tool context, the policy gate, skills.

The Django-side facts a tool or the policy needs (workspace, backend, skills dirs, approval
state) are fetched here and handed to agents/ as plain values; agents/ never reaches back.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from django.conf import settings

from agents.backends import Backend
from agents.backends.local import LocalBackend
from agents.messages import Message as AgentMessage
from agents.messages import ToolCall
from agents.policy import Decision, PolicyContext, bypass_frozen, decide
from agents.tools import ToolContext
from agents.tools.registry import ToolRegistry, default_registry
from agents.tools.skills import (SkillsListTool, SkillViewTool, build_skill_invocation,
                                 load_skills, parse_skill_command, skill_dirs, skills_index)
from sessions.models import Session, Turn


@lru_cache(maxsize=1)
def _full_registry() -> ToolRegistry:
    registry = default_registry()
    registry.register(SkillsListTool())
    registry.register(SkillViewTool())
    from agents.tools.recall import SessionSearchTool

    registry.register(SessionSearchTool())
    return registry


def registry_for(session: Session) -> ToolRegistry:
    """The tools this session may call: its pinned snapshot (all built-ins for a new one)."""
    registry = _full_registry()
    return registry.subset(session.tool_names) if session.tool_names else registry


def tool_names_for(session: Session) -> tuple[str, ...]:
    """The schema snapshot for a new session (pinned once; seed "built once")."""
    return _full_registry().names()


def deployment_skills_dir() -> Path:
    return Path(settings.HERMES["HOME"]) / "skills"


def skills_for(workspace: Path):
    return load_skills(skill_dirs(deployment_dir=deployment_skills_dir(), workspace=workspace))


def skills_index_for(session: Session, workspace: Path) -> str:
    return skills_index(skills_for(workspace))


@lru_cache(maxsize=1)
def backend() -> Backend:
    """The command backend in force: HERMES_BACKEND=local|sandbox, or auto (the sandbox when
    bubblewrap works on this host, else local)."""
    choice = settings.HERMES["BACKEND"]
    if choice in ("sandbox", "auto"):
        from agents.backends.sandbox import SandboxBackend, sandbox_available

        if sandbox_available():
            return SandboxBackend()
        if choice == "sandbox":
            raise RuntimeError("HERMES_BACKEND=sandbox but bubblewrap does not work here")
    return LocalBackend()


def tool_context(ctx) -> ToolContext:
    """The ToolContext of one turn (``ctx``: sessions.runner.TurnContext)."""
    from sessions.search import session_search_for_tool

    session = ctx.session
    return ToolContext(
        workspace=ctx.workspace, session_id=str(session.pk), user_id=str(session.owner_id),
        backend=backend(), context_window=ctx.profile.context_window,
        extras=MappingProxyType({
            "skills_dir": deployment_skills_dir(),
            "session_search": lambda query: session_search_for_tool(session=session,
                                                                    query=query),
        }))


def policy_gate(ctx, state):
    """gate(call) -> Decision: the one policy function, fed this turn's approval state."""
    session = ctx.session
    chosen = backend()
    policy_ctx = PolicyContext(
        session_id=str(session.pk), user_id=str(session.owner_id),
        backend_isolated=chosen.isolated, backend_has_host_paths=not chosen.isolated,
        deny_rules=tuple(state.deny_rules), always_rules=tuple(state.always_rules),
        session_rules=tuple(state.session_rules),
        approved_call_ids=frozenset(state.approved_call_ids),
        denied_call_ids=dict(state.denied_call_ids),
        bypass=bypass_frozen() or state.bypass, unattended=session.parent_id is not None,
        workspace=ctx.workspace, app_config_paths=app_config_paths())

    def gate(call: ToolCall) -> Decision:
        return decide(call, policy_ctx)

    return gate


@lru_cache(maxsize=1)
def app_config_paths() -> tuple[Path, ...]:
    """The application's own settings and environment files: hard-blocked for writes."""
    base = Path(settings.BASE_DIR)
    return (base / "hermes_web" / "settings.py", base / ".env", settings.DATA_DIR / "secret_key",
            Path(settings.HERMES["HOME"]) / "config.yaml")


def user_message_for(session: Session, turn: Turn, workspace: Path) -> AgentMessage:
    """The user message a queued turn becomes. ``/skill-name args`` expands to the skill's
    scaffold plus the arguments (the builder registers the scaffold as a stable prefix), kept
    as sent_content so replay is byte-exact while the chat shows what the user typed."""
    text = turn.input_text
    if turn.kind == "skill":
        parsed = parse_skill_command(text, skills_for(workspace))
        if parsed is not None:
            skill, args = parsed
            return AgentMessage(role="user", content=text,
                                sent_content=build_skill_invocation(skill, args))
    return AgentMessage(role="user", content=text)
