"""Approval review URLs: the queue, a decision, one request's arguments in full, "always"
rules, the audited bypass toggle."""

from django.urls import path

from approvals import views

urlpatterns = [
    path("", views.approval_queue_view, name="approval_queue"),
    path("<int:approval_id>/decide/", views.approval_decide_view, name="approval_decide"),
    path("<int:approval_id>/arguments/", views.approval_arguments_view,
         name="approval_arguments"),
    path("rules/", views.approval_rule_list_view, name="approval_rules"),
    path("rules/<int:rule_id>/revoke/", views.approval_rule_revoke_view,
         name="approval_rule_revoke"),
    path("sessions/<int:session_id>/bypass/", views.session_bypass_view, name="session_bypass"),
]
