"""ASGI entry point: http → Django; websocket → same-origin check → allowed-hosts check →
session auth → URL router.

This module starts nothing: services mode runs separate workers. Embedded mode (`make run`)
serves ``hermes_web.embedded:application``, which wraps this one and starts the in-process
worker and simulator, so importing this module (tests, tooling) never spawns a worker.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddleware, get_user  # noqa: E402
from channels.db import database_sync_to_async  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier  # noqa: E402
from channels.sessions import SessionMiddlewareStack  # noqa: E402
from django.conf import settings  # noqa: E402

from agents.origin import origin_allowed  # noqa: E402
from sessions.routing import websocket_urlpatterns  # noqa: E402


class SameOriginValidator:
    """Refuse a websocket handshake (403, before the consumer runs) unless its Origin is the
    socket's own origin: scheme, host AND port (agents/origin.py; issue 8 finding 8: a page
    on another port of the same host got the user's cookies and drove their agent), or one
    of settings.CSRF_TRUSTED_ORIGINS. Channels' AllowedHostsOriginValidator behind it still
    checks the host against ALLOWED_HOSTS."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            headers = dict(scope.get("headers") or ())
            origin = headers.get(b"origin", b"").decode("latin-1") or None
            host = headers.get(b"host", b"").decode("latin-1") or None
            if not origin_allowed(origin, socket_scheme=scope.get("scheme", "ws"),
                                  host_header=host,
                                  trusted=tuple(getattr(settings, "CSRF_TRUSTED_ORIGINS", ()))):
                return await WebsocketDenier()(scope, receive, send)
        return await self.app(scope, receive, send)


class ConcurrentAuthMiddleware(AuthMiddleware):
    """Channels' AuthMiddleware (the same get_user: session row, backend, user, session
    auth hash), run on the worker-thread pool instead of the one thread that every
    thread-sensitive database call in daphne shares: a hundred sockets reconnecting at once
    queued their logins behind each other on that thread and overran daphne's 5 s handshake
    timeout (docs/reliability.md). get_user only reads (and flushes a session whose hash no
    longer matches), so it needs no thread affinity."""

    async def resolve_scope(self, scope):
        scope["user"]._wrapped = await database_sync_to_async(
            get_user.func, thread_sensitive=False)(scope)


websocket_application = SameOriginValidator(AllowedHostsOriginValidator(
    SessionMiddlewareStack(ConcurrentAuthMiddleware(URLRouter(websocket_urlpatterns)))))
"""The websocket stack on its own (tests drive it with channels' WebsocketCommunicator)."""

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": websocket_application,
})
