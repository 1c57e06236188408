"""Helpers for the web security tests: the real websocket stack of hermes_web/asgi.py (same-
origin check, allowed hosts, cookie session auth, URL router, SessionConsumer) driven by
channels.testing.WebsocketCommunicator on the in-memory channel layer, with real session
cookies from Django's test client. Tests using it commit for real (transaction=True), as the
consumer's database_sync_to_async queries need."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings

from hermes_web.asgi import websocket_application

APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
        "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
        "django.contrib.humanize",
        "channels", "django_htmx", "template_partials", "axes", "accounts", "sessions",
        "approvals"]
"""available_apps for the transactional tests (see tests/sessions/test_consumers.py)."""
HOST = b"127.0.0.1:8000"
ORIGIN = b"http://127.0.0.1:8000"


@pytest.fixture(autouse=True)
def memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]


def cookie_for(client, user) -> bytes:
    """Log ``client`` in as ``user`` and return its session cookie header value."""
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    name = django_settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}".encode()


def communicator(session_id: int, cookie: bytes | None = None, *, origin: bytes | None = ORIGIN,
                 host: bytes | None = HOST, scheme: str | None = None) -> WebsocketCommunicator:
    headers = [(b"origin", origin)] if origin is not None else []
    headers += [(b"host", host)] if host is not None else []
    headers += [(b"cookie", cookie)] if cookie else []
    ws = WebsocketCommunicator(websocket_application, f"/ws/sessions/{session_id}/",
                               headers=headers)
    if scheme:
        ws.scope["scheme"] = scheme
    return ws


def run(scenario) -> None:
    async_to_sync(scenario)()
