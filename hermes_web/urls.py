"""Top-level URLs: auth, the chat (sessions.urls), approvals, the staff-only Django admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.storage import staticfiles_storage
from django.urls import include, path
from django.views.generic import RedirectView

from accounts import views as account_views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", account_views.logout_view, name="logout"),
    path("settings/", account_views.settings_view, name="settings"),
    path("settings/teams/<int:team_id>/", account_views.team_settings_view,
         name="team_settings"),
    path("admin/", admin.site.urls),
    path("favicon.ico", RedirectView.as_view(url=staticfiles_storage.url("favicon.svg"),
                                             permanent=True), name="favicon"),
    path("approvals/", include("approvals.urls")),
    path("schedules/", include("schedules.urls")),
    path("", include("webhooks.urls")),
    path("", include("accounts.urls")),
    path("", include("sessions.urls")),
]
