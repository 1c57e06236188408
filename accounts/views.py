"""Account views: logout (which also closes the user's open sockets), the settings page,
and money: /spend/ (user, team, member), the members CSV, budgets, resuming a turn a budget
stopped.

Log-in is Django's LoginView (hermes_web/urls.py) with django-axes rate limiting. Who the
user is and what they may do is decided elsewhere (selectors, approvals/services.py); these
views only show it.
"""

from __future__ import annotations

import csv

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, logout
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.forms import TeamPolicyForm
from accounts.membership import invitations_for
from accounts.models import Membership
from accounts.services import team_get_for_admin, team_policy_set

from accounts.budgets import budget_spent
from accounts.charts import chart_spend_by_day
from accounts.forms import BudgetForm, SpendRangeForm
from accounts.models import Budget
from accounts.services import budget_set, turn_budget_resume
from accounts.spend import (
    range_default, spend_breakdown, spend_by_day, spend_by_provider, spend_by_session,
    spend_members, spend_periods, spend_teams, usage_scope)
from sessions.selectors import session_get
from sessions.services import provider_default
from sessions.backends import backend_status, confinement
from sessions.toolbox import toolset_tokens


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """POST-only logout (a GET link could be triggered by any page). The sockets opened with
    this login are closed by the user_logged_out receiver (sessions/signals.py), which every
    logout path (this view, the admin's) goes through."""
    logout(request)
    return redirect(settings.LOGOUT_REDIRECT_URL)


@login_required
@require_GET
def settings_view(request: HttpRequest) -> HttpResponse:
    """Read-only view of the configuration in force: provider, model, backend, limits."""
    provider, model = provider_default()
    hermes = settings.HERMES
    backend, _ = backend_status()  # the runner's selector; "unavailable" when it would raise
    context = {
        "provider": provider, "model": model, "backend": backend,
        "confinement": confinement(),
        "backend_setting": hermes.get("BACKEND", "auto"), "yolo": hermes.get("YOLO", False),
        "simulator": provider == "simulator",
        "max_iterations": hermes.get("MAX_ITERATIONS"),
        "max_message_chars": hermes.get("MAX_MESSAGE_CHARS"),
        "approval_timeout": hermes.get("APPROVAL_TIMEOUT_SECONDS"),
        "login_failure_limit": settings.AXES_FAILURE_LIMIT,
        "login_cooloff_minutes": round(float(settings.AXES_COOLOFF_TIME) * 60),
        "memberships": request.user.memberships.select_related("team"),
        "invitations": invitations_for(user=request.user),
    }
    first = request.user.memberships.select_related("team").order_by("id").first()
    context["floor_team"] = first.team if first is not None else None
    context["floor"] = toolset_tokens(team_id=first.team_id if first is not None else None)
    return render(request, "accounts/settings.html", context)


# --- money: /spend/, budgets, resuming a turn a budget stopped ---------------------------


def _spend_context(request: HttpRequest, *, budget_form=None) -> dict:
    """Everything /spend/ shows for the acting user, and for a team they may see."""
    now = timezone.now()
    form = SpendRangeForm(request.GET or None)
    window = range_default(now)
    if form.is_bound and form.is_valid() and form.cleaned_data.get("range"):
        window = form.cleaned_data["range"]
    teams = list(spend_teams(user=request.user))
    team = member = None
    team_id = request.GET.get("team") or request.POST.get("team")
    if team_id:
        team = next((t for t in teams if str(t.pk) == str(team_id)), None)
        if team is None:
            raise Http404("No such team")
        member_id = request.GET.get("member")
        if member_id:
            member = get_user_model().objects.filter(
                pk=member_id if member_id.isdigit() else 0, memberships__team=team).first()
            if member is None:
                raise Http404("No such member")
    rows = usage_scope(user=request.user, team=team, member=member)
    by_day = spend_by_day(rows, window)
    summary, by_model = spend_breakdown(rows, window)
    scope_label = (f"{member.username} in {team.name}" if member else
                   f"team {team.name}" if team else "you")
    context = {
        "form": form, "window": window, "teams": teams, "team": team, "member": member,
        "scope_label": scope_label, "periods": spend_periods(rows, now=now),
        "summary": summary, "by_day": by_day,
        "chart": chart_spend_by_day(by_day, title=f"Spend by day for {scope_label} (USD)"),
        "by_session": spend_by_session(rows, window, limit=20),
        "by_model": by_model[:20], "by_provider": spend_by_provider(by_model),
        "sort": request.GET.get("sort", "spend"),
        "start_value": request.GET.get("start") or window.start.isoformat(),
        "end_value": request.GET.get("end") or window.end.isoformat(),
    }
    if team is not None and member is None:
        context["members"] = spend_members(team, window, sort=context["sort"])
        context["budgets"] = _with_spent(Budget.objects.filter(
            Q(team=team) | Q(user__memberships__team=team, scope="user")).select_related(
            "user", "team").distinct().order_by("scope", "period"), now=now)
        context["budget_form"] = budget_form or BudgetForm()
    else:
        context["budgets"] = _with_spent(budgets_for_user(request.user), now=now)
    return context


