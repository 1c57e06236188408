"""Webhook URLs: the inbound endpoint and the owner's pages."""

from django.urls import path

from webhooks import views

urlpatterns = [
    path("hooks/<str:token>/", views.webhook_inbound_view, name="webhook_inbound"),
    path("webhooks/", views.webhook_list_view, name="webhook_list"),
    path("webhooks/<int:webhook_id>/", views.webhook_detail_view, name="webhook_detail"),
    path("webhooks/<int:webhook_id>/<str:action>/", views.webhook_action_view,
         name="webhook_action"),
]
