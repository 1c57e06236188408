"""The Celery application (Celery's documented Django layout).

Configured from Django settings under the CELERY_ namespace: Redis in services mode, the
in-memory broker with worker threads inside the web process in embedded mode
(hermes_web/embedded.py). The same task runs a turn in both.
"""

import gc
import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

app = Celery("hermes_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _worker_gc_tuning(**_kwargs) -> None:
    """Once the worker has imported everything: freeze those objects out of the cyclic
    collector and collect the young generation less often. Full collections over a large
    heap otherwise land in the middle of a turn as tens-of-milliseconds pauses
    (benchmarks/bench_overhead.py reports GC pauses by generation)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
