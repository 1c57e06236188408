"""ASGI entry point: http → Django; websocket → origin check → session auth → URL router.

This module starts nothing: services mode runs separate workers. Embedded mode (`make run`)
serves ``hermes_web.embedded:application``, which wraps this one and starts the in-process
worker and simulator, so importing this module (tests, tooling) never spawns a worker.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from sessions.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
