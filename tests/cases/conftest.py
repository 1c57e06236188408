"""Fixtures for the failure-case tests (issue 16): a user, a session on the simulator and a
helper that runs its queued turn through the real Celery task (real database, real HTTP to
the simulator through the real anthropic SDK / httpx)."""

from __future__ import annotations

import pytest

from sessions.models import RunEvent, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice", team="red")


@pytest.fixture
def use_provider(hermes_settings):
    """use_provider("simulator-openai") switches the provider new sessions get."""

    def use(name: str, **extra):
        hermes_settings.HERMES = {**hermes_settings.HERMES, "PROVIDER": name, **extra}

    return use


@pytest.fixture
def chat(alice):
    """chat(text, session=None) -> (session, turn): store the message and run the turn."""

    def send(text: str, session=None):
        session = session or session_create(user=alice)
        turn_start(session=session, user=alice, text=text)
        turn_run_task.apply(args=[session.pk])
        return session, Turn.objects.filter(session=session).order_by("-id").first()

    return send


def events(session, type_: str) -> list[RunEvent]:
    """The session's events of one type, in order."""
    return list(RunEvent.objects.filter(session=session, type=type_).order_by("seq"))
