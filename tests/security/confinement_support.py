"""Shared by the confinement and workspace security tests (issue 8 findings 1, 2, 4, 5, 9):
the backend parameter (every attack runs on both backends where both exist), a realistic
host layout (data dir with a database and secret key, workspaces root, another user's
workspace) and a real turn on the provider simulator."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.backends.confine import landlock_abi
from agents.backends.sandbox import sandbox_available

BACKENDS = ("local", "sandbox")
SECRET = "HOST-SECRET-7f3a9c"
"""Marker planted in every host file an attack tries to read."""


def skip_unless_available(kind: str) -> None:
    """Skip when ``kind`` cannot run here: the sandbox needs working bubblewrap, the local
    backend's confinement tests need Landlock (without it the policy alone answers).
    Capability skips, not stubs: this host (and .ci/run, which installs bubblewrap) has both,
    so CI runs every one of these tests."""
    if kind == "sandbox" and not sandbox_available():
        pytest.skip("bubblewrap unusable here")
    if kind == "local" and landlock_abi() == 0:
        pytest.skip("no Landlock on this kernel: the local backend is policy-only here")


@dataclass
class Host:
    """The host as an attacker on it sees it: ``data`` (DATA_DIR: sqlite ``db``, ``secret_key``,
    ``workspaces``), another user's workspace ``other`` holding a secret, a loose host file
    ``secret_file`` outside everything, and the checkout ``base`` (the app's code)."""

    data: Path
    db: Path
    secret_key: Path
    workspaces: Path
    other: Path
    secret_file: Path
    base: Path


@pytest.fixture(params=BACKENDS)
def backend_kind(request, hermes_settings):
    """Runs the test once per backend, selected the way production selects it (settings, read
    by sessions.toolbox.backend_kind)."""
    from sessions import toolbox

    skip_unless_available(request.param)
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": request.param,
                              "RETRY_BASE_DELAY": 0.01, "SIMULATOR_EMBEDDED": False,
                              "LOCAL_CONFINEMENT": "landlock"}
    toolbox.backend_kind.cache_clear()
    yield request.param
    toolbox.backend_kind.cache_clear()


@pytest.fixture
def host(hermes_settings, tmp_path) -> Host:
    """The default production layout under tmp_path: workspaces inside the data dir, which
    holds the database and the secret key."""
    data = tmp_path / "data"
    workspaces = data / "workspaces"
    workspaces.mkdir(parents=True)
    db = data / "hermes.sqlite3"
    subprocess.run(["sqlite3", str(db), "create table auth_user (username text, "
                    "is_superuser int); insert into auth_user values ('mallory', 0);"],
                   check=True)
    secret_key = data / "secret_key"
    secret_key.write_text(SECRET + "-key")
    secret_key.chmod(0o600)
    other = workspaces / "999999"
    other.mkdir()
    (other / "private.txt").write_text(SECRET + "-other-user")
    secret_file = tmp_path / "host-secret.txt"
    secret_file.write_text(SECRET + "-file\n")
    hermes_settings.DATA_DIR = data
    hermes_settings.HERMES = {**hermes_settings.HERMES, "WORKSPACE_ROOT": workspaces}
    return Host(data=data, db=db, secret_key=secret_key, workspaces=workspaces, other=other,
                secret_file=secret_file, base=Path(hermes_settings.BASE_DIR).resolve())


def superuser_flag(db: Path) -> str:
    """mallory's is_superuser as stored (read by the test, not by the attacker)."""
    return subprocess.run(["sqlite3", str(db), "select is_superuser from auth_user"],
                          check=True, capture_output=True, text=True).stdout.strip()


def run_turn(session_id: int) -> None:
    """Run the session's queued turns on the real task (eager), as a worker would."""
    from sessions.tasks import turn_run_task

    turn_run_task.apply(args=[session_id])
