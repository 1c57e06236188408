"""MCP tools through real turns: the simulator (real HTTP, the anthropic SDK) calls
mcp__<server>__<tool>; the worker's connection manager talks to real MCP servers
(tests/mcp_servers, same SDK); the policy gate, the spill and the one rebuild function are
the real ones. Late servers, crashes mid-call, malformed results and flapping included."""

from __future__ import annotations

import time

import pytest

from agents.availability import AvailabilityCache
from simulator.script import Reply, Script, ToolCallSpec
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from sessions import mcp, toolbox
from sessions.mcp_models import McpServer, SessionToolSchema
from sessions.models import Message, RunEvent, Session, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task
from tests.mcp_servers.launch import http_server, stdio_command

pytestmark = pytest.mark.django_db(transaction=True)


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(toolbox, "AVAILABILITY", AvailabilityCache(clock=clock))
    return clock


@pytest.fixture
def alice(make_user, hermes_settings, clock):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "RETRY_BASE_DELAY": 0.01,
                              "BACKEND": "local", "MCP_CONNECT_WAIT": 20.0,
                              "MCP_PING_INTERVAL": 0.5, "MCP_CALL_TIMEOUT": 20.0,
                              "MCP_HTTP_ALLOW_PRIVATE": ["127.0.0.1"]}  # the test servers
    yield make_user("alice", team="red")
    mcp.mcp_manager_reset()


def add_server(user, name, *, command="", url="", policy="allow", **fields) -> McpServer:
    team = user.memberships.get().team
    return McpServer.objects.create(team=team, name=name, command=command, url=url,
                                    transport="http" if url else "stdio",
                                    default_policy=policy, **fields)


def calls(**by_word):
    """A script: a user message containing WORD calls by_word[WORD] = (tool, input);
    tool results are answered with their text."""
    def policy(request):
        if request.tool_results:
            return Reply(text="result: " + " | ".join(x.result[:200]
                                                      for x in request.tool_results))
        for word, (tool, args) in by_word.items():
            if word in request.last_user_text:
                return Reply(text="calling", tool_calls=(ToolCallSpec(name=tool, input=args),))
        return Reply(text=f"you said {request.last_user_text}")
    return Script(policy)


def run_turn(session, user, text) -> Turn:
    turn_start(session=session, user=user, text=text)
    turn_run_task.apply(args=[session.pk])
    return Turn.objects.filter(session=session).order_by("-id").first()


def tool_message(session) -> Message:
    return Message.objects.filter(session=session, role="tool").order_by("-id").first()


def offered(simulator, index=-1) -> list[str]:
    return [t["name"] for t in simulator.state.requests[index].body.get("tools") or []]


def test_a_saved_http_server_that_now_resolves_to_the_host_is_refused_by_the_worker(
        alice, simulator, hermes_settings):
    """The form checked the URL when it was saved; the name can be re-pointed since (DNS
    rebinding) or the operator's allowance withdrawn. The worker checks before every request:
    the server never connects, its tools are never offered, the turn goes on."""
    with http_server() as url:
        hermes_settings.HERMES = {**hermes_settings.HERMES, "MCP_HTTP_ALLOW_PRIVATE": [],
                                  "MCP_CONNECT_WAIT": 3.0}
        row = add_server(alice, "web", url=url.replace("127.0.0.1", "localhost"))
        simulator.state.script = calls(shout=("mcp__web__shout", {"text": "hi"}))
        session = session_create(user=alice)
        turn = run_turn(session, alice, "shout")
        assert turn.status == Turn.Status.COMPLETED
        assert "mcp__web__shout" not in offered(simulator)
        status = mcp.mcp_manager().status(mcp.server_key(row))
        assert status.state == "failed" and "loopback address" in status.error
        assert not McpServer.objects.get(pk=row.pk).tools_listed


