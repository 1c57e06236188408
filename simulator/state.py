"""The simulator's mutable state: configuration, clock, cache, fault queue, script and the
log of every request answered. Shared by the HTTP handlers (under its lock) and by tests or
benchmarks driving it in-process. No HTTP or wire format here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from simulator.cache import PromptCache, SimClock
from simulator.demo import demo_policy
from simulator.faults import FaultQueue
from simulator.script import Policy, Script, ScriptRule

DEFAULT_CONTEXT_WINDOW = 200_000
DEFAULT_MIN_CACHEABLE_TOKENS = 1024


@dataclass(slots=True)
class SimConfig:
    """Tunables (mutable: POST /_sim/config changes them).

    ``context_window``: tokens, for models not in ``context_windows``.
    ``context_windows``: per-model windows, tokens. ``min_cacheable_tokens``: shortest
    prefix a breakpoint caches (Anthropic: 1,024 for most models).
    ``strict_roles``: the OpenAI endpoint rejects two consecutive messages of the same role
    (user/user, assistant/assistant), as vLLM's and Mistral's strict chat templates do.
    ``gateway_tool_ttl``: act as a gateway that adds its own cache marker with this TTL
    ("5m" or "1h") on the last tool before the request reaches the API (issue 10 defect 8).
    ``output_caps``: per-model output caps (tokens); a larger max_tokens gets the Messages
    API's 400 (issue 10 defect 7).
    """

    context_window: int = DEFAULT_CONTEXT_WINDOW
    context_windows: dict[str, int] = field(default_factory=dict)
    min_cacheable_tokens: int = DEFAULT_MIN_CACHEABLE_TOKENS
    strict_roles: bool = True
    gateway_tool_ttl: str | None = None
    output_caps: dict[str, int] = field(default_factory=dict)

    def window_for(self, model: str) -> int:
        return self.context_windows.get(model, self.context_window)

    def to_dict(self) -> dict[str, Any]:
        return {"context_window": self.context_window,
                "context_windows": dict(self.context_windows),
                "min_cacheable_tokens": self.min_cacheable_tokens,
                "strict_roles": self.strict_roles, "gateway_tool_ttl": self.gateway_tool_ttl,
                "output_caps": dict(self.output_caps)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request as answered: ``endpoint`` "anthropic"/"openai", the JSON ``body``, the
    HTTP ``status``, the ``usage`` object returned (None on error), the simulated ``clock``
    time in seconds, the ``fault`` kind consumed and the error message if any."""

    endpoint: str
    body: dict[str, Any]
    status: int
    usage: dict[str, Any] | None
    clock: float
    fault: str | None = None
    error: str | None = None
    api_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "body": self.body, "status": self.status,
                "usage": self.usage, "clock": self.clock, "fault": self.fault,
                "error": self.error, "api_key": self.api_key}


class SimulatorState:
    """Everything a running simulator remembers.

    ``script`` None means the demo policy. ``follow_wall`` makes the clock advance with real
    time too (for the long-running demo server); tests keep it frozen and call
    ``clock.advance``.
    """

    def __init__(self, *, script: list[ScriptRule] | Policy | Script | None = None,
                 follow_wall: bool = False) -> None:
        self._initial_script = script
        self.lock = threading.RLock()
        self.clock = SimClock(follow_wall=follow_wall)
        self.config = SimConfig()
        self.cache = PromptCache(self.clock, min_cacheable_tokens=self.config.min_cacheable_tokens)
        self.faults = FaultQueue()
        self.requests: list[RecordedRequest] = []
        self.script = _as_script(script)
        self._counter = 0

    def reset(self) -> None:
        """Back to the initial state: clock at 0, empty cache, log and fault queue, default
        config, the script given at construction."""
        with self.lock:
            self.clock.reset()
            self.config = SimConfig()
            self.cache.clear()
            self.cache.min_cacheable_tokens = self.config.min_cacheable_tokens
            self.faults.clear()
            self.requests.clear()
            self.script = _as_script(self._initial_script)
            self._counter = 0

    def configure(self, *, context_window: int | None = None,
                  context_windows: dict[str, int] | None = None,
                  min_cacheable_tokens: int | None = None, strict_roles: bool | None = None,
                  gateway_tool_ttl: str | None = None,
                  output_caps: dict[str, int] | None = None) -> None:
        """Change the tunables; omitted ones keep their value (``gateway_tool_ttl`` "" turns
        the gateway mode off)."""
        with self.lock:
            if strict_roles is not None:
                self.config.strict_roles = bool(strict_roles)
            if gateway_tool_ttl is not None:
                self.config.gateway_tool_ttl = gateway_tool_ttl or None
            if output_caps is not None:
                self.config.output_caps.update({k: int(v) for k, v in output_caps.items()})
            if context_window is not None:
                self.config.context_window = int(context_window)
            if context_windows is not None:
                self.config.context_windows.update({k: int(v) for k, v in
                                                    context_windows.items()})
            if min_cacheable_tokens is not None:
                self.config.min_cacheable_tokens = int(min_cacheable_tokens)
                self.cache.min_cacheable_tokens = int(min_cacheable_tokens)

    def next_number(self) -> int:
        """A per-server request counter (1, 2, ...) for deterministic ids."""
        with self.lock:
            self._counter += 1
            return self._counter

    def record(self, entry: RecordedRequest) -> None:
        with self.lock:
            self.requests.append(entry)


def _as_script(script: list[ScriptRule] | Policy | Script | None) -> Script:
    if script is None:
        return Script(demo_policy)
    if isinstance(script, Script):
        return script
    return Script(script)
