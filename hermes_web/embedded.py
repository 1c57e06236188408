"""Embedded mode: the Celery worker (threads) and the provider simulator inside the web
process, so `make run` needs no Redis, no separate worker and no API key (DESIGN.md §1).

Serve ``hermes_web.embedded:application``: the ASGI application of hermes_web/asgi.py, with
the worker and simulator started when this module is imported (once per process).

Celery's in-memory broker only reaches consumers in the same process, which is exactly what
this mode wants. The worker is Celery's own WorkController and the beat Celery's own
EmbeddedService, each in a daemon thread (issue 11 item 7: no test helper, no home-made
beat loop). The served application's beat uses the same DatabaseScheduler as `celery beat`
in services mode, so user schedules (schedules/) fire in both modes; any other process
(the CLI, tests) runs beat on the static schedule only (in memory), so a schedule never
fires twice. Either way the beat expires pending approvals (fail-closed) every few seconds.
"""

from __future__ import annotations

import logging
import secrets
import threading
from pathlib import Path

import httpx
from celery.beat import EmbeddedService
from celery.utils.nodenames import anon_nodename
from celery.worker import WorkController
from django.conf import settings

log = logging.getLogger("hermes.embedded")
_started = threading.Event()
_lock = threading.Lock()
_handles: dict = {}


def start_if_configured(*, with_beat: bool = False) -> None:
    """Start the simulator and the worker once per process when the settings ask for it;
    ``with_beat`` also starts Celery beat (only the served application asks: a `hermes chat`
    CLI process beside `make run` must not be a second beat, or every schedule would fire
    twice)."""
    with _lock:
        if _started.is_set():
            return
        if settings.HERMES["SIMULATOR_EMBEDDED"] and simulator_wanted():
            start_simulator()
        if settings.CELERY_BROKER_URL.startswith("memory://") and not settings.CELERY_TASK_ALWAYS_EAGER:
            start_worker()
            start_beat(user_schedules=with_beat and settings.EMBEDDED_BEAT)
        _started.set()


def simulator_wanted() -> bool:
    """True when the configured provider is the simulator (issue 10 defect 10: a CLI
    pointed at a real endpoint starts no simulator and takes no port)."""
    return settings.HERMES["PROVIDER"].startswith("simulator")


def simulator_token_path() -> Path:
    """Where a generated control token is kept: DATA_DIR/simulator_token (mode 0600, so only
    the app's own OS user can read it; `curl -H "Authorization: Bearer $(cat <path>)"`)."""
    from simulator import TOKEN_FILE_NAME

    return Path(settings.DATA_DIR) / TOKEN_FILE_NAME


def simulator_token() -> str | None:
    """The control token this process would present to the simulator at
    HERMES["SIMULATOR_URL"]: HERMES["SIMULATOR_TOKEN"] (env HERMES_SIMULATOR_TOKEN) when
    set, else the one in ``simulator_token_path()``, else None."""
    from simulator import read_token_file

    return settings.HERMES.get("SIMULATOR_TOKEN") or read_token_file(simulator_token_path())


def simulator_serving(url: str, timeout: float = 1.0) -> bool:
    """True when a provider simulator already answers at ``url`` and holds this process's
    control token (``simulator_token()``): its GET /_sim/proof answers our random nonce
    with the HMAC only that token gives. The token itself is never sent, so whatever
    listens on the port (another account's process) cannot learn it. One that does not
    prove it (another user's or another data dir's simulator, or a squatter) is not reused:
    this process's prompts would land where someone else can read them."""
    from simulator.control import PROOF_PATH, proves

    token = simulator_token()
    if not token:
        return False
    nonce = secrets.token_urlsafe(24)
    try:
        response = httpx.get(url.rstrip("/") + PROOF_PATH, params={"nonce": nonce},
                             timeout=timeout)
        answer = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return False
    return proves(answer, token, nonce)


