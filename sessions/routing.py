"""Websocket URL routes (Channels' layout: app/routing.py beside app/consumers.py).
hermes_web/asgi.py wraps them in the origin check and session authentication."""

from channels.generic.websocket import WebsocketConsumer
from django.urls import path, re_path

from sessions.consumers import SessionConsumer


class UnknownRouteConsumer(WebsocketConsumer):
    """Any other websocket path: closed with 4404 before accepting, instead of the router's
    "No route found" exception (a server traceback for a typo in a URL)."""

    def connect(self) -> None:
        self.close(code=4404)


websocket_urlpatterns = [
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),
    re_path(r"^", UnknownRouteConsumer.as_asgi()),
]
