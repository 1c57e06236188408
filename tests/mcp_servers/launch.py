"""Starting the test MCP servers: argv for the stdio ones, a running HTTP one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent


def stdio_command(name: str, *args: str) -> str:
    """The command line a team admin would type for tests/mcp_servers/<name>.py."""
    return " ".join([sys.executable, str(HERE / f"{name}.py"), *args])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def http_server():
    """Run http_tools.py on a free loopback port; yields its /mcp URL; stops it after."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "http_tools.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP MCP server exited"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=10)
