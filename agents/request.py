"""The per-iteration request pipeline: repair the wire history, build the request, plan the
cache breakpoints on a copy, and measure the exact payload for calibration.

Why one place: the order matters. Repair comes first (a provider must never see an illegal
history, cases B01/B02), the planner runs on the repaired copy (stored rows never carry
markers), and the estimator measures the payload the transport will really send (seed, "The
number that fires all of this is wrong"). Compaction and prune decisions are the caller's
(they commit rows); this module only reports the projected size they are judged on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agents import Transport
from agents.cache import CacheSettings, StablePrefixMemo, plan_breakpoints
from agents.context.history import Repair, flatten_tool_exchanges, validate_and_repair
from agents.messages import Message, ModelRequest, ToolSpec, common_prefix
from agents.context.tokens import Calibrator, PrefixFingerprinter, estimate_payload_tokens


MIN_OUTPUT_TOKENS = 256
"""Smallest output budget worth asking for; below it compaction must make room instead."""
OUTPUT_MARGIN_TOKENS = 256
"""Slack between the projected input and the window (the projection is an estimate)."""


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
    context_window: int | None = None
    input_hint: int | None = None
    """A provider-reported input size (tokens) from an overflow error; kept until the next
    response arrives (the caller clears it), so a re-plan after compaction still uses it."""
    _weights: dict = field(default_factory=dict, repr=False)
    # estimate's running sums: _sums[i] is the summed weight of _summed[:i] (the messages
    # of the last estimate), so a history that grew costs only its new messages.
    _summed: list[Message] = field(default_factory=list, repr=False)
    _sums: list[int] = field(default_factory=lambda: [0], repr=False)
    _prefixes: StablePrefixMemo = field(default_factory=StablePrefixMemo, repr=False)
    _fingerprinter: PrefixFingerprinter | None = field(default=None, repr=False)
    _legal: list[Message] = field(default_factory=list, repr=False)
    _call_ids: tuple[int, set[str]] | None = field(default=None, repr=False)
    last_billed: tuple[int, int] | None = None
    """(rough, billed) of the last response, even one over the compaction threshold (which
    the calibrator drops): the output budget must not trust a raw under-estimate."""
    started_call_ids: set[str] = field(default_factory=set)
    strict: bool = False
    """Set by ``repair_strictly`` after a history-shape 400: earlier turns' tool exchanges
    go out as plain text for the rest of this pipeline's life (B01)."""

    def repair_strictly(self) -> None:
        """A provider rejected the history's shape: validate from scratch from now on and
        flatten earlier tool exchanges (agents.context.history.flatten_tool_exchanges), so the
        retry's bytes differ and are legal on every provider (B01)."""
        self.strict = True
        self._legal = []
        self._call_ids = None

    def prepare(self, history: list[Message], *, tools: bool = True) -> PreparedRequest:
        """Repair ``history``, build and plan the request, estimate it. Pure apart from the
        calibrator's pending estimate and the pipeline's memos (which only make a history
        that grew by appending cost its new messages, never change a result)."""
        repair = self._repair(history)
        legal = list(repair.messages)
        if self.strict:
            legal = flatten_tool_exchanges(legal)
        request = ModelRequest(model=self.model, system=self.system, messages=tuple(legal),
                               tools=self.tools if tools else (), stable_len=self.stable_len,
                               max_tokens=self.max_tokens)
        planned = plan_breakpoints(request, profile_caps=self.profile, settings=self.cache,
                                   prefixes=self._prefixes)
        rough = self.estimate(legal, tools=tools)
        self.calibrator.before_call(rough=rough, fingerprint=self.fingerprint(legal),
                                    message_count=len(legal))
        projected = self.calibrator.projected(rough)
        sized = projected
        if self.last_billed is not None:
            sized = max(sized, self.last_billed[1] + max(0, rough - self.last_billed[0]))
        if self.input_hint is not None:  # the provider counted it for us: trust that
            sized = max(sized, self.input_hint)
        self._pending_rough = rough
        planned = replace(planned, max_tokens=self.output_budget(sized))
        return PreparedRequest(request=planned, history=legal, added=repair.added,
                               problems=repair.problems, rough_tokens=rough,
                               projected_tokens=projected)

    def output_budget(self, projected_input: int) -> int:
        """max_tokens for a request whose input is ``projected_input`` tokens: the
        configured cap, clamped so input + output fits the window (providers reject
        "input length and max_tokens exceed context limit"), never below 256 tokens."""
        if not self.context_window:
            return self.max_tokens
        room = self.context_window - projected_input - OUTPUT_MARGIN_TOKENS
        return max(MIN_OUTPUT_TOKENS, min(self.max_tokens, room))

    def note_billed(self, billed: int | None) -> None:
        """Pair the last prepared estimate with the billed prompt tokens (None: no usage)."""
        self.input_hint = None
        rough = getattr(self, "_pending_rough", None)
        if billed is not None and rough is not None:
            self.last_billed = (rough, billed)

    def note_overflow(self, input_tokens: int | None, context_limit: int | None = None) -> bool:
        """Take the provider's own count of the input (tokens; the classifier's
        ``input_tokens`` hint, parsed from every provider's overflow body) so the next
        request sizes its output budget from it (case B25). ``context_limit``: the window
        the provider stated, kept when smaller than the configured one. True when the input
        alone fits, so a smaller max_tokens is the fix rather than a compaction."""
        if context_limit is not None and (self.context_window is None
                                          or context_limit < self.context_window):
            self.context_window = context_limit
        if input_tokens is None:
            return False
        self.input_hint = max(input_tokens, self.input_hint or 0)
        room = (self.context_window or 0) - input_tokens - OUTPUT_MARGIN_TOKENS
        return room >= MIN_OUTPUT_TOKENS

    @property
    def family(self) -> str:
        """The profile's tokenizer family for the estimator (B13)."""
        return getattr(self.profile, "tokenizer_family", "cl100k")

    def fingerprint(self, messages: list[Message]) -> str:
        """Fingerprint of the priced prefix (system + tools + ``messages``); equal to
        agents.context.tokens.prefix_fingerprint, computed incrementally."""
        if self._fingerprinter is None:
            self._fingerprinter = PrefixFingerprinter(system=self.system, tools=self.tools)
        return self._fingerprinter.fingerprint(messages)

    def estimate(self, messages: list[Message], *, tools: bool = True) -> int:
        """Rough prompt tokens of the request the transport would send: the exact wire JSON
        of system + tools (measured once per pipeline) plus each message as the transport
        renders it (measured once per message; merged wire messages differ only by a few
        envelope characters). Cache markers are never counted (tokens.SKIPPED_KEYS)."""
        key = ("head", tools)
        if key not in self._weights:
            empty = ModelRequest(model=self.model, system=self.system, messages=(),
                                 tools=self.tools if tools else (), stable_len=self.stable_len)
            self._weights[key] = estimate_payload_tokens(self.transport.build_payload(empty),
                                                         self.family)
        keep = common_prefix(messages, self._summed)
        if keep < len(self._summed) and keep < len(messages):  # diverged: drop the rest
            del self._summed[keep:]
            del self._sums[keep + 1:]
        for message in messages[len(self._summed):]:
            # By value: a reloaded or re-repaired copy of a message weighs what it did.
            weight = self._weights.get(message)
            if weight is None:
                alone = ModelRequest(model=self.model, system="", messages=(message,))
                body = self.transport.build_payload(alone)
                weight = estimate_payload_tokens({"messages": body.get("messages", [])},
                                                 self.family)
                self._weights[message] = weight
            self._summed.append(message)
            self._sums.append(self._sums[-1] + weight)
        return self._weights[key] + self._sums[len(messages)]

    def _repair(self, history: list[Message]) -> Repair:
        """validate_and_repair, incrementally: when ``history`` is the legal history this
        pipeline returned last time plus appended messages, only the appended span (from the
        last user message on) is validated; any problem there, or a tool call id the prefix
        already used, falls back to the full validation (the only source of repairs)."""
        previous = self._legal
        n = len(previous)
        if n and len(history) >= n and common_prefix(history, previous) == n:
            start = next((i for i in range(n - 1, -1, -1) if previous[i].role == "user"), None)
            if start is not None:
                span = history[start:]
                ids = {c.id for m in span for c in m.tool_calls}
                if not ids & self._prefix_call_ids(start):
                    local = validate_and_repair(span, started_call_ids=self.started_call_ids)
                    if not local.problems and len(local.messages) == len(span) and all(
                            a is b or a == replace(b, reasoning=None)
                            for a, b in zip(local.messages, span)):
                        # Same messages (reasoning dropped: never replayed).
                        self._legal = history[:start] + list(local.messages)
                        return Repair(messages=tuple(self._legal), added=(), problems=())
        repair = validate_and_repair(history, started_call_ids=self.started_call_ids)
        self._legal = list(repair.messages)
        self._call_ids = None
        return repair

    def _prefix_call_ids(self, end: int) -> set[str]:
        # Extended, not rebuilt, when the prefix grew: _legal[:old end] is unchanged while
        # _call_ids stands (a full repair, which may change it, resets _call_ids).
        if self._call_ids is None or self._call_ids[0] > end:
            self._call_ids = (0, set())
        done, ids = self._call_ids
        ids.update(c.id for m in self._legal[done:end] for c in m.tool_calls)
        self._call_ids = (end, ids)
        return ids