def test_a_members_session_calls_the_teams_stdio_server_tool(alice, simulator):
    add_server(alice, "tools", command=stdio_command("stdio_tools"))
    simulator.state.script = calls(echo=("mcp__tools__echo", {"text": "hello"}))
    session = session_create(user=alice)
    turn = run_turn(session, alice, "please echo")
    assert turn.status == Turn.Status.COMPLETED
    result = tool_message(session)
    assert result.tool_name == "mcp__tools__echo" and result.content == "echo: hello"
    assert not result.is_error
    body_tools = {t["name"]: t for t in simulator.state.requests[0].body["tools"]}
    assert body_tools["mcp__tools__echo"]["input_schema"]["properties"]["text"]["type"] == \
        "string"
    assert "read_file" in body_tools  # the built-ins are still there
    session.refresh_from_db()
    assert "mcp__tools__add" in session.tool_names
    rebuilt = RunEvent.objects.get(session=session, type="tools.rebuilt")
    assert rebuilt.payload["reason"] == "new session"
    assert "mcp__tools__echo" in rebuilt.payload["added"]
    floor = toolbox.toolset_tokens(session)  # what the context gauge reads
    names = {t["name"]: t for t in floor["toolsets"]}
    assert names["mcp: tools"]["tools"] == ["mcp__tools__add", "mcp__tools__big",
                                            "mcp__tools__crash", "mcp__tools__echo",
                                            "mcp__tools__sleepy"]
    assert floor["system"] > 0 and floor["total"] == floor["system"] + floor["tools"]


def test_ask_policy_waits_for_a_person_and_runs_after_approval(alice, simulator):
    add_server(alice, "tools", command=stdio_command("stdio_tools"), policy="ask",
               tool_policies={"add": "read_only"})
    simulator.state.script = calls(echo=("mcp__tools__echo", {"text": "gated"}),
                                   add=("mcp__tools__add", {"a": 1, "b": 2}))
    session = session_create(user=alice)
    turn = run_turn(session, alice, "please echo")
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.tool_name == "mcp__tools__echo"
    assert not Message.objects.filter(session=session, role="tool").exists()
    approval_decide(user=alice, approval_id=approval.pk, choice="once")
    turn_run_task.apply(args=[session.pk])
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED
    assert tool_message(session).content == "echo: gated"
    turn = run_turn(session, alice, "now add")  # read_only: no approval
    assert turn.status == Turn.Status.COMPLETED and tool_message(session).content == "3"


def test_a_server_that_dies_mid_call_gives_a_tool_error_and_the_turn_goes_on(alice, simulator):
    add_server(alice, "tools", command=stdio_command("stdio_tools"))
    simulator.state.script = calls(crash=("mcp__tools__crash", {}),
                                   echo=("mcp__tools__echo", {"text": "back"}))
    session = session_create(user=alice)
    turn = run_turn(session, alice, "crash it")
    assert turn.status == Turn.Status.COMPLETED
    result = tool_message(session)
    assert result.is_error and "failed during the call to crash" in result.content
    final = Message.objects.filter(session=session, role="assistant").last()
    assert final.content.startswith("result:")
    deadline = time.monotonic() + 20  # the supervisor reconnects with backoff
    key = mcp.server_key(McpServer.objects.get(name="tools"))
    while mcp.mcp_manager().status(key).generation < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    turn = run_turn(session, alice, "echo again")
    assert turn.status == Turn.Status.COMPLETED and tool_message(session).content == "echo: back"
    assert not RunEvent.objects.filter(session=session, type="tools.rebuilt",
                                       payload__reason="availability").exists()


def test_a_server_that_connects_late_reaches_the_session_through_the_rebuild(alice, simulator,
                                                                              settings):
    settings.HERMES = {**settings.HERMES, "MCP_CONNECT_WAIT": 0.2}
    add_server(alice, "slow", command=stdio_command("stdio_tools", "--slow", "3"),
               tools_listed=[])
    simulator.state.script = calls(echo=("mcp__slow__echo", {"text": "late"}))
    session = session_create(user=alice)
    turn = run_turn(session, alice, "hello")
    assert turn.status == Turn.Status.COMPLETED
    assert not any(n.startswith("mcp__") for n in offered(simulator))
    key = mcp.server_key(McpServer.objects.get(name="slow"))
    assert mcp.mcp_manager().wait_connected(key, 30)
    first_turn_requests = len(simulator.state.requests)
    turn = run_turn(session, alice, "echo now")
    assert turn.status == Turn.Status.COMPLETED
    assert tool_message(session).content == "echo: late"
    assert "mcp__slow__echo" in offered(simulator, first_turn_requests)
    # Within a turn the tool block never moves: both requests of turn 2 offer the same.
    assert offered(simulator, first_turn_requests) == offered(simulator, -1)
    rebuilt = RunEvent.objects.filter(session=session, type="tools.rebuilt").order_by("seq")
    assert [e.payload["reason"] for e in rebuilt] == ["new session", "availability"]
    assert "mcp__slow__echo" in rebuilt.last().payload["added"]
    assert McpServer.objects.get(name="slow").tools_listed  # the worker stored the listing


