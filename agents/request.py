"""The per-iteration request pipeline: repair the wire history, build the request, plan the
cache breakpoints on a copy, and measure the exact payload for calibration.

Why one place: the order matters. Repair comes first (a provider must never see an illegal
history, cases B01/B02), the planner runs on the repaired copy (stored rows never carry
markers), and the estimator measures the payload the transport will really send (seed, "The
number that fires all of this is wrong"). Compaction and prune decisions are the caller's
(they commit rows); this module only reports the projected size they are judged on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents import Transport
from agents.cache import CacheSettings, plan_breakpoints
from agents.history import validate_and_repair
from agents.messages import Message, ModelRequest, ToolSpec
from agents.tokens import Calibrator, estimate_payload_tokens, prefix_fingerprint


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedRequest:
    """What ``RequestPipeline.prepare`` produced: the planned request, the legal history it
    was built from, the synthetic results the caller must store (``added``), the repair
    notes, and the rough estimate (tokens) of the exact payload with its projection."""

    request: ModelRequest
    history: list[Message]
    added: tuple[Message, ...]
    problems: tuple[str, ...]
    rough_tokens: int
    projected_tokens: int


@dataclass(kw_only=True)
class RequestPipeline:
    """Builds one session's requests. ``system``/``stable_len`` are the stored prompt bytes
    and the recovered stable-tier boundary (None: unknown, one breakpoint on the system);
    ``tools`` the schema snapshot; ``profile`` anything with the ProfileCaps attributes.
    ``started_call_ids``: calls that began running (a repair then says "interrupted")."""

    transport: Transport
    model: str
    system: str
    stable_len: int | None
    tools: tuple[ToolSpec, ...]
    profile: object
    calibrator: Calibrator
    cache: CacheSettings = field(default_factory=CacheSettings)
    max_tokens: int = 4096
    started_call_ids: set[str] = field(default_factory=set)

    def prepare(self, history: list[Message], *, tools: bool = True) -> PreparedRequest:
        """Repair ``history``, build and plan the request, estimate it. Pure apart from the
        calibrator's pending estimate."""
        repair = validate_and_repair(history, started_call_ids=self.started_call_ids)
        legal = list(repair.messages)
        request = ModelRequest(model=self.model, system=self.system, messages=tuple(legal),
                               tools=self.tools if tools else (), stable_len=self.stable_len,
                               max_tokens=self.max_tokens)
        planned = plan_breakpoints(request, profile_caps=self.profile, settings=self.cache)
        rough = estimate_payload_tokens(self.transport.build_payload(planned))
        self.calibrator.before_call(rough=rough, fingerprint=self.fingerprint(legal),
                                    message_count=len(legal))
        return PreparedRequest(request=planned, history=legal, added=repair.added,
                               problems=repair.problems, rough_tokens=rough,
                               projected_tokens=self.calibrator.projected(rough))

    def fingerprint(self, messages: list[Message]) -> str:
        """Fingerprint of the priced prefix (system + tools + ``messages``)."""
        return prefix_fingerprint(system=self.system, tools=self.tools, messages=messages)
