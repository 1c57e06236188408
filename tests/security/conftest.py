"""Fixtures for the security regressions (issue 8 findings, issue 16 B29/B32/B33): a real
deployment layout (data dir with the app's SQLite file and secret key, every workspace under
it), the local backend, two teams, and a simulated model that makes exactly the tool calls a
test plans, one per iteration, through a real turn (runner, policy, dispatcher, Celery task).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec

# Django modules are imported inside the fixtures: pytest loads this conftest before Django
# is set up when a path under tests/security is given on the command line.


@pytest.fixture
def layout(hermes_settings, tmp_path):
    """DATA_DIR = tmp_path holding hermes.sqlite3 (a real database with a bypass flag),
    secret_key and the workspace root tmp_path/ws; the local backend."""
    hermes_settings.DATA_DIR = tmp_path
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local",
                              "RETRY_BASE_DELAY": 0.01, "SIMULATOR_EMBEDDED": False,
                              "APPROVAL_TIMEOUT_SECONDS": 300}
    hermes_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    db = tmp_path / "hermes.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE sessions_session (id INTEGER, bypass_approvals INTEGER)")
        conn.execute("INSERT INTO sessions_session VALUES (1, 0)")
    (tmp_path / "secret_key").write_text("s3cret")
    from sessions import toolbox

    toolbox.backend_kind.cache_clear()
    yield {"data": tmp_path, "db": db}
    toolbox.backend_kind.cache_clear()


def bypass_flag(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT bypass_approvals FROM sessions_session").fetchone()[0]


@pytest.fixture
def policy_only(hermes_settings, layout):
    """The local backend with Landlock switched off: the policy is the only guard."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "LOCAL_CONFINEMENT": "none"}


@pytest.fixture
def people(make_user, layout):
    """alice (member of red), carol (admin of red), bob (member of blue). Teams keep the
    default admin-only classes (destructive ones need an admin other than the requester)."""
    return {"alice": make_user("alice", team="red"),
            "carol": make_user("carol", team="red", role="admin"),
            "bob": make_user("bob", team="blue")}


class Planned:
    """A simulated model that makes the planned tool calls, one per iteration, then
    repeats the last tool results as text ("Tool said: ...")."""

    def __init__(self) -> None:
        self.plan: list[ToolCallSpec] = []

    def __call__(self, request: ScriptRequest) -> Reply:
        if self.plan:
            return Reply(text="working", tool_calls=(self.plan.pop(0),))
        return Reply(text="Tool said: " + " | ".join(x.result for x in request.tool_results))


@pytest.fixture
def model(simulator, layout):
    planned = Planned()
    simulator.state.script = Script(planned)
    return planned


def terminal(command: str) -> ToolCallSpec:
    return ToolCallSpec(name="terminal", input={"command": command})


def write_file(path: str, content: str) -> ToolCallSpec:
    return ToolCallSpec(name="write_file", input={"path": path, "content": content})


def run_turn(session, user, text: str = "go"):
    """Start a turn and run it as the worker does; return the refreshed turn."""
    from sessions.services import turn_start
    from sessions.tasks import turn_run_task

    turn = turn_start(session=session, user=user, text=text)
    turn_run_task.apply(args=[session.pk])
    turn.refresh_from_db()
    return turn


def tool_results(session) -> list:
    from sessions.models import Message

    return list(Message.objects.filter(session=session, role="tool").order_by("id"))


@pytest.fixture
def alice_session(people):
    from sessions.services import session_create, workspace_path

    session = session_create(user=people["alice"])
    return session, workspace_path(session)
