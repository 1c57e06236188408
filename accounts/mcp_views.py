"""A team's MCP servers, for its admins: /settings/teams/<id>/mcp/ lists them with the
tokens their tools add to every request and adds one; .../mcp/<server>/ edits one;
.../mcp/<server>/delete/ removes one (POST). Anyone but a team admin gets 404."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django.contrib.auth.decorators import login_required

from accounts.mcp_forms import McpServerForm
from accounts.mcp_services import mcp_server_delete, mcp_server_save
from accounts.services import team_get_for_admin
from agents.floor import floor_tokens
from agents.messages import ToolSpec
from agents.tools.mcp import full_name
from sessions.mcp_models import McpServer
from sessions.toolbox import toolset_tokens


def _server_rows(team) -> list[dict]:
    rows = []
    for server in McpServer.objects.filter(team=team).order_by("name"):
        specs = [ToolSpec(name=full_name(server.name, t["name"]),
                          description=t.get("description", ""),
                          input_schema=t.get("input_schema") or {})
                 for t in server.tools_listed or [] if server.exposes(t["name"])]
        rows.append({"server": server, "tokens": floor_tokens(system="", tools=specs)["tools"],
                     "tools": [{"name": t["name"], "policy": server.policy_for(t["name"]),
                                "exposed": server.exposes(t["name"])}
                               for t in server.tools_listed or []]})
    return rows


@login_required
@require_http_methods(["GET", "POST"])
def team_mcp_view(request: HttpRequest, team_id: int) -> HttpResponse:
    """List the team's servers and add one (POST). A form error answers 400."""
    team = team_get_for_admin(user=request.user, team_id=team_id)
    form = McpServerForm(request.POST or None, team=team, user=request.user)
    if request.method == "POST" and form.is_valid():
        row = mcp_server_save(user=request.user, team_id=team.pk, data=form.cleaned_data)
        messages.success(request, f"MCP server {row.name} saved; members' sessions offer "
                                  "its tools from their next turn.")
        return redirect("team_mcp", team_id=team.pk)
    return render(request, "accounts/team_mcp.html", {
        "team": team, "form": form, "servers": _server_rows(team),
        "floor": toolset_tokens(team_id=team.pk)},
        status=400 if request.method == "POST" else 200)


@login_required
@require_http_methods(["GET", "POST"])
def team_mcp_edit_view(request: HttpRequest, team_id: int, server_id: int) -> HttpResponse:
    """Edit one server (POST saves; a form error answers 400)."""
    team = team_get_for_admin(user=request.user, team_id=team_id)
    server = McpServer.objects.filter(pk=server_id, team=team).first()
    if server is None:
        raise Http404("No such server")
    form = McpServerForm(request.POST or None, team=team, user=request.user,
                         instance=server)
    if request.method == "POST" and form.is_valid():
        mcp_server_save(user=request.user, team_id=team.pk, data=form.cleaned_data,
                        instance=server)
        messages.success(request, f"MCP server {form.cleaned_data['name']} saved.")
        return redirect("team_mcp", team_id=team.pk)
    return render(request, "accounts/team_mcp_edit.html",
                  {"team": team, "form": form, "server": server},
                  status=400 if request.method == "POST" else 200)


@login_required
@require_POST
def team_mcp_delete_view(request: HttpRequest, team_id: int, server_id: int) -> HttpResponse:
    mcp_server_delete(user=request.user, team_id=team_id, server_id=server_id)
    messages.success(request, "MCP server removed; sessions drop its tools at their next turn.")
    return redirect("team_mcp", team_id=team_id)
