"""MCP servers from the UI to a member's chat, in a real browser (Debian's chromium,
Playwright; daphne in embedded mode with its in-process worker and simulator): the team
admin opens Settings → MCP servers, gets a clear error for a bad URL, adds the test stdio
server with the "allowed" policy, sees its tools and their token cost; a member's new
session then calls mcp__tools__echo and the tool card and the reply show its result."""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import sim_headers
from tests.browser.conftest import embedded_server
from tests.browser.conftest import logged_in
from tests.browser.conftest import send_message
from tests.mcp_servers.launch import stdio_command

pytestmark = pytest.mark.browser

MEMBER, MEMBER_PASSWORD = "mia", "mia-correct-horse-42"
WAIT_MS = 30_000
RULES = [
    {"tool_result": "echo: from the browser", "text": "The server answered: echo done."},
    {"user": "echo", "text": "Calling the team's tool.",
     "tool_calls": [{"name": "mcp__tools__echo", "input": {"text": "from the browser"}}]},
]
SETUP = f"""
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("demo_user")
from django.contrib.auth import get_user_model
from accounts.models import Membership, Team
user = get_user_model().objects.create_user(username={MEMBER!r}, password={MEMBER_PASSWORD!r})
Membership.objects.create(user=user, team=Team.objects.get(name="demo"), role="member")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    env = {"HERMES_BACKEND": "local", "HERMES_MCP_STDIO_ALLOWED": "admins"}
    with embedded_server(tmp_path_factory.mktemp("hermes-mcp"), env_extra=env,
                         setup=SETUP) as running:
        yield running


def test_admin_adds_a_server_and_a_members_session_calls_it(server, browser):
    url, sim_url, password = server
    httpx.post(f"{sim_url}/_sim/script", json={"rules": RULES},
               headers=sim_headers(sim_url), timeout=10).raise_for_status()
    context, admin = logged_in(browser, url, "demo", password)
    admin.set_default_timeout(WAIT_MS)
    admin.goto(f"{url}/settings/")
    admin.click("text=MCP servers")
    admin.wait_for_selector("#mcp-server-form")
    admin.fill("#id_name", "tools")
    admin.select_option("#id_transport", "http")
    admin.fill("#id_url", "not a url")
    admin.click("#mcp-server-form button[type=submit]")
    admin.wait_for_selector("text=Give an http:// or https:// URL")
    assert "No MCP servers yet." in admin.inner_text("#mcp-servers")

    admin.select_option("#id_transport", "stdio")
    admin.fill("#id_url", "")
    admin.fill("#id_command", stdio_command("stdio_tools"))
    admin.select_option("#id_default_policy", "allow")
    with admin.expect_navigation():
        admin.click("#mcp-server-form button[type=submit]")
    admin.wait_for_selector("#mcp-servers tr[data-server=tools], .errorlist")
    assert admin.locator(".errorlist").count() == 0, admin.inner_text("#mcp-server-form")
    row = admin.locator("#mcp-servers tr[data-server=tools]")
    assert "echo (allow)" in row.inner_text()
    assert int(row.locator(".tokens").inner_text()) > 50
    admin.goto(f"{url}/settings/")
    assert admin.locator("#floor tr[data-toolset='mcp: tools']").count() == 1
    context.close()

    context, member = logged_in(browser, url, MEMBER, MEMBER_PASSWORD)
    member.set_default_timeout(WAIT_MS)
    member.click("#new-session")
    member.wait_for_selector("#composer-text")
    send_message(member, "please echo something")
    member.wait_for_selector("#transcript >> text=The server answered: echo done.")
    card = member.locator(".tool-card").first
    assert "mcp__tools__echo" in card.text_content()
    assert "echo: from the browser" in card.text_content()
    context.close()