def start_simulator() -> str:
    """Make sure a provider simulator serves HERMES["SIMULATOR_URL"]; returns its URL.

    Reuses one already serving there that accepts our token (`make run` beside a CLI turn,
    two CLI turns at once); else binds HERMES["SIMULATOR_PORT"]; if that port is taken by
    something else, takes a free port and points this process's HERMES["SIMULATOR_URL"] at
    it (issue 10 defect 10).

    The control token (/_sim/* routes) is HERMES["SIMULATOR_TOKEN"] when set; else a random
    one for this start, written to ``simulator_token_path()`` (0600) when the server holds
    the configured port, so the CLI and a developer's curl on the same OS account can use
    it. A free-port fallback keeps its generated token in memory only (its URL is private
    to this process anyway). The log names the file, never the token.
    """
    from simulator import SimulatorServer, write_token_file

    if "simulator" in _handles:
        return _handles["simulator"].url
    url = settings.HERMES["SIMULATOR_URL"]
    if simulator_serving(url):
        log.warning("provider simulator already serving at %s; reusing it", url)
        return url
    configured = settings.HERMES.get("SIMULATOR_TOKEN") or None
    try:
        server = SimulatorServer(host="127.0.0.1", port=settings.HERMES["SIMULATOR_PORT"],
                                 token=configured).start()
        own_port = True
    except OSError:  # the port is taken (and not by our simulator): any free port will do
        server = SimulatorServer(host="127.0.0.1", port=0, token=configured).start()
        settings.HERMES["SIMULATOR_URL"] = server.url
        own_port = False
    _handles["simulator"] = server
    if configured:
        where = "HERMES_SIMULATOR_TOKEN"
    elif own_port:
        where = str(write_token_file(simulator_token_path(), server.token))
    else:
        where = "this process's memory only"
    log.warning("provider simulator serving at %s (control API token: %s)", server.url, where)
    return server.url


class EmbeddedWorker(WorkController):
    """Celery's own worker (``WorkController``, what `celery worker` runs) in a thread of
    this process. ``celery.apps.worker.Worker`` is not used because it installs signal
    handlers, which only the main thread may do. ``started`` is set once the consumer is
    ready to take tasks."""

    def __init__(self, *args, **kwargs) -> None:
        self.started = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer) -> None:
        self.started.set()


def start_worker() -> None:
    """Run a Celery worker with a thread pool in a daemon thread of this process."""
    from hermes_web.celery import app

    worker = EmbeddedWorker(
        app=app, pool="threads", concurrency=settings.EMBEDDED_WORKER_THREADS,
        hostname=anon_nodename(), loglevel="WARNING", logfile=None, ready_callback=None,
        without_heartbeat=True, without_mingle=True, without_gossip=True,
    )
    thread = threading.Thread(target=worker.start, name="hermes-embedded-worker", daemon=True)
    thread.start()
    worker.started.wait(timeout=30)
    _handles["worker"] = worker
    log.warning("embedded Celery worker started (%s threads)", settings.EMBEDDED_WORKER_THREADS)


def expiry_sweep_interval(timeout_seconds: float) -> float:
    """Seconds between expiry sweeps: a tenth of the approval timeout, within 1..5 s, so an
    expired request is noticed at most ~5 s late (300 s default) and a short test timeout
    is honoured within a second or so."""
    return max(1.0, min(5.0, timeout_seconds / 10))


def start_beat(*, user_schedules: bool = False):
    """Run Celery's own beat in a daemon thread (``celery.beat.EmbeddedService``, what
    `celery worker -B` embeds) on CELERY_BEAT_SCHEDULE, with the approval expiry every
    ``expiry_sweep_interval`` seconds instead of its services-mode period. Its tasks go
    to the in-memory broker, which the embedded worker consumes. ``user_schedules``: use
    settings.CELERY_BEAT_SCHEDULER (django-celery-beat's DatabaseScheduler: the users'
    schedules too, what the Procfile's `beat` runs); else the static entries only, kept in
    memory (``celery.beat:Scheduler``). Returns the service (``.stop()`` ends it)."""
    from hermes_web.celery import app

    interval = expiry_sweep_interval(float(settings.HERMES["APPROVAL_TIMEOUT_SECONDS"]))
    schedule = {name: dict(entry) for name, entry in settings.CELERY_BEAT_SCHEDULE.items()}
    schedule["approvals-expire"]["schedule"] = interval
    app.conf.beat_schedule = schedule
    scheduler = settings.CELERY_BEAT_SCHEDULER if user_schedules else "celery.beat:Scheduler"
    beat = EmbeddedService(app, thread=True, scheduler_cls=scheduler, max_interval=interval)
    beat.start()
    _handles["beat"] = beat
    log.warning("embedded Celery beat started (%s; approval expiry every %.1f s)", scheduler,
                interval)
    return beat


def __getattr__(name: str):
    """``hermes_web.embedded:application`` (what `make run` serves): the ASGI application,
    with the embedded worker and simulator started on first access. Lazy (PEP 562) so that
    importing this module for its functions (the CLI, tests) starts nothing."""
    if name == "application":
        from hermes_web.asgi import application as asgi_application

        start_if_configured(with_beat=True)
        return asgi_application
    raise AttributeError(name)
