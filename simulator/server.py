"""The simulator's HTTP server: routing, chunked streaming, and the /_sim/ control API.

``SimulatorServer`` serves the Anthropic Messages and OpenAI chat-completions endpoints on a
stdlib ThreadingHTTPServer (one thread per connection, HTTP/1.1 keep-alive) in a daemon
thread, so the real SDKs talk to it over real sockets. Endpoint behaviour lives in
``anthropic_api`` / ``openai_api``; state in ``state``. The control API lets another process
drive it: GET /_sim/requests, POST /_sim/reset, POST /_sim/clock {"advance": s},
POST /_sim/faults {"kind": ...} (or {"faults": [...]}, {"clear": true}),
POST /_sim/script {"rules": [...]} (or {"default": true}), POST /_sim/config
{"context_window", "context_windows", "min_cacheable_tokens"}; GET /_sim/clock, /_sim/config,
/_sim/faults read them back.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from simulator.anthropic_api import count_tokens_endpoint, handle_messages
from simulator.demo import demo_policy
from simulator.faults import Fault
from simulator.openai_api import handle_chat
from simulator.script import Policy, Script, ScriptRule
from simulator.state import SimulatorState

MAX_BODY_BYTES = 64 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests own stdout
        return

    # --- WireIO ---------------------------------------------------------------------------
    def send_json(self, status: int, body: dict[str, Any],
                  headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()

    def write(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def cut(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --- routing --------------------------------------------------------------------------
    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw.strip() else {}

    def do_GET(self) -> None:
        state = self.server.state
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/_sim/requests":
            with state.lock:
                items = [r.to_dict() for r in state.requests]
            self.send_json(200, {"requests": items})
        elif path == "/_sim/clock":
            self.send_json(200, {"now": state.clock.now()})
        elif path == "/_sim/config":
            self.send_json(200, state.config.to_dict())
        elif path == "/_sim/faults":
            self.send_json(200, {"faults": [f.to_dict() for f in state.faults.pending()]})
        elif path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": "claude-simulator", "object": "model", "type": "model",
                 "display_name": "Simulator"}]})
        else:
            self._not_found()

    def do_POST(self) -> None:
        state = self.server.state
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = self._body()
        except ValueError as error:
            self.send_json(400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": f"invalid JSON body: {error}"}})
            return
        try:
            if path == "/v1/messages":
                handle_messages(state, self, body)
            elif path == "/v1/messages/count_tokens":
                count_tokens_endpoint(state, self, body)
            elif path in ("/v1/chat/completions", "/chat/completions"):
                handle_chat(state, self, body)
            elif path.startswith("/_sim/"):
                self._control(path, body)
            else:
                self._not_found()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-stream

    def _not_found(self) -> None:
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                        "message": f"Not found: {self.path}"}})

    def _control(self, path: str, body: Any) -> None:
        state = self.server.state
        if not isinstance(body, dict):
            self.send_json(400, {"error": "expected a JSON object"})
            return
        try:
            if path == "/_sim/reset":
                state.reset()
                self.send_json(200, {"ok": True})
            elif path == "/_sim/clock":
                self.send_json(200, {"now": state.clock.advance(float(body.get("advance", 0)))})
            elif path == "/_sim/faults":
                if body.get("clear"):
                    state.faults.clear()
                for item in body.get("faults", [body] if "kind" in body else []):
                    state.faults.push(Fault.from_dict(item))
                self.send_json(200, {"pending": len(state.faults.pending())})
            elif path == "/_sim/script":
                with state.lock:
                    state.script = (Script(demo_policy) if body.get("default")
                                    else Script.from_json(list(body.get("rules") or [])))
                self.send_json(200, {"ok": True})
            elif path == "/_sim/config":
                state.configure(context_window=body.get("context_window"),
                                context_windows=body.get("context_windows"),
                                min_cacheable_tokens=body.get("min_cacheable_tokens"),
                                strict_roles=body.get("strict_roles"),
                                gateway_tool_ttl=body.get("gateway_tool_ttl"),
                                output_caps=body.get("output_caps"))
                self.send_json(200, state.config.to_dict())
            else:
                self._not_found()
        except (ValueError, TypeError, KeyError) as error:
            self.send_json(400, {"error": f"{type(error).__name__}: {error}"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: SimulatorState) -> None:
        self.state = state
        super().__init__(address, _Handler)


class SimulatorServer:
    """The provider simulator on a local port.

    ``port=0`` picks a free port. ``script``: rules, a policy callable
    (ScriptRequest → Reply or dict), a Script, or None for the demo policy.
    ``follow_wall``: let the cache clock advance with real time (demo server).
    ``start()`` serves in a daemon thread and returns self; ``url`` is the base URL for the
    anthropic SDK (openai clients use ``url + "/v1"``); ``stop()`` closes the socket.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 script: list[ScriptRule] | Policy | Script | None = None, *,
                 follow_wall: bool = False) -> None:
        self.state = SimulatorState(script=script, follow_wall=follow_wall)
        self._server = _Server((host, port), self.state)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> SimulatorServer:
        """Serve in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name=f"simulator:{self.port}", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until ``stop()`` or KeyboardInterrupt."""
        self._server.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
