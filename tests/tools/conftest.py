"""Fixtures for the issue-13 tools: a user, a scripted simulator and a turn runner.

Turns run through ``turn_run_task.apply`` exactly as the worker runs them, on the real
database, the simulator over HTTP (the real anthropic SDK), the real policy and backend."""

from __future__ import annotations

import pytest

from simulator.script import Script
from sessions import toolbox
from sessions.models import Message, RunEvent, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task


@pytest.fixture
def tool_settings(hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "SIMULATOR_EMBEDDED": False}
    hermes_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    toolbox.backend_kind.cache_clear()
    yield hermes_settings
    toolbox.backend_kind.cache_clear()


@pytest.fixture
def alice(make_user, tool_settings):
    return make_user("alice", team="red")


@pytest.fixture
def bob(make_user, tool_settings):
    return make_user("bob", team="blue")


@pytest.fixture
def script(simulator):
    """script(fn): the simulated model answers every request with fn(ScriptRequest)."""

    def use(fn):
        simulator.state.script = Script(fn)
        return simulator

    return use


class Chat:
    """One user's session: ``say(text)`` queues a turn and runs the task once."""

    def __init__(self, user, session=None):
        self.user = user
        self.session = session or session_create(user=user)

    def say(self, text: str) -> Turn:
        turn = turn_start(session=self.session, user=self.user, text=text)
        self.run()
        turn.refresh_from_db()
        return turn

    def run(self) -> None:
        turn_run_task.apply(args=[self.session.pk])

    def tool_rows(self) -> list[Message]:
        return list(Message.objects.filter(session=self.session, role="tool").order_by("id"))

    def final_text(self) -> str:
        return (Message.objects.filter(session=self.session, role="assistant")
                .order_by("-id")[0].content)

    def events(self, type: str | None = None) -> list[RunEvent]:
        qs = RunEvent.objects.filter(session=self.session).order_by("seq")
        return list(qs.filter(type=type) if type else qs)


@pytest.fixture
def chat():
    return Chat
