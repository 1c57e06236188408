"""Where a session's commands run: the one backend selector and the backend it builds.

The rule is agents/backends/__init__.py::backend_select; this module feeds it the setting
and the host probe, builds the backend for a workspace, and describes the confinement for
the Settings page. The runner, the policy context and the Settings page all ask
``backend_kind`` / ``backend_status`` here, so they cannot disagree (issue 11 item 3).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from django.conf import settings

from agents.backends import Backend, BackendUnavailable, backend_select
from agents.backends.confine import landlock_abi
from agents.backends.local import LocalBackend
from agents.backends.sandbox import DEFAULT_HIDE, SandboxBackend, sandbox_available


def backend_kind() -> str:
    """The command backend in force: "sandbox" or "local" (HERMES_BACKEND=local|sandbox,
    or auto: the sandbox when bubblewrap works on this host, else local). Raises
    BackendUnavailable (a RuntimeError) when the sandbox is demanded but does not work."""
    return _backend_kind(settings.HERMES["BACKEND"])


@lru_cache(maxsize=4)
def _backend_kind(choice: str) -> str:
    return backend_select(choice, sandbox_works=sandbox_available)


backend_kind.cache_clear = _backend_kind.cache_clear  # type: ignore[attr-defined]


def backend_status() -> tuple[str, str]:
    """(kind, problem) for pages that must not fail: ``kind`` is backend_kind(), or
    "unavailable" with the selector's reason when it raises; ``problem`` is "" otherwise."""
    try:
        return backend_kind(), ""
    except BackendUnavailable as exc:
        return "unavailable", exc.reason


def protected_paths() -> tuple[str, ...]:
    """Host paths no command may read: the data dir (database, secret key, passwords), the
    app's code, every workspace but the session's own, the deployment home."""
    paths = (settings.DATA_DIR, settings.BASE_DIR, settings.HERMES["WORKSPACE_ROOT"],
             settings.HERMES["HOME"])
    return tuple(dict.fromkeys(str(Path(p).resolve()) for p in paths))


def backend_for(workspace: Path) -> Backend:
    """A backend whose only writable host directory is ``workspace``. The sandbox also hides
    every other workspace and the application directory (its code and secrets); the local
    backend confines with Landlock where the kernel has it (HERMES_LOCAL_CONFINEMENT).
    Raises BackendUnavailable like backend_kind."""
    if backend_kind() == "sandbox":
        uid = settings.HERMES.get("SANDBOX_UID", 61000)
        return SandboxBackend(workspace, hide=tuple(dict.fromkeys((*DEFAULT_HIDE,
                                                                    *protected_paths()))),
                              host_uid=uid, host_gid=uid)
    return LocalBackend(workspace=workspace, protected=protected_paths(),
                        confine=settings.HERMES.get("LOCAL_CONFINEMENT", "auto"))


def local_confined() -> bool:
    """True when a command on the local backend is confined by Landlock: confinement is not
    switched off (HERMES_LOCAL_CONFINEMENT=none) and the kernel offers it. The policy's
    ``PolicyContext.host_confined``; the Settings page's "local + Landlock"."""
    return settings.HERMES.get("LOCAL_CONFINEMENT", "auto") != "none" and landlock_abi() > 0


def confinement() -> dict[str, str]:
    """What stands between a command and the host, for the Settings page: ``kind``
    ("sandbox", "landlock", "policy" or "unavailable"), a short ``label`` and a ``detail``
    sentence. Never raises: an unusable backend is reported, as the runner would fail."""
    kind, problem = backend_status()
    if kind == "unavailable":
        return {"kind": "unavailable", "label": "no usable backend",
                "detail": f"{problem}: every command fails until it is fixed"}
    if kind == "sandbox":
        return {"kind": "sandbox", "label": "sandbox (bubblewrap)",
                "detail": "each command runs in bubblewrap as an unprivileged user: only its "
                          "workspace is writable, system directories are read-only, nothing "
                          "else of the host is visible, no network"}
    if local_confined():
        return {"kind": "landlock", "label": f"local + Landlock (ABI {landlock_abi()})",
                "detail": "commands run on the server host confined by Landlock: writes only "
                          "to the session workspace and a private tmp, reads only system "
                          "directories and the workspace (not the app's data, code or other "
                          "workspaces); the network is not confined; risky commands ask"}
    return {"kind": "policy", "label": "local, policy only",
            "detail": "commands run on the server host with no OS confinement (Landlock is "
                      "unavailable or off): only the approval policy stands in the way"}
