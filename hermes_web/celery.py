"""The Celery application (Celery's documented Django layout).

Configured from Django settings under the CELERY_ namespace: Redis in services mode, the
in-memory broker with worker threads inside the web process in embedded mode
(hermes_web/embedded.py). The same task runs a turn in both.
"""

import gc
import os

from celery import Celery
from celery.signals import worker_ready
from django.conf import settings

from agents.tools.terminal import MAX_TIMEOUT

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

LONGEST_TOOL_CALL_SECONDS = MAX_TIMEOUT
"""The terminal's longest timeout (600 s): no single step of a turn lasts longer without
a database write."""


def visibility_timeout(*, lease_seconds: int, configured: int | None = None) -> int:
    """Seconds the Redis broker waits before redelivering an unacknowledged task (case B39).

    A turn task is idempotent (the lease makes a second delivery return "busy"; a delivery
    after the holder died resumes the turn; the tool-result ledger stops a side effect from
    repeating), so redelivery is safe; it must still not come back while the first delivery
    is inside the longest tool call, or every long command would be announced twice. So:
    at least the longest tool call plus one lease, default one hour (Celery's documented
    default); HERMES_VISIBILITY_TIMEOUT lowers it for fault tests only."""
    floor = LONGEST_TOOL_CALL_SECONDS + lease_seconds
    if configured:
        return configured
    return max(3600, floor)


def restore_options(visibility: int) -> dict[str, int]:
    """The kombu Redis transport options (seconds) that bound how long a dead worker's task
    waits to be delivered again, for a visibility timeout of ``visibility`` seconds.

    kombu's prefork loop sweeps for abandoned (unacked) tasks every interval x throttle
    seconds, 10 x 10 = 100 s by default: a task whose worker died just after a new worker
    started (its startup sweep ran before the task became visible) waited up to 100 s more.
    One scan every min(10, visibility / 4) seconds bounds that (``unacked_restore_interval``
    / ``unacked_restore_throttle``). Each sweep takes the Redis key "unacked_mutex" (kombu's
    default expiry 300 s): a worker killed while holding it (SIGKILL, OOM) left every other
    worker unable to restore any dead worker's task for five minutes, seen in CI as two
    SIGKILL recoveries timing out at 90 and 120 s while the next one, after the expiry,
    recovered in seconds. A sweep takes milliseconds; if one ever outlives the shorter
    expiry, two workers may restore the same task, which a turn task tolerates (the lease
    makes the second delivery "busy")."""
    interval = max(1, min(10, visibility // 4))
    return {"visibility_timeout": visibility, "unacked_restore_interval": interval,
            "unacked_restore_throttle": 1, "unacked_mutex_expire": 2 * interval + 3}


app = Celery("hermes_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
_VISIBILITY = visibility_timeout(lease_seconds=settings.HERMES["LEASE_SECONDS"],
                                 configured=settings.HERMES["VISIBILITY_TIMEOUT"] or None)
app.conf.broker_transport_options = {
    **(app.conf.broker_transport_options or {}), **restore_options(_VISIBILITY)}
app.autodiscover_tasks()


@worker_ready.connect
def worker_gc_tuning(**_kwargs) -> None:
    """Once the worker has imported everything: freeze those objects out of the cyclic
    collector and collect the young generation less often. Full collections over a large
    heap otherwise land in the middle of a turn as tens-of-milliseconds pauses
    (benchmarks/bench_overhead.py reports GC pauses by generation)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
