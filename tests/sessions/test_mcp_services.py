"""Services mode (PostgreSQL, Redis, a real Celery worker): a team admin adds an MCP server
through the team page (a real connection check), a member's turn runs on the worker, the
worker starts and supervises the server, the team's "ask" policy parks the call for a
person, the team admin approves, and the resumed turn calls the tool."""

from __future__ import annotations

import time

import pytest

from simulator.script import Reply, Script, ToolCallSpec
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from sessions import mcp
from sessions.models import Message, Turn
from sessions.services import session_create, turn_start
from tests.mcp_servers.launch import stdio_command

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis_worker(settings):
    from celery.contrib.testing.worker import start_worker

    from hermes_web.celery import app

    assert settings.CELERY_BROKER_URL.startswith("redis://"), "services tests need REDIS_URL"
    app.control.purge()
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False,
                      shutdown_timeout=30) as worker:
        yield worker
    mcp.mcp_manager_reset()


def wait_status(turn: Turn, status: str, seconds: float = 60) -> Turn:
    deadline = time.monotonic() + seconds
    while True:
        turn.refresh_from_db()
        if turn.status == status:
            return turn
        assert time.monotonic() < deadline, (turn.status, turn.error)
        time.sleep(0.2)


def test_admin_adds_a_server_and_a_members_gated_call_runs_on_the_worker(
        make_user, login, hermes_settings, simulator, redis_worker):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local",
                              "MCP_STDIO_ALLOWED": "admins", "MCP_CHECK_TIMEOUT": 30.0,
                              "MCP_CONNECT_WAIT": 30.0}
    admin = make_user("ada", team="red", role="admin")
    member = make_user("mo", team="red")
    team = admin.memberships.get().team
    response = login(admin).post(f"/settings/teams/{team.pk}/mcp/", {
        "name": "tools", "transport": "stdio", "command": stdio_command("stdio_tools"),
        "default_policy": "ask", "enabled": "on"})
    assert response.status_code == 302

    def policy(request):
        if request.tool_results:
            return Reply(text="got " + request.tool_results[0].result)
        return Reply(text="calling", tool_calls=(
            ToolCallSpec(name="mcp__tools__add", input={"a": 20, "b": 22}),))

    simulator.state.script = Script(policy)
    session = session_create(user=member)
    turn_start(session=session, user=member, text="add please")
    turn = wait_status(Turn.objects.get(session=session), Turn.Status.AWAITING_APPROVAL)
    approval = ApprovalRequest.objects.get(session=session)
    assert approval.tool_name == "mcp__tools__add"
    approval_decide(user=admin, approval_id=approval.pk, choice="once")
    wait_status(turn, Turn.Status.COMPLETED)
    result = Message.objects.get(session=session, role="tool")
    assert result.content == "42" and not result.is_error
    assert Message.objects.filter(session=session, role="assistant").last().content == "got 42"
