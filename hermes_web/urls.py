"""Top-level URLs: auth, the chat (sessions.urls), approvals, the staff-only Django admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from accounts import views as account_views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", account_views.logout_view, name="logout"),
    path("settings/", account_views.settings_view, name="settings"),
    path("admin/", admin.site.urls),
    path("approvals/", include("approvals.urls")),
    path("", include("sessions.urls")),
]
