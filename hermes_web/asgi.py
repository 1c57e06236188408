"""ASGI entry point: http → Django; websocket → origin check → session auth → URL router.

In embedded mode the first import also starts the in-process Celery worker threads and the
provider simulator (hermes_web/embedded.py), so `make run` is one process.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from hermes_web import embedded  # noqa: E402
from sessions.routing import websocket_urlpatterns  # noqa: E402

embedded.start_if_configured()

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
