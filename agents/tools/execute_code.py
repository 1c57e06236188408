"""execute_code: run a Python script in the session's backend (the terminal's: the sandbox,
or the host under Landlock), with a timeout and an output cap; the script calls the
read-only and file tools through a small RPC, so one call batches many operations.

The RPC: the tool writes ``hermes_tools.py`` and the script under
``.hermes/code/`` in the workspace through the confined Workspace, and listens on a Unix
socket there (bound through ``/proc/self/fd/<dir fd>``: workspace paths may be longer than
a socket address allows, and the directory is opened without following links). The script
runs ``python3 -u`` in the workspace; ``import hermes_tools`` (code_helper.tmpl) gives it ``read_file``,
``write_file``, ``patch``, ``search_files``, ... which send one JSON line per call
({"token", "tool", "args"}) and read one back ({"ok", "text"}). Every RPC call goes
through ``ctx.extras["code_rpc"](name, args) -> ToolOutput``: the composition root's
validate → the one policy gate → the same tool on the same Workspace (agents/tools/
code_rpc.py). A call the policy would ask about is refused inside the script (nobody can
approve mid-script). The iteration of a reply whose only tool call is execute_code is
refunded (agents/budget.py, the seed's sixth refund).

Past the timeout the backend kills the whole process tree; what was printed before is kept
(unbuffered) and the result says so. Output past the cap is cut with a note naming the cap.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.errors import ToolError
from agents.messages import ToolSpec
from agents.tools import (CURRENT_CALL_SANCTIONED, NoPathArguments, PathScope, ToolContext,
                          ToolOutput)
from agents.tools.steering import run_guarded, steering_notice
from agents.tools.workspace import Workspace
from agents.wording import plural

DEFAULT_TIMEOUT = 60
MAX_TIMEOUT = 300
"""Seconds (clamped; the result says so)."""
DEFAULT_OUTPUT_CAP = 50_000
"""Characters of script output kept (``ctx.extras["code_output_cap"]`` overrides)."""
MAX_RPC_CALLS = 500
"""Tool calls one script may make."""
MAX_RPC_LINE = 4 * 1024 * 1024
"""Bytes of one RPC request (a write_file of a large file fits)."""
CODE_DIR = ".hermes/code"
RPC_TOOLS = ("read_file", "write_file", "patch", "search_files", "skills_list", "skill_view",
             "session_search")
"""What a script may call: the read-only and file tools (no terminal, memory, clarify)."""

HELPER_TEMPLATE = Path(__file__).with_name("code_helper.tmpl")
"""The generated module's source (%-formatted with ``tools`` and ``functions``); a data
file, since it is the script's code, not the harness's (it reads the script's environment)."""


def helper_source(tools: tuple[str, ...] = RPC_TOOLS) -> str:
    """The generated hermes_tools module: one function per tool in ``tools``."""
    functions = "\n".join(
        f"def {name}(**args):\n    return call({name!r}, **args)\n" for name in tools)
    return HELPER_TEMPLATE.read_text() % {"tools": ", ".join(tools), "functions": functions}


def cap_output(text: str, cap: int) -> tuple[str, bool]:
    """(text cut to ``cap`` characters with a note naming the cap, whether it was cut)."""
    if len(text) <= cap:
        return text, False
    return (text[:cap] + f"\n[output capped at {cap} characters; {len(text) - cap} more "
            "were not kept: print less, or write large results to a file]"), True


class RpcServer:
    """The tool side of the RPC: a Unix socket in ``dir_fd`` answering JSON lines with
    ``handler(name, args) -> ToolOutput``. ``serve(done)`` runs on the CALLING thread (the
    tool's own: its acting identity, its call id and its database connection serve every
    call; no thread is left behind) until ``done()``; ``calls`` counts requests."""

    def __init__(self, dir_fd: int, name: str, token: str,
                 handler: Callable[[str, dict], ToolOutput]):
        self.token, self.handler, self.calls = token, handler, 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(f"/proc/self/fd/{dir_fd}/{name}")
        os.chmod(name, 0o666, dir_fd=dir_fd)  # the sandbox's uid must connect
        self._dir_fd, self._name = dir_fd, name
        self._sock.listen(4)
        self._sock.setblocking(False)

    def _answer(self, line: bytes) -> dict:
        try:
            request = json.loads(line)
        except ValueError:
            return {"ok": False, "text": "the request is not JSON"}
        if not isinstance(request, dict) or request.get("token") != self.token:
            return {"ok": False, "text": "bad RPC token"}
        name, args = request.get("tool"), request.get("args")
        if not isinstance(name, str) or not isinstance(args, dict):
            return {"ok": False, "text": "a request needs a tool name and an args object"}
        self.calls += 1
        if self.calls > MAX_RPC_CALLS:
            return {"ok": False, "text": f"at most {MAX_RPC_CALLS} tool calls per script"}
        output = self.handler(name, args)
        return {"ok": not output.is_error, "text": output.text}

    def serve(self, done: Callable[[], bool]) -> None:
        """Answer requests (one JSON line each, in arrival order per connection) until
        ``done()`` is true; a line over MAX_RPC_LINE closes its connection."""
        selector = selectors.DefaultSelector()
        selector.register(self._sock, selectors.EVENT_READ, None)
        buffers: dict[socket.socket, bytes] = {}
        try:
            while not done():
                for key, _ in selector.select(timeout=0.05):
                    if key.data is None:
                        try:
                            conn, _ = self._sock.accept()
                        except BlockingIOError:
                            continue
                        selector.register(conn, selectors.EVENT_READ, "client")
                        buffers[conn] = b""
                        continue
                    conn = key.fileobj
                    try:
                        chunk = conn.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    buffer = buffers.get(conn, b"") + chunk
                    if not chunk or len(buffer) > MAX_RPC_LINE:
                        if chunk:
                            self._send(conn, {"ok": False, "text": "request too large"})
                        selector.unregister(conn)
                        buffers.pop(conn, None)
                        conn.close()
                        continue
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        self._send(conn, self._answer(line))
                    buffers[conn] = buffer
        finally:
            for conn in list(buffers):
                conn.close()
            selector.close()

    @staticmethod
    def _send(conn: socket.socket, reply: dict) -> None:
        conn.setblocking(True)
        try:
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass  # the script died; its result says so
        finally:
            conn.setblocking(False)

    def close(self) -> None:
        self._sock.close()
        try:
            os.unlink(self._name, dir_fd=self._dir_fd)
        except OSError:
            pass


class ExecuteCode(NoPathArguments):
    """execute_code {code, timeout=60 (max 300)} → the script's output, its exit code and
    how many tool calls it made. ``ctx.extras``: ``code_rpc`` (the RPC handler; without it
    the script runs with no tools), ``code_output_cap`` (characters), ``should_stop``."""

    spec = ToolSpec(
        name="execute_code",
        description=(
            "Run a Python 3 script in the workspace and return what it prints. Use it to "
            "batch many operations in one call: `from hermes_tools import read_file, "
            "write_file, patch, search_files` and call them with the same arguments as the "
            "tools (each returns the result text, raises hermes_tools.ToolError on failure). "
            "An iteration whose only tool call is execute_code does not count against the "
            "iteration budget. timeout in seconds (default 60, max 300); output is capped."),
        input_schema={
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The Python script."},
                "timeout": {"type": "integer", "minimum": 1,
                            "description": "Seconds before the script is killed."},
            },
            "required": ["code"],
            "additionalProperties": False,
        },
    )
    read_only = False

    effect = "code"  # Python through the command backend
    interactive = False

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("'code' must be a non-empty string")
        if ctx.backend is None:
            raise ToolError("no command backend is configured for this session")
        requested = int(args.get("timeout", DEFAULT_TIMEOUT))
        timeout = max(1, min(requested, MAX_TIMEOUT))
        cap = int(ctx.extras.get("code_output_cap") or DEFAULT_OUTPUT_CAP)
        ws = Workspace(ctx.workspace)
        stem = secrets.token_hex(8)
        token = secrets.token_hex(16)
        ws.write_bytes(f"{CODE_DIR}/hermes_tools.py", helper_source().encode())
        ws.write_bytes(f"{CODE_DIR}/run_{stem}.py", code.encode("utf-8", "surrogatepass"))
        handler = ctx.extras.get("code_rpc") or (
            lambda name, a: ToolOutput(text="no tools are available to this script",
                                       is_error=True))
        with ws.dir(CODE_DIR) as dir_fd:
            server = RpcServer(dir_fd, f"rpc_{stem}.sock", token, handler)
            outcome: dict[str, Any] = {}

            def run_script() -> None:  # only the process runs off this thread
                try:
                    outcome["result"] = ctx.backend.run(
                        f"exec python3 -u -B {CODE_DIR}/run_{stem}.py", cwd=ctx.workspace,
                        timeout=timeout, should_stop=ctx.extras.get("should_stop"),
                        env={"HERMES_RPC_SOCKET": f"{CODE_DIR}/rpc_{stem}.sock",
                             "HERMES_RPC_TOKEN": token, "PYTHONDONTWRITEBYTECODE": "1"})
                except BaseException as exc:  # re-raised on the tool's thread below
                    outcome["error"] = exc

            process = threading.Thread(target=run_script, name="hermes-execute-code",
                                       daemon=True)

            def run_and_serve() -> None:  # the script and its tool calls, guarded as one
                process.start()
                server.serve(done=lambda: not process.is_alive())
                process.join()

            try:
                _, undone = run_guarded(ws, run_and_serve,
                                        sanctioned=CURRENT_CALL_SANCTIONED.get())
            finally:
                server.close()
                try:
                    os.unlink(f"run_{stem}.py", dir_fd=dir_fd)
                except OSError:
                    pass
        if "error" in outcome:
            raise outcome["error"]
        result = outcome["result"]
        output, capped = cap_output(result.output.rstrip("\n"), cap)
        lines = [output] if output.strip() else ["(no output)"]
        if requested > MAX_TIMEOUT:
            lines.append(f"[timeout clamped to {MAX_TIMEOUT} s]")
        if result.timed_out:
            lines.append(f"[timed out after {timeout} s; the script was killed; the output "
                         "above is what it printed before]")
        if result.interrupted:
            lines.append("[stopped by the user; the script was killed]")
        lines.append(f"[exit code {result.exit_code}; {plural(server.calls, 'tool call')}]")
        if undone:
            lines.append(steering_notice(undone))
        return ToolOutput(text="\n".join(lines), is_error=result.timed_out or result.interrupted,
                          metadata={"exit_code": result.exit_code, "timed_out": result.timed_out,
                                    "tool_calls": server.calls, "capped": capped,
                                    **({"steering_undone": undone} if undone else {}),
                                    **({"stopped": True} if result.interrupted else {})})