def test_flapping_keeps_the_tool_within_sixty_seconds_then_a_rebuild_drops_it(
        alice, simulator, clock):
    with http_server() as url:
        add_server(alice, "web", url=url)
        simulator.state.script = calls(shout=("mcp__web__shout", {"text": "hi"}))
        session = session_create(user=alice)
        assert run_turn(session, alice, "shout").status == Turn.Status.COMPLETED
        assert tool_message(session).content == "HI"
    # The server is gone; the manager notices on its next keep-alive.
    key = mcp.server_key(McpServer.objects.get(name="web"))
    deadline = time.monotonic() + 20
    while mcp.mcp_manager().status(key).state == "connected":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    clock.now += 45  # past the 30 s success TTL, inside the 60 s grace
    turn = run_turn(session, alice, "shout again")
    assert turn.status == Turn.Status.COMPLETED
    assert "mcp__web__shout" in offered(simulator)  # not amputated by one failed probe
    result = tool_message(session)
    assert result.is_error and "not connected" in result.content
    clock.now += 20  # 65 s after the last success: a real outage
    run_turn(session, alice, "hello")
    assert "mcp__web__shout" not in offered(simulator)
    last = RunEvent.objects.filter(session=session, type="tools.rebuilt").order_by("seq").last()
    assert last.payload["reason"] == "availability"
    assert last.payload["removed"] == ["mcp__web__lookup", "mcp__web__shout"]


def test_a_malformed_result_and_a_large_output(alice, simulator):
    add_server(alice, "odd", command=stdio_command("malformed"), expose=["bad_result", "fine"])
    add_server(alice, "tools", command=stdio_command("stdio_tools"))
    simulator.state.script = calls(bad=("mcp__odd__bad_result", {}),
                                   big=("mcp__tools__big", {"chars": 150_000}))
    session = session_create(user=alice)
    assert run_turn(session, alice, "bad one").status == Turn.Status.COMPLETED
    result = tool_message(session)
    assert result.is_error and "malformed result" in result.content
    session.refresh_from_db()
    assert "mcp__odd__broken_schema" not in session.tool_names
    assert run_turn(session, alice, "big one").status == Turn.Status.COMPLETED
    result = tool_message(session)
    assert len(result.content) == 150_000  # the display keeps it all
    assert "<persisted-output>" in (result.sent_content or "")  # the model sees the spill


def test_a_rebuild_asked_for_mid_turn_waits_for_the_next_turn(alice, simulator):
    session = session_create(user=alice)
    run_turn(session, alice, "hello")
    turn = Turn.objects.create(session=session, input_text="x", status=Turn.Status.RUNNING)
    assert toolbox.tool_schema_rebuild(session, reason="admin:root") is None
    assert SessionToolSchema.objects.get(session=session).pending == "admin:root"
    turn.status = Turn.Status.COMPLETED
    turn.save()
    run_turn(session, alice, "again")
    last = RunEvent.objects.filter(session=session, type="tools.rebuilt").order_by("seq").last()
    assert last.payload["reason"] == "admin:root"
    assert SessionToolSchema.objects.get(session=session).pending == ""


def test_the_django_admin_action_rebuilds_an_idle_session(alice, simulator, make_user, login):
    root = make_user("root", staff=True)
    root.is_superuser = True
    root.save()
    session = session_create(user=alice)
    run_turn(session, alice, "hello")
    client = login(root)
    response = client.post("/admin/agent_sessions/session/", {
        "action": "rebuild_tool_schema", "_selected_action": [session.pk]}, follow=True)
    assert response.status_code == 200 and b"Tool schema rebuilt for 1" in response.content
    last = RunEvent.objects.filter(session=session, type="tools.rebuilt").order_by("seq").last()
    assert last.payload["reason"] == "admin:root"
    assert Session.objects.get(pk=session.pk).system_prompt == ""  # rebuilt at the next turn


def test_a_builtin_whose_predicate_fails_is_left_out_of_a_new_sessions_schema(
        alice, simulator, monkeypatch):
    terminal = toolbox._full_registry().get("terminal")
    assert terminal.availability()  # bash is installed here
    monkeypatch.setattr(type(terminal), "availability", staticmethod(lambda: False))
    simulator.state.script = calls()
    session = session_create(user=alice)
    assert run_turn(session, alice, "hello").status == Turn.Status.COMPLETED
    assert "terminal" not in offered(simulator) and "read_file" in offered(simulator)


