"""The control API's secret: who may read the request log or change the simulator's state.

Every /_sim/* route (the request log holds every user's full prompts: system prompts,
messages, tool outputs, workspace paths; /_sim/script decides which tool calls every user's
agent makes) requires the server's token, sent as ``Authorization: Bearer <token>`` or
``X-Simulator-Token: <token>``. Without it any OS user of the host could read and steer the
embedded simulator on 127.0.0.1 (security finding: unauthenticated control API). The model
routes (/v1/messages, /v1/chat/completions, /v1/models) need no token: the harness calls
them as it would a real provider, with an API key the simulator ignores.

One /_sim/ route is open: GET /_sim/proof?nonce=<16..256 URL-safe characters> answers
``{"proof": proof(token, nonce)}`` (an HMAC-SHA256 of the client's nonce under the token;
400 for a missing or malformed nonce). It reads no state and reveals nothing about the
token, and it lets a client check that the server at a URL holds the token it knows
(``proves``) without sending the token to whatever listens there (hermes_web/embedded.py
decides so whether to reuse a simulator already on its port).

The token is compared in constant time (``hmac.compare_digest``). ``write_token_file``
keeps it where only the app's own OS user can read it (mode 0600), so a developer on the
same account can drive the simulator with curl and nobody else can.

Plain stdlib, like the rest of simulator/ (no django).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path

TOKEN_HEADER = "X-Simulator-Token"
"""The alternative to ``Authorization: Bearer <token>``."""

PROOF_PATH = "/_sim/proof"
"""The open route that proves the server holds the token (see the module docstring)."""

NONCE_RE = re.compile(r"[A-Za-z0-9_-]{16,256}")

TOKEN_FILE_NAME = "simulator_token"
"""The file in the app's data directory that holds a generated token (mode 0600)."""


def new_token() -> str:
    """A fresh random token (``secrets.token_urlsafe``, 256 bits)."""
    return secrets.token_urlsafe(32)


def control_headers(token: str) -> dict[str, str]:
    """The headers a client sends to a /_sim/* route: ``{"Authorization": "Bearer <token>"}``
    (e.g. ``httpx.get(f"{url}/_sim/requests", headers=control_headers(token))``)."""
    return {"Authorization": f"Bearer {token}"}


def presented_token(headers: Mapping[str, str]) -> str | None:
    """The token a request carries: the ``Authorization: Bearer`` value, else the
    ``X-Simulator-Token`` value, else None (no credential at all)."""
    authorization = (headers.get("Authorization") or "").strip()
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    value = (headers.get(TOKEN_HEADER) or "").strip()
    return value or None


def token_matches(presented: str, expected: str) -> bool:
    """True when ``presented`` is ``expected``, compared in constant time (as bytes, so a
    non-ASCII header value is simply wrong instead of raising TypeError)."""
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


def proof(token: str, nonce: str) -> str:
    """HMAC-SHA256 of ``nonce`` under ``token`` (hex): what GET /_sim/proof answers."""
    return hmac.new(token.encode("utf-8", "surrogatepass"),
                    b"hermes-simulator-proof:" + nonce.encode("ascii"), hashlib.sha256).hexdigest()


def proves(answer: object, token: str, nonce: str) -> bool:
    """True when ``answer`` (the JSON of GET /_sim/proof?nonce=...) is the proof for
    ``token`` and ``nonce``; anything else (not a dict, no proof, a wrong one) is False."""
    given = answer.get("proof") if isinstance(answer, dict) else None
    return isinstance(given, str) and token_matches(given, proof(token, nonce))


def write_token_file(path: str | os.PathLike[str], token: str) -> Path:
    """Write ``token`` to ``path`` readable and writable by its owner only (0600); returns
    the path. Written to a 0600 temporary file in the same directory and renamed over
    ``path``, so the token is never readable by others, not even for a moment, a file left
    with wider permissions by an older version is replaced rather than reused, a symlink
    planted at ``path`` is replaced rather than followed, and a reader never sees half a
    token."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_token_file(path: str | os.PathLike[str]) -> str | None:
    """The token kept at ``path``, or None when there is none (missing, unreadable, empty)."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return token or None
