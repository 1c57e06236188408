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

Every /_sim/* request must carry the server's token (``SimulatorServer.token``) as
``Authorization: Bearer <token>`` or ``X-Simulator-Token: <token>`` (simulator/control.py):
the request log holds every user's prompts and a script decides every user's tool calls, and
127.0.0.1 is reachable by every OS user of the host. Without a token the answer is 401
``{"error": ...}``, with a wrong one 403; either way nothing is read or changed, the body is
not read and the connection is closed. The model routes (/v1/...) need no token, nor does
GET /_sim/proof?nonce=... (an HMAC of the nonce under the token, no state: lets a client
check the server holds its token without sending it).
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from simulator.anthropic_api import count_tokens_endpoint, handle_messages
from simulator.control import NONCE_RE, PROOF_PATH, control_headers, new_token, presented_token, \
    proof, token_matches
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

    def _refused(self, path: str) -> bool:
        """For a /_sim/* ``path``: False when the request carries the server's token; else
        answer 401 (no token) or 403 (wrong token) with a short JSON error, close the
        connection (the body, if any, is left unread) and return True. Model routes pass."""
        if not path.startswith("/_sim"):
            return False
        presented = presented_token(self.headers)
        if presented is not None and token_matches(presented, self.server.token):
            return False
        self.close_connection = True
        if presented is None:
            self.send_json(401, {"error": "simulator control API: token required "
                                          "(Authorization: Bearer <token>)"},
                           {"WWW-Authenticate": 'Bearer realm="simulator"', "Connection": "close"})
        else:
            self.send_json(403, {"error": "simulator control API: wrong token"},
                           {"Connection": "close"})
        return True

    def _proof(self) -> None:
        """GET /_sim/proof?nonce=N: {"proof": HMAC-SHA256(token, N)}; 400 for a missing or
        malformed nonce (16..256 URL-safe characters). Reads no state."""
        query = parse_qs(self.path.partition("?")[2])
        nonce = (query.get("nonce") or [""])[0]
        if not NONCE_RE.fullmatch(nonce):
            self.send_json(400, {"error": "nonce: 16..256 characters [A-Za-z0-9_-]"})
            return
        self.send_json(200, {"proof": proof(self.server.token, nonce)})

    def do_GET(self) -> None:
        state = self.server.state
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == PROOF_PATH:
            self._proof()
            return
        if self._refused(path):
            return
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
        if self._refused(path):
            return
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

    def __init__(self, address: tuple[str, int], state: SimulatorState, token: str) -> None:
        self.state = state
        self.token = token
        super().__init__(address, _Handler)


class SimulatorServer:
    """The provider simulator on a local port.

    ``port=0`` picks a free port. ``script``: rules, a policy callable
    (ScriptRequest → Reply or dict), a Script, or None for the demo policy.
    ``follow_wall``: let the cache clock advance with real time (demo server).
    ``token``: the secret every /_sim/* request must carry (``control_headers``); None
    generates a random one (``secrets.token_urlsafe``), kept only in this object, so an
    in-process caller uses ``server.token`` / ``server.control_headers`` and any other
    process must be given it (hermes_web/embedded.py writes it to a 0600 file in the data
    dir). An empty token is refused (ValueError): it would let anyone in.
    ``start()`` serves in a daemon thread and returns self; ``url`` is the base URL for the
    anthropic SDK (openai clients use ``url + "/v1"``); ``stop()`` closes the socket.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 script: list[ScriptRule] | Policy | Script | None = None, *,
                 follow_wall: bool = False, token: str | None = None) -> None:
        if token is not None and not token.strip():
            raise ValueError("the simulator's control token must not be empty")
        self.token = token.strip() if token is not None else new_token()
        self.state = SimulatorState(script=script, follow_wall=follow_wall)
        self._server = _Server((host, port), self.state, self.token)
        self._thread: threading.Thread | None = None

    @property
    def control_headers(self) -> dict[str, str]:
        """Headers that authorize a /_sim/* request to this server."""
        return control_headers(self.token)

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
