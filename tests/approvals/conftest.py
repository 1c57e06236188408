"""Fixtures for the approval gate: two teams (A with owner alice and admin carol, B with
bob), a session each, and a factory for pending requests made the way the runner makes them
(approval_request_create with real ToolCall and Decision values)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

_call_ids = itertools.count(1)


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """PBKDF2's cost is ~0.5 s per user on these machines; passwords are not under test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def people(make_user):
    """{"alice": member of A, "carol": admin of A, "bob": member of B, "dave": admin of B}."""
    made = {"alice": make_user("alice", team="team-a"),
            "carol": make_user("carol", team="team-a", role="admin"),
            "bob": make_user("bob", team="team-b"),
            "dave": make_user("dave", team="team-b", role="admin")}
    # These tests exercise the owner approving their own requests: opt the teams out of the
    # default (destructive classes need another admin), which tests/security covers.
    from accounts.models import Team

    Team.objects.update(admin_only_risk_classes=[])
    return made


def _session(owner, team_name: str):
    from accounts.models import Team
    from sessions.models import Session, Turn

    session = Session.objects.create(owner=owner, team=Team.objects.get(name=team_name),
                                     title=f"{owner.username}'s session", provider="simulator",
                                     model="sim-1")
    turn = Turn.objects.create(session=session, input_text="clean up",
                               status=Turn.Status.AWAITING_APPROVAL)
    return session, turn


@pytest.fixture
def session_a(people):
    return _session(people["alice"], "team-a")


@pytest.fixture
def session_b(people):
    return _session(people["bob"], "team-b")


@pytest.fixture
def ask(settings):
    """ask(session, turn, command=..., rule=..., risk_class=..., tool=..., verdict="ask")
    -> the created ApprovalRequest (or None when the verdict is not "ask")."""
    from agents.messages import ToolCall
    from agents.policy import Decision
    from approvals.services import approval_request_create

    def make(session, turn, *, command: str = "rm -rf ./build", rule: str = "dangerous",
             risk_class: str = "destructive", tool: str = "terminal", verdict: str = "ask",
             normalized: str | None = None, arguments: str | None = None):
        import json

        call = ToolCall(id=f"call_{next(_call_ids)}", name=tool,
                        arguments=arguments or json.dumps({"command": command}))
        decision = Decision(verdict=verdict, rule=rule, reason=f"{rule}: {command}",
                            risk_class=risk_class,
                            normalized=command if normalized is None else normalized)
        rows = approval_request_create(session=session, turn=turn, pending=[(call, decision)],
                                       workspace="/ws/1")
        return rows[0] if rows else None

    return make


class Listener:
    """A real channel-layer listener on some groups; ``drain()`` returns what arrived."""

    def __init__(self, groups: list[str]):
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        for group in groups:
            async_to_sync(self.layer.group_add)(group, self.channel)

    def drain(self) -> list[dict]:
        """Every message received, one per event: a run.events batch (the publisher merges
        events that queued behind each other) is unpacked into its run.event messages."""
        async def collect() -> list[dict]:
            got = []
            while True:
                try:
                    message = await asyncio.wait_for(self.layer.receive(self.channel), 0.2)
                except asyncio.TimeoutError:
                    return got
                if message.get("type") == "run.events":
                    got += [{"type": "run.event", "event": e} for e in message["events"]]
                else:
                    got.append(message)

        return async_to_sync(collect)()


@pytest.fixture
def listen(settings):
    """listen([group, ...]) -> Listener on a fresh in-memory channel layer."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return Listener
