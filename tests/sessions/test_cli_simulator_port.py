"""Issue 10 defect 10: two CLI turns at once, or the CLI beside `make run`, crashed with
"Address already in use" because the embedded simulator always bound the fixed port. Run
through the real CLI in embedded mode (subprocesses, SQLite, the in-process worker). A
simulator is reused only when it accepts the CLI's control token (simulator/control.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def embedded_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"HERMES_DATA_DIR": str(tmp_path / "var"), "HERMES_PROVIDER": "simulator",
                "HERMES_BACKEND": "local", "ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "",
                "DJANGO_SETTINGS_MODULE": "hermes_web.settings"})
    for args in (["migrate", "--noinput", "-v0"], ["demo_user"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                       capture_output=True, timeout=120)
    return env


def chat(env: dict, text: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "manage.py", "hermes", "chat", text, "--user",
                             "demo", "--timeout", "120"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_cli_turns_at_once_beside_a_busy_simulator_port_both_answer(embedded_env):
    with socket.socket() as squatter:  # something that is not a simulator holds the port
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env = {**embedded_env, "HERMES_SIMULATOR_PORT": str(port),
               "HERMES_SIMULATOR_URL": f"http://127.0.0.1:{port}"}
        runs = [chat(env, "hello one"), chat(env, "hello two")]
        outputs = [run.communicate(timeout=180)[0] for run in runs]
    for run, output in zip(runs, outputs):
        assert run.returncode == 0, output[-2000:]
        assert "Address already in use" not in output
        assert "(simulated model)" in output


def test_the_cli_reuses_a_simulator_already_serving_its_port(embedded_env, simulator):
    simulator.state.reset()
    env = {**embedded_env, "HERMES_SIMULATOR_PORT": str(simulator.port),
           "HERMES_SIMULATOR_URL": simulator.url, "HERMES_SIMULATOR_TOKEN": simulator.token}
    run = chat(env, "hello there")
    output = run.communicate(timeout=180)[0]
    assert run.returncode == 0, output[-2000:]
    assert len(simulator.state.requests) == 1  # the turn went to the one already serving


def test_the_cli_does_not_reuse_a_simulator_that_refuses_its_token(embedded_env, simulator):
    """Someone else's simulator on the port (its token is not ours): the CLI serves its own
    on a free port, so our prompts never reach a request log its owner can read."""
    simulator.state.reset()
    env = {**embedded_env, "HERMES_SIMULATOR_PORT": str(simulator.port),
           "HERMES_SIMULATOR_URL": simulator.url}
    run = chat(env, "hello there")
    output = run.communicate(timeout=180)[0]
    assert run.returncode == 0, output[-2000:]
    assert "(simulated model)" in output
    assert len(simulator.state.requests) == 0


def test_no_simulator_is_wanted_for_a_real_provider(settings):
    from hermes_web.embedded import simulator_wanted

    settings.HERMES = {**settings.HERMES, "PROVIDER": "anthropic"}
    assert not simulator_wanted()
    settings.HERMES = {**settings.HERMES, "PROVIDER": "simulator-openai"}
    assert simulator_wanted()