def test_stop_during_an_mcp_call_cancels_it_and_the_next_message_is_answered(alice, simulator):
    import threading

    from django.db import connection

    from sessions.services import turn_stop

    add_server(alice, "tools", command=stdio_command("stdio_tools"))
    simulator.state.script = calls(sleep=("mcp__tools__sleepy", {"seconds": 30}))
    session = session_create(user=alice)
    turn_start(session=session, user=alice, text="sleep a while")

    def in_thread():
        try:
            turn_run_task.apply(args=[session.pk])
        finally:
            connection.close()

    worker = threading.Thread(target=in_thread)
    started = time.monotonic()
    worker.start()
    while not RunEvent.objects.filter(session=session, type="tool.called").exists():
        assert time.monotonic() - started < 30
        time.sleep(0.1)
    assert turn_stop(session=session)
    worker.join(timeout=30)
    assert not worker.is_alive() and time.monotonic() - started < 30
    assert Turn.objects.get(session=session).status == Turn.Status.CANCELLED
    result = tool_message(session)
    assert result.is_error and "stopped by the user" in result.content
    simulator.state.script = calls()
    assert run_turn(session, alice, "are you there").status == Turn.Status.COMPLETED


def test_a_server_whose_tools_changed_is_restarted_and_rebuilt_between_turns(alice, simulator):
    row = add_server(alice, "tools", command=stdio_command("stdio_tools"))
    simulator.state.script = calls(extra=("mcp__tools__extra", {}))
    session = session_create(user=alice)
    run_turn(session, alice, "hello")
    assert "mcp__tools__extra" not in offered(simulator)
    before = len(simulator.state.requests)
    McpServer.objects.filter(pk=row.pk).update(command=stdio_command("stdio_tools", "--extra"))
    assert run_turn(session, alice, "call extra").status == Turn.Status.COMPLETED
    assert "mcp__tools__extra" in offered(simulator, before)
    assert tool_message(session).content == "extra"
    last = RunEvent.objects.filter(session=session, type="tools.rebuilt").order_by("seq").last()
    assert (last.payload["reason"], last.payload["added"]) == ("availability",
                                                               ["mcp__tools__extra"])
    from sessions.rendering import event_html

    html = event_html({"type": last.type, "seq": last.seq, "payload": last.payload})
    assert "The tools offered changed before this turn (availability): added: " \
           "mcp__tools__extra." in html
    first = RunEvent.objects.filter(session=session, type="tools.rebuilt").order_by("seq")[0]
    assert event_html({"type": first.type, "seq": first.seq, "payload": first.payload}) is None


def test_a_server_that_never_starts_costs_the_wait_once_not_every_turn(alice, simulator,
                                                                       settings):
    settings.HERMES = {**settings.HERMES, "MCP_CONNECT_WAIT": 2.0}
    add_server(alice, "broken", command="/bin/false")
    simulator.state.script = calls()
    session = session_create(user=alice)
    started = time.monotonic()
    assert run_turn(session, alice, "one").status == Turn.Status.COMPLETED
    first = time.monotonic() - started
    started = time.monotonic()
    assert run_turn(session, alice, "two").status == Turn.Status.COMPLETED
    second = time.monotonic() - started
    assert first >= 2.0 and second < first - 1.0, (first, second)
    assert not any(n.startswith("mcp__") for n in offered(simulator))
    status = mcp.mcp_manager().status(mcp.server_key(McpServer.objects.get(name="broken")))
    assert status.state in ("failed", "connecting") and status.generation == 0


def test_a_child_session_inherits_its_parents_mcp_schemas_and_keeps_its_toolset(alice,
                                                                                 simulator):
    add_server(alice, "tools", command=stdio_command("stdio_tools"))
    simulator.state.script = calls(echo=("mcp__tools__echo", {"text": "child"}))
    parent = session_create(user=alice)
    run_turn(parent, alice, "hello")
    parent.refresh_from_db()
    child = Session.objects.create(owner=alice, team=parent.team, parent=parent,
                                   provider=parent.provider, model=parent.model,
                                   tool_names=[n for n in parent.tool_names
                                               if n != "mcp__tools__crash"])
    assert toolbox.tool_schema_refresh(child) is None  # a child keeps what it was given
    registry = toolbox.registry_for(child)
    assert "mcp__tools__echo" in registry.names() and "mcp__tools__crash" not in registry.names()
    # A child's turn is created by the delegation, not by turn_start (its session is
    # read-only to people).
    turn = Turn.objects.create(session=child, input_text="echo please", origin="child")
    turn_run_task.apply(args=[child.pk])
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert tool_message(child).content == "echo: child"
