"""Money URLs: /spend/, the team members CSV, budgets, resuming a budget-stopped turn."""

from django.urls import path

from accounts import views

urlpatterns = [
    path("spend/", views.spend_view, name="spend"),
    path("spend/teams/<int:team_id>/members.csv", views.spend_members_csv_view,
         name="spend_members_csv"),
    path("spend/teams/<int:team_id>/budgets/", views.budget_set_view, name="budget_set"),
    path("sessions/<int:session_id>/resume-budget/", views.turn_budget_resume_view,
         name="turn_budget_resume"),
]
