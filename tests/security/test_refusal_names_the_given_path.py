"""A file tool's refusal names the path as the model gave it, never what it resolved to.

A tester's finding: read_file "/proc/self/cwd/../2/secret_a.txt" was answered "not executed:
/proc/10336/2/secret_a.txt resolves outside the session workspace", which told the model the
worker's pid. The policy's decision (deny, outside_workspace, the resolved path kept for the
audit) is unchanged; only the sentence the model reads is."""

from __future__ import annotations

import json
import os

import pytest

from agents.messages import ToolCall
from agents.policy import PolicyContext, decide
from sessions.models import Message, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task
from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec

pytestmark = pytest.mark.django_db(transaction=True)

GIVEN = "/proc/self/cwd/../2/secret_a.txt"
RESOLVED = f"/proc/{os.getpid()}/2/secret_a.txt"  # this process is the (embedded) worker


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local"}
    return make_user("alice")


def test_a_real_turn_reads_the_refusal_with_the_path_it_gave(alice, simulator):
    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="noted")
        return Reply(text="reading", tool_calls=(
            ToolCallSpec(name="read_file", input={"path": GIVEN}),))

    simulator.state.script = Script(policy)
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="read the other file")
    turn_run_task.apply(args=[session.pk])
    assert Turn.objects.get(session=session).status == Turn.Status.COMPLETED
    result = Message.objects.get(session=session, role="tool")
    assert result.is_error
    assert result.content == (f"not executed: {GIVEN} resolves outside the session "
                              "workspace"), result.content
    assert f"/proc/{os.getpid()}" not in result.content
    sent = json.dumps([r.body for r in simulator.state.requests])
    assert RESOLVED not in sent and f"/proc/{os.getpid()}/" not in sent


def test_the_decision_is_unchanged(tmp_path):
    """Same verdict, rule, risk class and audited (resolved) path as before; for several
    spellings of the outside, each named as given."""
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = PolicyContext(session_id="s1", user_id="u1", workspace=str(ws))
    d = decide(ToolCall(id="c1", name="read_file", arguments=json.dumps({"path": GIVEN})), ctx)
    assert (d.verdict, d.rule, d.risk_class, d.normalized) == (
        "deny", "outside_workspace", "host_read", RESOLVED)
    assert d.reason == f"{GIVEN} resolves outside the session workspace"
    (ws / "up").symlink_to(tmp_path)
    for path in ("../../etc/passwd", "up/elsewhere.txt"):
        d = decide(ToolCall(id="c2", name="write_file",
                            arguments=json.dumps({"path": path, "content": "x"})), ctx)
        assert (d.verdict, d.rule, d.risk_class) == ("deny", "outside_workspace", "host_write")
        assert d.reason == f"{path} resolves outside the session workspace", d.reason


def test_the_app_config_refusal_names_the_given_path_too(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "config"
    config.mkdir()
    (ws / "up").symlink_to(tmp_path)
    ctx = PolicyContext(session_id="s1", user_id="u1", workspace=str(ws),
                        app_config_paths=(str(config),))
    d = decide(ToolCall(id="c1", name="read_file",
                        arguments=json.dumps({"path": "up/config/settings.py"})), ctx)
    assert (d.verdict, d.rule, d.normalized) == ("deny", "app_config",
                                                 str(config / "settings.py"))
    assert d.reason == ("up/config/settings.py is the application's own configuration or a "
                        "credential file")
