"""Account URLs: /spend/, the team members CSV, budgets, resuming a budget-stopped turn;
the password change, a team's members, the staff People page."""

from django.urls import path

from accounts import team_views, views

urlpatterns = [
    path("settings/password/", team_views.password_change_view, name="password_change"),
    path("settings/teams/<int:team_id>/members/", team_views.team_members_view,
         name="team_members"),
    path("settings/invitations/<int:invitation_id>/", team_views.invitation_answer_view,
         name="invitation_answer"),
    path("people/", team_views.people_view, name="people"),
    path("spend/", views.spend_view, name="spend"),
    path("spend/teams/<int:team_id>/members.csv", views.spend_members_csv_view,
         name="spend_members_csv"),
    path("spend/teams/<int:team_id>/budgets/", views.budget_set_view, name="budget_set"),
    path("sessions/<int:session_id>/resume-budget/", views.turn_budget_resume_view,
         name="turn_budget_resume"),
]
