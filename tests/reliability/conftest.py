"""Fault tests on real services (issue 10 build item 3): real `celery -A hermes_web worker`
processes killed with SIGKILL, a redis-server and a daphne of the test's own on free ports,
PostgreSQL connections terminated from the server side. Never restarts the shared 6379
Redis or the shared PostgreSQL (other people's tests use them).

Every test here is marked ``services`` (CI runs them in services mode, `make test`) and
bounded by a pytest-timeout. Leases and the broker's visibility timeout are shortened
through the environment (HERMES_LEASE_SECONDS=3, HERMES_VISIBILITY_TIMEOUT=4) so a dead
worker's turn is taken over in seconds, not minutes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection

from sessions import toolbox

ROOT = Path(__file__).resolve().parents[2]
PYTHON = Path(sys.executable)
LEASE_SECONDS = 3
VISIBILITY_TIMEOUT = 4


def free_port() -> int:
    """A TCP port nothing listens on right now (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, *, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value (returned) or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Proc:
    """A child process in its own process group (so SIGKILL takes its children too), its
    output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._file = open(self.log, "wb")
        self.popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self._file,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole group: no cleanup, no ack, no lease release."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill()
        self._file.close()


@pytest.fixture
def service_env(hermes_settings, tmp_path):
    """The environment a worker/daphne process needs to share this test's database (the
    pytest-django test database), broker, simulator and workspaces."""
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local",
                              "RETRY_BASE_DELAY": 0.05, "SIMULATOR_EMBEDDED": False,
                              "LEASE_SECONDS": LEASE_SECONDS}
    toolbox.backend_kind.cache_clear()
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "DATABASE_URL": (f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:"
                         f"{db['PORT'] or 5432}/{db['NAME']}"),
        "REDIS_URL": django_settings.REDIS_URL,
        "HERMES_PROVIDER": "simulator",
        "HERMES_SIMULATOR_URL": hermes_settings.HERMES["SIMULATOR_URL"],
        "HERMES_SIMULATOR_EMBEDDED": "0",
        "HERMES_WORKSPACE_ROOT": str(hermes_settings.HERMES["WORKSPACE_ROOT"]),
        "HERMES_HOME": str(hermes_settings.HERMES["HOME"]),
        "HERMES_BACKEND": "local",
        "HERMES_LEASE_SECONDS": str(LEASE_SECONDS),
        "HERMES_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
        "HERMES_RETRY_BASE_DELAY": "0.05",
        "HERMES_LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }
    if db.get("PASSWORD"):
        env["DATABASE_URL"] = env["DATABASE_URL"].replace(
            f"{db['USER']}@", f"{db['USER']}:{db['PASSWORD']}@")
    yield env
    toolbox.backend_kind.cache_clear()


@pytest.fixture
def procs(tmp_path):
    """start(name, argv, env) -> Proc; everything started is stopped after the test."""
    started: list[Proc] = []
    log_dir = tmp_path / "logs"
    log_dir.mkdir()

    def start(name: str, argv: list[str], env: dict) -> Proc:
        proc = Proc(name, argv, env, log_dir)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def celery_worker_proc(procs, service_env):
    """start_worker(name, env=None) -> Proc: a real `celery -A hermes_web worker` (prefork,
    2 children) started and waited for until it is ready to consume."""
    from hermes_web.celery import app

    app.control.purge()  # tasks other tests enqueued with no worker must not run here

    def start_worker(name: str, env: dict | None = None, *, concurrency: int = 2) -> Proc:
        argv = [str(PYTHON), "-m", "celery", "-A", "hermes_web", "worker", "-l", "info",
                "-n", f"{name}@%h", "--pool", "prefork", "--concurrency", str(concurrency),
                "--without-gossip", "--without-mingle", "--prefetch-multiplier", "1"]
        proc = procs(name, argv, env or service_env)
        wait_for(lambda: " ready." in proc.output() or proc.popen.poll() is not None,
                 timeout=60, what=f"{name} to be ready")
        assert proc.popen.poll() is None, proc.output()[-3000:]
        return proc

    return start_worker


@pytest.fixture
def own_redis(procs, tmp_path):
    """A redis-server of this test's own on a free port (restartable without touching the
    shared one). Returns an object with .url, .port, .restart(), .kill(), .start()."""
    binary = shutil.which("redis-server")
    if binary is None:  # capability, not a stub: .ci/run's machine has it, so CI runs these
        pytest.skip("redis-server is not installed")

    class OwnRedis:
        port = free_port()
        url = f"redis://127.0.0.1:{port}/0"
        proc: Proc | None = None

        def start(self) -> None:
            self.proc = procs(f"redis-{time.monotonic_ns()}", [
                binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(tmp_path)], dict(os.environ))
            wait_for(self.ping, timeout=15, what="redis-server")

        def ping(self) -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    return s.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        def kill(self) -> None:
            assert self.proc is not None
            self.proc.kill()

    redis = OwnRedis()
    redis.start()
    return redis
