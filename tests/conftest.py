"""Shared fixtures: users and teams built directly (no factory library), logged-in clients,
and a provider simulator served over real HTTP for the whole test session."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_embedded_cli_worker(settings):
    """`manage.py hermes chat` starts worker threads in embedded mode; inside the test process
    they would outlive the test and run other tests' queued turns. Tests that need a worker
    use the ``worker`` fixture, which starts and stops one."""
    settings.HERMES = {**settings.HERMES, "CLI_EMBEDDED_WORKER": False}


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """Process-level caches of database rows (the rate overrides, accounts/pricing.py; the
    learned breakpoint limits, sessions/provider_state.py) are cleared by signals when a row
    changes, but a test's rolled-back transaction sends none: each test starts without the
    previous test's copies."""
    from accounts.pricing import rate_overrides_clear
    from sessions.provider_state import BREAKPOINT_LIMITS

    rate_overrides_clear()
    BREAKPOINT_LIMITS.clear()
    yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings, tmp_path_factory):
    """Embedded mode tests on a SQLite *file* (WAL, IMMEDIATE, busy timeout, as `make run`
    uses), not Django's default in-memory test database. In-memory SQLite shares one cache
    between threads, and its table locks fail a read that meets another thread's write with
    "database table is locked" instead of waiting: a test thread polling a turn while a
    worker thread runs it failed at random in CI (test_cli_chat_goes_through_the_task_and_
    the_gate). A file per pytest run, so two runs on one host never share it."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        db.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("db") / "test.sqlite3")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, and before it is dropped: end this database's other
    PostgreSQL backends. Connections persist (CONN_MAX_AGE), also in the worker threads
    the websocket consumer reads from (sessions/consumers.py), and only a thread can close
    its own; DROP DATABASE fails while any is connected. By then every worker and daphne
    process a test started has been stopped."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                       "datname = current_database() AND pid <> pg_backend_pid()")


@pytest.fixture(scope="session")
def simulator():
    """A running provider simulator (simulator/), shared by the test session."""
    from simulator import SimulatorServer

    server = SimulatorServer(host="127.0.0.1", port=0).start()
    yield server
    server.stop()


@pytest.fixture
def hermes_settings(settings, tmp_path, simulator):
    """Point the harness at the test simulator and a temporary workspace root."""
    settings.HERMES = {**settings.HERMES, "PROVIDER": "simulator", "MODEL": "",
                       "SIMULATOR_URL": simulator.url, "WORKSPACE_ROOT": tmp_path / "ws",
                       "HOME": tmp_path / "home"}
    simulator.state.reset()
    return settings


@pytest.fixture
def make_user(db, django_user_model):
    """make_user(name, team=None, role="member", staff=False) -> User (password "pw-<name>")."""
    from accounts.models import Membership, Team

    def make(name: str, *, team: str | None = None, role: str = "member", staff: bool = False):
        user = django_user_model.objects.create_user(username=name, password=f"pw-{name}",
                                                     is_staff=staff)
        if team:
            team_row, _ = Team.objects.get_or_create(name=team)
            Membership.objects.create(user=user, team=team_row, role=role)
        return user

    return make


@pytest.fixture
def login(client):
    """login(user) -> the Django test client, logged in as ``user``."""

    def do(user):
        client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        return client

    return do


@pytest.fixture
def worker(settings):
    """A real Celery worker on whatever broker is configured (Redis in services mode, the
    in-memory broker otherwise), started for this test and stopped after it."""
    from celery.contrib.testing.worker import start_worker

    from hermes_web.celery import app

    app.control.purge()  # turns other tests enqueued without a worker must not run here
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False,
                      shutdown_timeout=30):
        yield
