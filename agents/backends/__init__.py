"""Where a terminal command runs: the Backend seam and its result value.

A backend turns a command string into a ``CommandResult``. It owns process lifetime
(timeouts; killing every process the command started, detached or not:
agents/backends/reaper.py) and the environment the command sees (never the web
process's secrets). It does not decide whether a command may run (that is agents/policy/__init__.py),
nor cap output for the model (that is the terminal tool and agents/tools/spill.py).

Implementations: ``agents.backends.local.LocalBackend`` (a plain subprocess) and
``agents.backends.sandbox`` (bubblewrap; isolated).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """The outcome of one command.

    ``exit_code``: the shell's exit status; negative N means killed by signal N (a timeout
    reports the kill). ``output``: stdout and stderr interleaved as written, decoded as UTF-8
    with replacement characters. ``timed_out``: the timeout expired and the command and all
    its descendants were killed. ``interrupted``: the caller's ``should_stop`` turned true
    (the user pressed stop) and the command and all its descendants were killed.
    """

    exit_code: int
    output: str
    timed_out: bool = False
    interrupted: bool = False


class Backend(Protocol):
    """Runs shell commands for the terminal tool.

    ``name``: "local" or "sandbox". ``isolated``: True when the command cannot touch anything
    outside the session workspace (the policy relaxes its checks only for isolated backends;
    hermes-facts §10).
    """

    name: Literal["local", "sandbox"]
    isolated: bool

    def run(self, command: str, *, cwd: Path, timeout: float,
            env: dict[str, str] | None = None,
            should_stop: Callable[[], bool] | None = None) -> CommandResult:
        """Run ``command`` with ``bash -c`` in ``cwd``; ``timeout`` in seconds.

        ``env`` entries are added to the backend's minimal environment. ``should_stop`` is
        polled while the command runs; when it turns true the command and its
        descendants are killed and the result says ``interrupted`` (a stop button must
        stop the command, not only the
        turn after it). Never raises for a
        failing or timed-out command (that is a result); raises OSError only when the
        process cannot be started at all. When it returns, no process the command
        started is left running.
        """
        ...


__all__ = ["Backend", "CommandResult"]


BackendKind = Literal["sandbox", "local"]


def backend_select(choice: str, *, sandbox_works: Callable[[], bool]) -> BackendKind:
    """The one backend rule: HERMES_BACKEND ``choice`` is "local", "sandbox" or "auto"
    (the sandbox when ``sandbox_works()``, else local). Raises BackendUnavailable when the
    sandbox is demanded but does not work (fail closed rather than silently run on the
    host); raises ValueError for any other ``choice``. The runner, the policy and the
    Settings page all read its answer (sessions/backends.py)."""
    if choice not in ("local", "sandbox", "auto"):
        raise ValueError(f"HERMES_BACKEND={choice!r}: expected local, sandbox or auto")
    if choice in ("sandbox", "auto") and sandbox_works():
        return "sandbox"
    if choice == "sandbox":
        raise BackendUnavailable(choice=choice,
                                 reason="HERMES_BACKEND=sandbox but bubblewrap does not work "
                                        "here")
    return "local"


class BackendUnavailable(RuntimeError):
    """The configured backend cannot run commands on this host. ``choice``: the
    HERMES_BACKEND value; ``reason``: a sentence for the operator. A RuntimeError, as the
    selector raised before it had a type of its own."""

    def __init__(self, *, choice: str, reason: str):
        super().__init__(reason)
        self.choice = choice
        self.reason = reason
