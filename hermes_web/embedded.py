"""Embedded mode: the Celery worker (threads) and the provider simulator inside the web
process, so `make run` needs no Redis, no separate worker and no API key (DESIGN.md §1).

Serve ``hermes_web.embedded:application``: the ASGI application of hermes_web/asgi.py, with
the worker and simulator started when this module is imported (once per process).

Celery's in-memory broker only reaches consumers in the same process, which is exactly what
this mode wants. The worker is Celery's own (celery.contrib.testing.worker runs a real
WorkController in a thread without installing signal handlers, which only the main thread
may do). There is no Celery beat in this mode, so a daemon thread does beat's one
time-critical job, expiring pending approvals (fail-closed), every few seconds.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings

log = logging.getLogger("hermes.embedded")
_started = threading.Event()
_lock = threading.Lock()
_handles: dict = {}


def start_if_configured() -> None:
    """Start the simulator and the worker once per process when the settings ask for it."""
    with _lock:
        if _started.is_set():
            return
        if settings.HERMES["SIMULATOR_EMBEDDED"]:
            start_simulator()
        if settings.CELERY_BROKER_URL.startswith("memory://") and not settings.CELERY_TASK_ALWAYS_EAGER:
            start_worker()
            start_expiry_sweep()
        _started.set()


def start_simulator() -> str:
    """Serve the provider simulator on HERMES["SIMULATOR_PORT"] (once per process); returns
    its URL."""
    from agents.simulator import SimulatorServer

    if "simulator" in _handles:
        return _handles["simulator"].url
    server = SimulatorServer(host="127.0.0.1", port=settings.HERMES["SIMULATOR_PORT"]).start()
    _handles["simulator"] = server
    log.warning("provider simulator serving at %s", server.url)
    return server.url


def start_worker() -> None:
    """Run a Celery worker with a thread pool in a daemon thread of this process."""
    from celery.contrib.testing.worker import TestWorkController

    from hermes_web.celery import app

    from celery.utils.nodenames import anon_nodename

    worker = TestWorkController(
        app=app, pool="threads", concurrency=settings.EMBEDDED_WORKER_THREADS,
        hostname=anon_nodename(), loglevel="WARNING", logfile=None, ready_callback=None,
        without_heartbeat=True, without_mingle=True, without_gossip=True,
    )
    thread = threading.Thread(target=worker.start, name="hermes-embedded-worker", daemon=True)
    thread.start()
    worker.ensure_started()
    _handles["worker"] = worker
    log.warning("embedded Celery worker started (%s threads)", settings.EMBEDDED_WORKER_THREADS)


def expiry_sweep_interval(timeout_seconds: float) -> float:
    """Seconds between expiry sweeps: a tenth of the approval timeout, within 1..5 s, so an
    expired request is noticed at most ~5 s late (300 s default) and a short test timeout
    is honoured within a second or so."""
    return max(1.0, min(5.0, timeout_seconds / 10))


def start_expiry_sweep() -> threading.Thread:
    """Run approvals.services.approval_expire_due in a daemon thread every
    ``expiry_sweep_interval`` seconds (what CELERY_BEAT_SCHEDULE["approvals-expire"] does
    in services mode), and turn_recover_task on its beat schedule. An expiry enqueues the turn's resume on the in-memory broker, which
    the embedded worker consumes. A failing sweep is logged and retried next tick."""
    interval = expiry_sweep_interval(float(settings.HERMES["APPROVAL_TIMEOUT_SECONDS"]))
    stop = threading.Event()

    recover_every = float(settings.CELERY_BEAT_SCHEDULE["turns-recover"]["schedule"])

    def sweep() -> None:
        import time

        from django.db import close_old_connections

        from approvals.services import approval_expire_due
        from sessions.tasks import turn_recover_task

        last_recover = time.monotonic()
        while not stop.wait(interval):
            close_old_connections()
            try:
                approval_expire_due()
                if time.monotonic() - last_recover >= recover_every:
                    last_recover = time.monotonic()
                    turn_recover_task()  # re-enqueue turns whose worker died (beat's job)
            except Exception:  # the database may be briefly locked; try again next tick
                log.exception("embedded periodic sweep failed")

    thread = threading.Thread(target=sweep, name="hermes-embedded-expiry", daemon=True)
    thread.start()
    _handles["expiry"] = (thread, stop)
    log.warning("embedded approval expiry sweep every %.1f s", interval)
    return thread


def __getattr__(name: str):
    """``hermes_web.embedded:application`` (what `make run` serves): the ASGI application,
    with the embedded worker and simulator started on first access. Lazy (PEP 562) so that
    importing this module for its functions (the CLI, tests) starts nothing."""
    if name == "application":
        from hermes_web.asgi import application as asgi_application

        start_if_configured()
        return asgi_application
    raise AttributeError(name)