def _with_spent(budgets, *, now) -> list[Budget]:
    """``budgets`` each with ``spent``: the USD its cap is checked against this period
    (accounts/budgets.py ``budget_spent``, the same sum, so the page and the refusal
    agree; a team's includes its members' sessions of no team)."""
    rows = list(budgets)
    for budget in rows:
        budget.spent = budget_spent(budget, now=now)
    return rows


def budgets_for_user(user):
    """The caps that apply to ``user``'s own calls (their own and their teams')."""
    return Budget.objects.filter(
        Q(scope="user", user=user) | Q(scope="team", team__memberships__user=user)
    ).select_related("team").distinct().order_by("scope", "period")


@login_required
@require_GET
def spend_view(request: HttpRequest) -> HttpResponse:
    """/spend/: what the user (or, with ?team=, a team they administer; staff any team)
    spent: periods, by day (chart), by session, model and provider, the four buckets,
    cache savings, unknown-cost calls. A bad date range is a form error (400)."""
    context = _spend_context(request)
    status = 400 if context["form"].is_bound and not context["form"].is_valid() else 200
    return render(request, "accounts/spend.html", context, status=status)


@login_required
@require_GET
def spend_members_csv_view(request: HttpRequest, team_id: int) -> HttpResponse:
    """CSV of a team's members table over the date range (team admins and staff)."""
    team = spend_teams(user=request.user).filter(pk=team_id).first()
    if team is None:
        raise Http404("No such team")
    form = SpendRangeForm(request.GET or None)
    window = range_default(timezone.now())
    if form.is_bound:
        if not form.is_valid():
            return HttpResponse("; ".join(form.non_field_errors()) or "bad date range",
                                status=400, content_type="text/plain")
        window = form.cleaned_data.get("range") or window
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = (f'attachment; filename="spend-{team.name}-'
                                       f'{window.start}-{window.end}.csv"')
    writer = csv.writer(response)
    writer.writerow(["member", "role", "usd", "calls", "unknown_cost_calls", "tokens",
                     "start", "end"])
    for row in spend_members(team, window, sort=request.GET.get("sort", "spend")):
        writer.writerow([row["username"], row["role"], row["usd"], row["calls"],
                         row["unknown"], row["tokens"], window.start, window.end])
    return response


@login_required
@require_POST
def budget_set_view(request: HttpRequest, team_id: int) -> HttpResponse:
    """POST: set, change or remove one of the team's budgets (team admins, staff). A bad
    value re-renders /spend/ with the form error (400); nothing is stored."""
    team = spend_teams(user=request.user).filter(pk=team_id).first()
    if team is None:
        raise Http404("No such team")
    form = BudgetForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        member = None
        if data["scope"] == "user":
            member = get_user_model().objects.filter(pk=data["member"],
                                                     memberships__team=team).first()
            if member is None:
                form.add_error("member", "not a member of this team")
        if not form.errors:
            try:
                budget_set(actor=request.user, scope=data["scope"], period=data["period"],
                           limit=data["limit"], team=team, user=member,
                           unknown_policy=data["unknown_policy"])
                return redirect(f"{reverse('spend')}?team={team.pk}")
            except ValidationError as exc:
                form.add_error("limit", exc.messages[0])
            except PermissionDenied as exc:
                form.add_error(None, str(exc))
    request.GET = request.GET.copy()
    request.GET["team"] = str(team.pk)
    return render(request, "accounts/spend.html",
                  _spend_context(request, budget_form=form), status=400)


@login_required
@require_POST
def turn_budget_resume_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """POST: resume the session's turn a budget stopped (owner only), then back to the chat."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    try:
        turn_id = turn_budget_resume(session=session, user=request.user)
    except PermissionDenied:
        raise Http404("No such session") from None
    if request.htmx:
        return render(request, "sessions/detail.html#turn-status", {
            "session_id": session.pk,
            "status": {"state": "queued" if turn_id else "idle", "reason": "",
                       "turn_id": turn_id}})
    return redirect("session_detail", session_id=session.pk)


@login_required
@require_http_methods(["GET", "POST"])
def team_settings_view(request: HttpRequest, team_id: int) -> HttpResponse:
    """A team's approval policy, for its admins (404 for anyone else): which risk classes
    only an admin other than the requester may approve. POST saves (audited)."""
    team = team_get_for_admin(user=request.user, team_id=team_id)
    form = TeamPolicyForm(request.POST or None, initial={
        "admin_only_risk_classes": list(team.admin_only_risk_classes or [])})
    if request.method == "POST" and form.is_valid():
        try:
            team_policy_set(user=request.user, team_id=team.pk,
                            admin_only_risk_classes=form.cleaned_data["admin_only_risk_classes"])
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, "Team approval policy saved.")
            return redirect("team_settings", team_id=team.pk)
    admins = (Membership.objects.filter(team=team, role=Membership.Role.ADMIN)
              .select_related("user").order_by("user__username"))
    return render(request, "accounts/team_settings.html",
                  {"team": team, "form": form, "admins": admins},
                  status=400 if request.method == "POST" else 200)
