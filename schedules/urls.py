"""Schedule URLs."""

from django.urls import path

from schedules import views

urlpatterns = [
    path("", views.schedule_list_view, name="schedule_list"),
    path("preview/", views.schedule_preview_view, name="schedule_preview"),
    path("<int:schedule_id>/", views.schedule_detail_view, name="schedule_detail"),
    path("<int:schedule_id>/<str:action>/", views.schedule_action_view, name="schedule_action"),
]
