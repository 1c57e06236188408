"""A new user's finding: examples the demo's `help` reply lists failed when typed as-is
(`patch hello.txt: old -> new` in a workspace without hello.txt, `read notes.txt` in one
without notes.txt). The examples are read from a real `help` turn's reply, never listed
here, and each runs as a real turn on the provider simulator over HTTP in a brand-new
session, so an example added to the help later is held to the same promise."""

from __future__ import annotations

import re

import pytest

from agents.backends.sandbox import sandbox_available
from sessions.models import ChildTask, Message, Session, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE = re.compile(r'"([^"\n]+)"')
"""An example in the help reply: a phrase in straight double quotes (what to type)."""
NONZERO_EXIT = re.compile(r"^\[exit code (-?[1-9]\d*)\]$", re.MULTILINE)
"""The terminal tool's closing line for a failed command (agents/tools/terminal.py). The
tool does not mark a failed command as an error, but a new user reads it as a failure."""
DRAIN_ROUNDS = 6
"""Rounds of running a session tree's queued turns: a delegating parent needs three (parent,
children, parent again); more would mean a turn that never settles."""
SETTLED = {Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED,
           Turn.Status.BUDGET_BLOCKED, Turn.Status.AWAITING_APPROVAL,
           Turn.Status.AWAITING_ANSWER}
"""Statuses no further run of the queue changes without a person (the assertions below
then say which ones are not a success)."""


@pytest.fixture(params=["local", pytest.param("sandbox", marks=pytest.mark.skipif(
    not sandbox_available(), reason="bubblewrap unusable here"))])
def alice(request, make_user, hermes_settings):
    """A user whose commands run on the backend a new user gets: the sandbox where
    bubblewrap works (`make run`'s auto), the local host otherwise."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": request.param}
    return make_user("alice", team="red")


def _tree(session: Session) -> list[Session]:
    """The session and every child agent's session below it."""
    found, frontier = [session], [session]
    while frontier:
        frontier = list(Session.objects.filter(parent__in=frontier))
        found += frontier
    return found


def _drain(session: Session) -> list[Session]:
    """Run the queued turns of ``session`` and of its child agents' sessions until every
    turn has settled (a delegating turn waits for its children, then resumes); returns the
    sessions of the tree."""
    for _ in range(DRAIN_ROUNDS):
        sessions = _tree(session)
        if not Turn.objects.filter(session__in=sessions).exclude(status__in=SETTLED).exists():
            return sessions
        for each in sessions:
            turn_run_task.apply(args=[each.pk])
    raise AssertionError(f"turns of session {session.pk} never settled: " + repr(list(
        Turn.objects.filter(session__in=_tree(session)).values_list("input_text", "status"))))


def _turn(user, text: str) -> tuple[Session, list[Session]]:
    """``text`` typed in a brand-new session (fresh workspace); the session and its tree
    once every turn has settled."""
    session = session_create(user=user)
    turn_start(session=session, user=user, text=text)
    return session, _drain(session)


def _problems(sessions: list[Session]) -> list[str]:
    """What a new user would read as a failure: a turn that did not complete, a tool result
    marked as an error, a command that exited non-zero."""
    problems = [f"turn {text!r} ended {status}" for text, status in Turn.objects.filter(
        session__in=sessions).exclude(status=Turn.Status.COMPLETED).values_list(
        "input_text", "status")]
    for tool in Message.objects.filter(session__in=sessions, role="tool").order_by("id"):
        if tool.is_error:
            problems.append(f"{tool.tool_name} failed: {tool.content[:200]}")
        elif tool.tool_name == "terminal" and NONZERO_EXIT.search(tool.content):
            problems.append(f"terminal exited non-zero: {tool.content[:200]}")
    return problems


def help_examples(user) -> list[str]:
    """The examples of a real `help` turn's reply, in the order it lists them."""
    session, _ = _turn(user, "help")
    reply = Message.objects.filter(session=session, role="assistant").last().content
    assert "I am the provider simulator" in reply, reply
    return list(dict.fromkeys(EXAMPLE.findall(reply)))


def test_the_help_lists_examples_to_type(alice):
    examples = help_examples(alice)
    # The parse must find the help's examples, or the test below would pass on nothing.
    assert len(examples) >= 10, examples
    assert "slow demo" in examples and "list the files and read README.md" in examples


def test_every_help_example_works_typed_as_is_in_a_new_session(alice):
    failures = {}
    for example in help_examples(alice):
        session, sessions = _turn(alice, example)
        tools = Message.objects.filter(session__in=sessions, role="tool").count()
        problems = _problems(sessions)
        if problems:
            failures[example] = problems
        elif not tools and "Hello! I am the provider simulator" in Message.objects.filter(
                session=session, role="assistant").last().content:
            # An example the demo does not understand gets the greeting and no tool: not an
            # error, but not what the help promised either.
            failures[example] = ["the demo did not recognise it"]
    assert not failures, "\n".join(f"{k!r}: {v}" for k, v in failures.items())
