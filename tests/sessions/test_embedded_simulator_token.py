"""The embedded simulator's control token (hermes_web/embedded.py): generated per start and
written 0600 to the data dir when none is configured, HERMES_SIMULATOR_TOKEN when it is; a
simulator that refuses this process's token is not reused (its owner could read our
prompts in its request log)."""

from __future__ import annotations

import json
import socket
import stat
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from hermes_web import embedded
from simulator import SimulatorServer, control_headers, read_token_file


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def started(settings, tmp_path, **hermes):
    settings.DATA_DIR = tmp_path
    port = free_port()
    settings.HERMES = {**settings.HERMES, "SIMULATOR_PORT": port, "SIMULATOR_TOKEN": "",
                       "SIMULATOR_URL": f"http://127.0.0.1:{port}", **hermes}
    assert "simulator" not in embedded._handles
    try:
        url = embedded.start_simulator()
        yield url, embedded._handles["simulator"]
    finally:
        server = embedded._handles.pop("simulator", None)
        if server is not None:
            server.stop()


def test_a_generated_token_is_written_0600_and_opens_the_control_api(settings, tmp_path):
    with started(settings, tmp_path) as (url, server):
        path = tmp_path / "simulator_token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert read_token_file(path) == server.token == embedded.simulator_token()
        assert httpx.get(f"{url}/_sim/requests").status_code == 401
        assert httpx.get(f"{url}/_sim/requests",
                         headers=control_headers(read_token_file(path))).status_code == 200
        assert embedded.simulator_serving(url)  # a second process would reuse it


def test_a_configured_token_is_used_and_no_file_written(settings, tmp_path):
    with started(settings, tmp_path, SIMULATOR_TOKEN="configured-secret") as (url, server):
        assert server.token == "configured-secret"
        assert not (tmp_path / "simulator_token").exists()
        assert embedded.simulator_serving(url)


@pytest.mark.parametrize("token_file", [None, "somebody-elses-token"])
def test_a_simulator_that_refuses_our_token_is_not_reused(settings, tmp_path, token_file):
    other = SimulatorServer(port=0).start()  # another user's / data dir's simulator
    try:
        if token_file:
            (tmp_path / "simulator_token").write_text(token_file)
        settings.DATA_DIR = tmp_path
        settings.HERMES = {**settings.HERMES, "SIMULATOR_TOKEN": ""}
        assert not embedded.simulator_serving(other.url)
    finally:
        other.stop()


def test_a_squatter_answering_anything_is_not_reused_and_never_sees_the_token(settings,
                                                                              tmp_path):
    """Another account binds the port first and answers 200 to everything: the probe asks it
    for a proof instead of sending the token, so it neither passes nor learns the token."""
    seen: list[str] = []

    class Squatter(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path + "\n" + str(self.headers))
            body = json.dumps({"context_window": 200000, "proof": "0" * 64}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            return

    squatter = ThreadingHTTPServer(("127.0.0.1", 0), Squatter)
    threading.Thread(target=squatter.serve_forever, daemon=True).start()
    try:
        port = squatter.server_address[1]
        with started(settings, tmp_path, SIMULATOR_TOKEN="configured-secret",
                     SIMULATOR_PORT=port, SIMULATOR_URL=f"http://127.0.0.1:{port}") as (url,
                                                                                     server):
            assert url != f"http://127.0.0.1:{port}"  # our own, on a free port
            assert server.token == "configured-secret"
        assert seen and not any("configured-secret" in request for request in seen)
    finally:
        squatter.shutdown()
        squatter.server_close()
