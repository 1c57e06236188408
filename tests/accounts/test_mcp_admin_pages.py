"""The team admin's MCP server pages: add (with a real connection check against the test
servers), edit, remove; every bad input a clear form error with nothing stored; members
and strangers get 404; the Settings page shows the floor growing with a server's tools."""

from __future__ import annotations

import re

import pytest

from approvals.models import AuditEntry
from sessions import mcp
from sessions.mcp_models import McpServer
from tests.mcp_servers.launch import http_server, stdio_command

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client(make_user, login, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "MCP_CHECK_TIMEOUT": 20.0,
                              "MCP_STDIO_ALLOWED": "admins",
                              "MCP_HTTP_ALLOW_PRIVATE": ["127.0.0.1"]}  # the test servers
    admin = make_user("ada", team="red", role="admin")
    yield login(admin), admin.memberships.get().team
    mcp.mcp_manager_reset()


def form(**fields):
    data = {"name": "tools", "transport": "stdio", "command": stdio_command("stdio_tools"),
            "url": "", "env": "", "expose": "", "default_policy": "ask", "tool_policies": "",
            "enabled": "on"}
    data.update(fields)
    return data


def errors(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_an_admin_adds_a_stdio_server_and_its_tools_are_listed_with_their_cost(admin_client):
    client, team = admin_client
    response = client.post(f"/settings/teams/{team.pk}/mcp/",
                           form(tool_policies="add: read_only\necho: allow", env="A=1"))
    assert response.status_code == 302
    row = McpServer.objects.get(team=team, name="tools")
    assert [t["name"] for t in row.tools_listed] == ["add", "big", "crash", "echo", "sleepy"]
    assert row.policy_for("add") == "read_only" and row.policy_for("crash") == "ask"
    assert row.env == {"A": "1"}
    assert AuditEntry.objects.filter(action="team.mcp_server").exists()
    page = client.get(f"/settings/teams/{team.pk}/mcp/")
    html = errors(page)
    assert "add (read_only)" in html and "echo (allow)" in html
    tokens = int(re.search(r'data-server="tools".*?class="tokens">(\d+)<', html).group(1))
    assert tokens > 50


def test_an_http_server_is_checked_and_saved(admin_client):
    client, team = admin_client
    with http_server() as url:
        response = client.post(f"/settings/teams/{team.pk}/mcp/",
                               form(name="web", transport="http", command="", url=url))
    assert response.status_code == 302
    assert [t["name"] for t in McpServer.objects.get(name="web").tools_listed] == \
        ["lookup", "shout"]


@pytest.mark.parametrize("fields, message", [
    ({"command": "/no/such/server --stdio"}, "is not an executable on this server"),
    ({"command": "python 'unclosed"}, "cannot be split into words"),
    ({"command": ""}, "A stdio server needs a command"),
    ({"transport": "http", "url": "ftp://example.com/mcp"}, "Give an http:// or https:// URL"),
    ({"transport": "http", "url": "not a url"}, "Give an http:// or https:// URL"),
    ({"name": "Bad_Name"}, "lowercase letters, digits or hyphens"),
    ({"env": "NOT VALID"}, "is not KEY=VALUE"),
    ({"tool_policies": "echo: sometimes"}, "policy one of read_only, ask, allow"),
    ({"command": stdio_command("malformed")}, "broken_schema: the input schema is not valid "
                                               "JSON Schema"),
    ({"expose": "nope"}, "The server does not offer: nope"),
    ({"command": "/bin/true"}, "Could not connect to the server"),
])
def test_bad_input_is_a_clear_form_error_and_nothing_is_stored(admin_client, fields, message):
    client, team = admin_client
    response = client.post(f"/settings/teams/{team.pk}/mcp/", form(**fields))
    assert response.status_code == 400
    assert message.replace("'", "&#x27;") in errors(response) or message in errors(response)
    assert not McpServer.objects.exists()


@pytest.mark.parametrize("url, problem", [
    ("http://127.0.0.1:5432/mcp", "127.0.0.1, a loopback address"),   # the app's PostgreSQL
    ("http://localhost:6379/", "a loopback address"),                 # Redis, by name
    ("http://169.254.169.254/latest/meta-data/", "a link-local address"),  # cloud metadata
    ("http://[::ffff:10.0.0.1]/mcp", "a private address"),
    ("http://no-such-host.invalid/mcp", "does not resolve"),
])
def test_an_http_server_on_the_hosts_own_network_is_refused_even_with_skip_check(
        admin_client, hermes_settings, url, problem):
    """SSRF: a team admin must not make the worker fetch the host's own services. The
    operator's allowance names 127.0.0.1 only for other tests; here nothing is allowed."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "MCP_HTTP_ALLOW_PRIVATE": []}
    client, team = admin_client
    response = client.post(f"/settings/teams/{team.pk}/mcp/",
                           form(name="web", transport="http", command="", url=url,
                                skip_check="on"))
    assert response.status_code == 400
    assert problem in errors(response)
    if "address" in problem:  # the admin learns who can allow it
        assert "HERMES_MCP_HTTP_ALLOW_PRIVATE" in errors(response)
    assert not McpServer.objects.exists()


def test_a_name_already_used_in_the_team_collides(admin_client):
    client, team = admin_client
    McpServer.objects.create(team=team, name="tools", transport="stdio", command="x")
    response = client.post(f"/settings/teams/{team.pk}/mcp/", form(skip_check="on"))
    assert response.status_code == 400 and "its tool names would collide" in errors(response)
    assert McpServer.objects.count() == 1


def test_leaving_the_invalid_tool_out_saves_the_malformed_server(admin_client):
    client, team = admin_client
    response = client.post(f"/settings/teams/{team.pk}/mcp/",
                           form(name="odd", command=stdio_command("malformed"),
                                expose="fine\nbad_result"))
    assert response.status_code == 302
    assert McpServer.objects.get(name="odd").expose == ["bad_result", "fine"]


def test_edit_and_remove(admin_client):
    client, team = admin_client
    row = McpServer.objects.create(team=team, name="tools", transport="stdio",
                                   command=stdio_command("stdio_tools"))
    page = client.get(f"/settings/teams/{team.pk}/mcp/{row.pk}/")
    assert page.status_code == 200 and "stdio_tools.py" in errors(page)
    response = client.post(f"/settings/teams/{team.pk}/mcp/{row.pk}/",
                           form(default_policy="allow", skip_check="on"))
    assert response.status_code == 302
    assert McpServer.objects.get(pk=row.pk).default_policy == "allow"
    response = client.post(f"/settings/teams/{team.pk}/mcp/{row.pk}/delete/")
    assert response.status_code == 302 and not McpServer.objects.exists()


def test_members_and_other_teams_admins_get_404(admin_client, make_user, login):
    client, team = admin_client
    row = McpServer.objects.create(team=team, name="tools", transport="stdio", command="x")
    for user in (make_user("mo", team="red"), make_user("eve", team="blue", role="admin")):
        other = login(user)
        assert other.get(f"/settings/teams/{team.pk}/mcp/").status_code == 404
        assert other.post(f"/settings/teams/{team.pk}/mcp/",
                          form(skip_check="on")).status_code == 404
        assert other.post(f"/settings/teams/{team.pk}/mcp/{row.pk}/delete/").status_code == 404
    assert McpServer.objects.count() == 1


def test_the_settings_page_shows_the_floor_and_a_servers_cost(admin_client):
    client, team = admin_client
    before = errors(client.get("/settings/"))
    total = lambda html: int(re.search(r'data-toolset="total">.*?class="tokens">(\d+)<',
                                       html).group(1))
    assert 'data-toolset="files"' in before and 'data-toolset="system"' in before
    client.post(f"/settings/teams/{team.pk}/mcp/", form())
    after = errors(client.get("/settings/"))
    assert 'data-toolset="mcp: tools"' in after
    server = int(re.search(r'data-toolset="mcp: tools">.*?class="tokens">(\d+)<',
                           after).group(1))
    assert total(after) - total(before) == server > 50


@pytest.mark.parametrize("allowed, staff, ok", [("staff", False, False), ("staff", True, True),
                                                ("off", True, False), ("admins", False, True)])
def test_who_may_add_a_stdio_server_is_the_operators_choice(make_user, login, settings,
                                                           allowed, staff, ok):
    settings.HERMES = {**settings.HERMES, "MCP_STDIO_ALLOWED": allowed,
                       "MCP_CHECK_TIMEOUT": 20.0}
    admin = make_user("ops", team="green", role="admin", staff=staff)
    team = admin.memberships.get().team
    response = login(admin).post(f"/settings/teams/{team.pk}/mcp/", form(skip_check="on"))
    assert response.status_code == (302 if ok else 400)
    if not ok:
        assert "stdio servers run a command on the server host" in errors(response)
    assert McpServer.objects.filter(team=team).exists() == ok
