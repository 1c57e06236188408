"""Real-browser fixtures: daphne serving the app exactly as `make run` does (embedded mode:
SQLite, the in-process Celery worker, the provider simulator) on free ports, and Debian's
chromium driven by Playwright. Nothing is downloaded."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until something listens on ``port``; raise if ``process`` died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listening on {port} after {timeout} s")


SIM_TOKENS: dict[str, str] = {}
"""sim_url -> the control token its server wrote to its data dir (``sim_headers``)."""


def wait_for_sim_token(data: Path, process: subprocess.Popen, timeout: float = 30.0) -> str:
    """The simulator's control token, from the 0600 file the embedded server writes to its
    data dir right after binding the simulator's port (so it may lag the port a moment)."""
    from simulator import TOKEN_FILE_NAME, read_token_file

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        if token := read_token_file(data / TOKEN_FILE_NAME):
            return token
        time.sleep(0.1)
    raise TimeoutError(f"no simulator token in {data} after {timeout} s")


def sim_headers(sim_url: str) -> dict[str, str]:
    """Headers authorizing a /_sim/* request to the embedded server at ``sim_url``."""
    from simulator import control_headers

    return control_headers(SIM_TOKENS[sim_url])


@contextlib.contextmanager
def embedded_server(data: Path, *, env_extra: dict[str, str] | None = None,
                    setup: str | None = None):
    """Prepare a fresh SQLite database in ``data`` (migrate + the demo user, or the Python
    ``setup`` run by `manage.py shell -c`) and serve it with daphne in embedded mode.
    Yields (url, sim_url, demo password); ``sim_headers(sim_url)`` authorizes the
    simulator's /_sim/* control routes. The environment is scrubbed of any outside
    configuration so the test always gets embedded mode and the simulator."""
    web_port, sim_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(
        ("DATABASE_URL", "REDIS_URL", "HERMES_", "ANTHROPIC_", "OPENAI_", "DJANGO_"))}
    env.update({"HERMES_DATA_DIR": str(data), "HERMES_SIMULATOR_PORT": str(sim_port),
                "HERMES_PROVIDER": "simulator", "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
                "PYTHONUNBUFFERED": "1", **(env_extra or {})})
    python = sys.executable
    setup = setup or ('from django.core.management import call_command\n'
                      'call_command("migrate", interactive=False, verbosity=0)\n'
                      'call_command("demo_user")\n')
    subprocess.run([python, "manage.py", "shell", "-c", setup], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=180)
    password = (data / "demo_password").read_text().strip()
    with open(data / "server.log", "wb") as log:
        process = subprocess.Popen(
            [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(web_port),
             "hermes_web.embedded:application"], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT)
        try:
            wait_for_port(web_port, process)
            wait_for_port(sim_port, process)
            sim_url = f"http://127.0.0.1:{sim_port}"
            SIM_TOKENS[sim_url] = wait_for_sim_token(data, process)
            yield f"http://127.0.0.1:{web_port}", sim_url, password
        finally:
            SIM_TOKENS.pop(f"http://127.0.0.1:{sim_port}", None)
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The default embedded server for a test module: (url, sim_url, demo password)."""
    with embedded_server(tmp_path_factory.mktemp("hermes-browser")) as running:
        yield running


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def wait_for_chat(page) -> None:
    """Wait until the session page's scripts have run: chat.js (deferred) attaches the
    composer's Enter-sends handler and ends by setting ``window.hermesChat``, and htmx binds
    the composer at DOMContentLoaded. ``#composer-text`` exists in the HTML before either,
    so a test that types as soon as it appears can press Enter into a page with no handler:
    the key adds a newline, nothing is sent, and the test waits out its whole timeout
    (seen on a loaded 2-core CI host in test_mcp_admin)."""
    try:
        page.wait_for_function(
            "() => window.hermesChat !== undefined && document.readyState === 'complete'")
    except PlaywrightTimeout:
        state = page.evaluate("() => [location.href, document.readyState, typeof window.hermesChat]")
        raise AssertionError(f"the session page never became ready: {state}") from None


def send_message(page, text: str) -> None:
    """Type ``text`` into the composer and press Enter, once the page can send it."""
    wait_for_chat(page)
    page.fill("#composer-text", text)
    page.press("#composer-text", "Enter")


NEW_SESSION_BUTTONS = ("#new-session", "#sidebar-new-session", "#header-new-session")


def click_new_session(page) -> None:
    """Press the one "New session" button in sight: the session list's own (#new-session),
    the sidebar's on desktop, or the header's where the sidebar is hidden (a phone, or the
    column collapsed); static/app.css shows one at a time. Two in sight fails (strict
    locator)."""
    page.locator(", ".join(f"{b}:visible" for b in NEW_SESSION_BUTTONS)).click()


def logged_in(browser, url: str, username: str, password: str, *,
              viewport: dict | None = None):
    """A new browser context logged in as ``username``; returns (context, page) on "/"."""
    context = browser.new_context(viewport=viewport or {"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    return context, page
