"""The Celery application (Celery's documented Django layout).

Configured from Django settings under the CELERY_ namespace: Redis in services mode, the
in-memory broker with worker threads inside the web process in embedded mode
(hermes_web/embedded.py). The same task runs a turn in both.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

app = Celery("hermes_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
