"""Account views: logout (which also closes the user's open sockets) and the settings page.

Log-in is Django's LoginView (hermes_web/urls.py) with django-axes rate limiting. Who the
user is and what they may do is decided elsewhere (selectors, approvals/services.py); these
views only show it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.forms import TeamPolicyForm
from accounts.models import Membership
from accounts.services import team_get_for_admin, team_policy_set

from sessions.services import provider_default
from sessions.toolbox import backend_kind, confinement


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
    context = {
        "provider": provider, "model": model, "backend": backend_kind(),
        "confinement": confinement(),
        "backend_setting": hermes.get("BACKEND", "auto"), "yolo": hermes.get("YOLO", False),
        "simulator": provider == "simulator",
        "max_iterations": hermes.get("MAX_ITERATIONS"),
        "max_message_chars": hermes.get("MAX_MESSAGE_CHARS"),
        "approval_timeout": hermes.get("APPROVAL_TIMEOUT_SECONDS"),
        "login_failure_limit": settings.AXES_FAILURE_LIMIT,
        "login_cooloff_minutes": round(float(settings.AXES_COOLOFF_TIME) * 60),
        "memberships": request.user.memberships.select_related("team"),
    }
    return render(request, "accounts/settings.html", context)


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
