"""Websocket URL routes (Channels' layout: app/routing.py beside app/consumers.py).
hermes_web/asgi.py wraps them in the origin check and session authentication."""

from django.urls import path

from sessions.consumers import SessionConsumer

websocket_urlpatterns = [
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),
]
