"""`manage.py hermes chat|policy`: the CLI runs through the same services and policy."""

from __future__ import annotations

import io
import json
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db(transaction=True)




def run(*args, stdin: str | None = None) -> str:
    out = io.StringIO()
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        call_command("hermes", *args, stdout=out)
    finally:
        sys.stdin = old
    return out.getvalue()


def test_chat_prints_the_reply_and_json_events_carry_the_session(make_user, hermes_settings,
                                                                worker):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}
    make_user("erin")
    text = run("chat", "list the files and read README.md", "--user", "erin")
    assert "[tool] terminal" in text and "[tool] read_file" in text
    assert "(simulated model)" in text
    session_id = int(text.strip().rsplit("(session ", 1)[1].rstrip(")"))
    lines = run("chat", "hello again", "--user", "erin", "--session", str(session_id),
                "--json").splitlines()
    events = [json.loads(line) for line in lines]
    assert {e["session_id"] for e in events} == {session_id}
    assert events[0]["type"] == "turn.queued" and events[-1]["type"] == "turn.finished"


def test_chat_refuses_an_empty_message_and_another_users_session(make_user, hermes_settings):
    make_user("erin")
    make_user("fred")
    with pytest.raises(CommandError, match="empty"):
        run("chat", "   ", "--user", "erin")
    from sessions.services import session_create
    from django.contrib.auth import get_user_model

    theirs = session_create(user=get_user_model().objects.get(username="fred"))
    with pytest.raises(CommandError, match="no session"):
        run("chat", "hi", "--user", "erin", "--session", str(theirs.pk))


def test_policy_prints_decision_rule_and_normalised_command(make_user, hermes_settings):
    text = run("policy", "echo cm0gLXJmIC8= | base64 -d | sh", "--backend", "local")
    assert "decision:   deny" in text and "rule:       hardline" in text
    assert "rm -f -r /" in text


def test_policy_stdin_keeps_order_one_tab_separated_line_each(make_user, hermes_settings):
    commands = ["ls -la", "rm -rf build", "sudo rm -rf /home", "git status"]
    out = run("policy", "--stdin", "--backend", "local", stdin="\n".join(commands) + "\n")
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[2] for r in rows] == commands
    assert [r[0] for r in rows] == ["allow", "ask", "deny", "allow"]


def test_help_lists_every_subcommand_and_where_the_rest_lives_in_the_web_ui():
    """A user's finding: the CLI's help omitted approvals, memory and schedules. `hermes
    help`, `hermes` alone and `--help` show OVERVIEW: each subcommand the parser has (so a
    new one cannot be left out), and the web UI page of each feature without one, every
    path a real route of the app."""
    from django.urls import Resolver404, resolve

    from sessions.management.commands.hermes import OVERVIEW, Command

    assert run("help").strip() == OVERVIEW
    assert run().strip() == OVERVIEW
    parser = Command().create_parser("manage.py", "hermes")
    actions = next(a for a in parser._actions if a.dest == "action")
    assert set(actions.choices) == {"chat", "policy", "reprice", "help"}
    for name in actions.choices:
        assert f"\n  {name} " in OVERVIEW, name
    assert OVERVIEW in parser.format_help()  # the epilog, line breaks kept
    for feature, path in (("Approvals", "/approvals/"), ("Memory", "/memory/"),
                          ("Schedules", "/schedules/"), ("Webhooks", "/webhooks/"),
                          ("Spend", "/spend/"), ("Settings", "/settings/"),
                          ("", "/approvals/rules/"), ("Questions", "/sessions/<id>/")):
        assert f"{feature}" in OVERVIEW and f" {path} " in OVERVIEW, path
        try:
            resolve(path.replace("<id>", "1"))
        except Resolver404:
            pytest.fail(f"the help points to {path}, which is not a page")
