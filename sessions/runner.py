"""The composition root: wires agents/ to the database for one turn.

``turn_execute`` is called by the Celery task (sessions/tasks.py) while it holds the lineage
turn lease. It builds the harness from settings (provider profile, transport), the session
row (stored prompt, tool snapshot, durable breaker and calibration state) and the approval
state (approvals/services.py), runs agents.loop.run_turn with a DbSink, and records how the
turn ended. No harness decision is made here: this module only fetches, builds and stores.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.budget import IterationBudget
from agents.cache import CacheSettings
from agents.errors import ApprovalRequired, LeaseLost, TransportError, TurnCancelled
from agents.identity import bind_identity
from agents.loop import Harness, run_turn
from agents.messages import Message as AgentMessage
from agents.messages import ModelRequest, ModelResponse, ToolCall
from agents.prompt import build_system_prompt, recover_stable_len
from agents.providers import ProviderProfile, resolve_profile
from agents.request import RequestPipeline
from agents.tokens import Calibrator
from agents.tools.dispatch import dispatch_tool_calls
from agents.tools.spill import apply_spill
from agents.transports import get_transport
from sessions import toolbox
from sessions.events import event_append
from sessions.leases import lease_renew, lease_validate
from sessions.models import Session, Turn
from sessions.services import workspace_path
from sessions.sink import DbSink
from sessions.transcript import history_load, message_to_agent

log = logging.getLogger("hermes.runner")


def provider_profile(session: Session) -> ProviderProfile:
    """The session's provider profile with the configured overrides (base URL, window)."""
    hermes = settings.HERMES
    base_url = None
    if session.provider.startswith("simulator"):
        base_url = hermes["SIMULATOR_URL"] + ("/v1" if session.provider.endswith("openai") else "")
    else:
        profile = resolve_profile(session.provider)
        key = "anthropic" if profile.transport == "anthropic_messages" else "openai"
        base_url = hermes["BASE_URLS"].get(key) or None
    return resolve_profile(session.provider, base_url=base_url, model=session.model,
                           context_window=hermes["CONTEXT_WINDOW"])


def provider_transport(profile: ProviderProfile, model: str):
    """The transport for ``profile``; the key value comes from settings (never os.environ).
    One per (profile, model, key) per process: an SDK client holds a connection pool and an
    SSL context that cost more to build than a whole iteration of the harness."""
    api_key = settings.HERMES["API_KEYS"].get(profile.key_env or "", "") or None
    if api_key is None and profile.name.startswith("simulator"):
        api_key = "simulator"
    return _transport(profile, model, api_key, settings.HERMES["RETRY_BASE_DELAY"])


@lru_cache(maxsize=16)
def _transport(profile: ProviderProfile, model: str, api_key: str | None, base_delay: float):
    from agents.transports.retry import RetryPolicy

    return get_transport(profile, api_key=api_key, model=model,
                         retry=RetryPolicy(base_delay=base_delay))


@dataclass
class BoundSession:
    """What a worker keeps of a session between its turns: the request pipeline (with its
    memos) and the live transcript as the last turn left it. Valid only while the row's
    transcript_version and system prompt are unchanged and the live rows are exactly these
    plus appended ones (sessions/runner.py::_history_for checks all three)."""

    pipeline: RequestPipeline
    history: tuple[AgentMessage, ...]
    version: int
    system_prompt: str


BOUND_SESSIONS_MAX = 32
_bound: OrderedDict[int, BoundSession] = OrderedDict()
_bound_lock = threading.Lock()


def _bound_take(session_id: int) -> BoundSession | None:
    with _bound_lock:
        return _bound.pop(session_id, None)


def _bound_keep(session_id: int, entry: BoundSession) -> None:
    with _bound_lock:
        _bound[session_id] = entry
        while len(_bound) > BOUND_SESSIONS_MAX:
            _bound.popitem(last=False)


@dataclass
class TurnContext:
    """Everything one turn of one session needs, built lazily from rows and settings."""

    session: Session
    turn: Turn
    owner: str
    idle_seconds: float = 0.0
    first_request: bool = True
    loaded: list | None = None
    """The live history as loaded at the start of the turn (reused, not re-read)."""
    bound: BoundSession | None = None
    """This worker's copy from the session's previous turn, when still valid."""

    @cached_property
    def profile(self) -> ProviderProfile:
        return provider_profile(self.session)

    @cached_property
    def transport(self):
        return provider_transport(self.profile, self.session.model)

    @cached_property
    def workspace(self) -> Path:
        return workspace_path(self.session).resolve()

    @cached_property
    def home(self) -> Path:
        return Path(settings.HERMES["HOME"])

    def ensure_prompt(self) -> None:
        """Pin the tool snapshot and build the system prompt once (stored byte-exact)."""
        session = self.session
        if session.tool_names and session.system_prompt:
            return
        names = session.tool_names or list(toolbox.tool_names_for(session))
        prompt = build_system_prompt(
            home=self.home, tool_names=names, model=session.model, provider=session.provider,
            workspace=self.workspace, caller_context="",
            skills_index=toolbox.skills_index_for(session, self.workspace), memory="",
            user_profile="", session_id=str(session.pk), started_at=session.started_at.date())
        Session.objects.filter(pk=session.pk).update(tool_names=names, system_prompt=prompt.text)
        session.tool_names, session.system_prompt = names, prompt.text

    @cached_property
    def pipeline(self) -> RequestPipeline:
        self.ensure_prompt()
        session = self.session
        if self.bound is not None and self.bound.system_prompt == session.system_prompt:
            return self.bound.pipeline
        stable_len = recover_stable_len(session.system_prompt, home=self.home,
                                        tool_names=session.tool_names, model=session.model,
                                        provider=session.provider)
        return RequestPipeline(
            transport=self.transport, model=session.model, system=session.system_prompt,
            stable_len=stable_len, tools=toolbox.registry_for(session).specs(session.tool_names),
            profile=self.profile, calibrator=self.calibrator_restore(stable_len),
            cache=CacheSettings(ttl=settings.HERMES["CACHE_TTL"],
                                prompt_ttl=settings.HERMES["CACHE_PROMPT_TTL"] or None),
            max_tokens=min(settings.HERMES["MAX_OUTPUT_TOKENS"], self.profile.max_output_tokens),
            context_window=self.profile.context_window)

    def rebuild_after_compaction(self) -> None:
        """A compaction is the one moment the prefix may change: rebuild the system prompt
        (issue 4) and start calibration afresh."""
        Session.objects.filter(pk=self.session.pk).update(system_prompt="")
        self.session.system_prompt = ""
        self.bound = None  # the previous turn's pipeline describes the old prefix
        old = self.__dict__.pop("pipeline", None)
        if old is not None:  # what the provider told us about sizes still holds
            self.pipeline.input_hint, self.pipeline.last_billed = old.input_hint, old.last_billed

    def calibrator_restore(self, stable_len: int | None) -> Calibrator:
        """The session's calibration anchor, kept only if the priced prefix it describes is
        still the live prefix (fingerprints match; issue 4 item 1)."""
        from agents.tokens import prefix_fingerprint

        session = self.session
        tools = toolbox.registry_for(session).specs(session.tool_names)
        live = self.loaded if self.loaded is not None else history_load(session=session)
        return Calibrator.from_dict(
            session.usage_anchor, threshold=self.threshold,
            current_fingerprint=lambda n: prefix_fingerprint(
                system=session.system_prompt, tools=tools, messages=live[:n]))

    @cached_property
    def breaker(self):
        from sessions.context import breaker_load

        return breaker_load(self.session)

    @cached_property
    def threshold(self) -> int:
        from agents.compaction import compaction_threshold

        return compaction_threshold(self.profile.context_window)


def turn_execute(*, session: Session, turn: Turn, owner: str) -> str:
    """Run (or resume) ``turn``; returns its final status. Caller holds the turn lease."""
    ctx = TurnContext(session=session, turn=turn, owner=owner)
    sink = DbSink(session=session, turn=turn, owner=owner)
    with bind_identity(session_id=str(session.pk), user_id=str(session.owner_id)):
        try:
            if turn.kind in ("compact", "prune"):
                return _reduce_by_hand(ctx, sink)
            history = _begin(ctx, sink)
            harness = Harness(
                transport=ctx.transport, prepare=lambda h: _prepare(ctx, sink, h),
                execute=lambda calls: _execute(ctx, sink, calls),
                observe=lambda req, resp: _observe(ctx, req, resp),
                recover=lambda h, exc: _recover(ctx, sink, h, exc))
            result = run_turn(history, harness=harness, sink=sink,
                              budget=IterationBudget(settings.HERMES["MAX_ITERATIONS"]))
        except ApprovalRequired as exc:
            return _await_approval(ctx, sink, exc)
        except TurnCancelled:
            return _finish(ctx, sink, Turn.Status.CANCELLED, "turn.cancelled", {})
        except LeaseLost:
            log.warning("turn %s lost its lease; stopping without further writes", turn.pk)
            return "lease_lost"
        except TransportError as exc:
            return _finish(ctx, sink, Turn.Status.FAILED, "turn.failed",
                           {"reason": _readable(exc)}, error=str(exc))
        except Exception as exc:  # a bug: record it for the user, keep the trace in the log
            log.exception("turn %s failed", turn.pk)
            return _finish(ctx, sink, Turn.Status.FAILED, "turn.failed",
                           {"reason": f"Internal error ({type(exc).__name__}); the message "
                                      "was kept and you can retry."}, error=repr(exc))
    if settings.HERMES["MICRO_COMPACTION"]:
        from sessions.context import session_micro_compact

        try:
            session_micro_compact(ctx=ctx, sink=sink)
        except LeaseLost:
            return "lease_lost"
    _bind(ctx, result.history)
    return _finish(ctx, sink, Turn.Status.COMPLETED, "turn.finished",
                   {"text": result.text[:2000], "status": result.status,
                    "iterations": result.iterations})


def _reduce_by_hand(ctx: TurnContext, sink: DbSink) -> str:
    """`/compact` or `/prune` typed in the chat: run it now, whatever the gates say (the
    breaker still records the outcome)."""
    from sessions.context import session_compact, session_prune

    Turn.objects.filter(pk=ctx.turn.pk).update(status=Turn.Status.RUNNING,
                                               started_at=timezone.now())
    event_append(session_id=ctx.session.pk, type="turn.started",
                 payload={"turn_id": ctx.turn.pk, "command": ctx.turn.kind})
    history = history_load(session=ctx.session)
    if ctx.turn.kind == "compact":
        done = session_compact(ctx=ctx, sink=sink, history=history, forced=True, reason="manual")
    else:
        prepared = ctx.pipeline.prepare(history)
        done = session_prune(ctx=ctx, history=prepared.history,
                             projected=prepared.projected_tokens, forced=True)
    text = (f"/{ctx.turn.kind} done." if done is not None
            else f"/{ctx.turn.kind}: nothing to reduce.")
    return _finish(ctx, sink, Turn.Status.COMPLETED, "turn.finished",
                   {"text": text, "status": "completed", "iterations": 0})


def _begin(ctx: TurnContext, sink: DbSink) -> list[AgentMessage]:
    """Mark the turn running and, for a new turn, store its user message."""
    turn = ctx.turn
    from sessions.models import Message

    last = Message.objects.filter(session=ctx.session).order_by("-id").first()
    ctx.idle_seconds = (timezone.now() - last.created_at).total_seconds() if last else 0.0
    with transaction.atomic():
        lease_validate(session=ctx.session, owner=ctx.owner)
        resumed = turn.status == Turn.Status.AWAITING_APPROVAL
        Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING,
                                               started_at=turn.started_at or timezone.now())
        turn.status = Turn.Status.RUNNING
        event_append(session_id=ctx.session.pk, type="turn.started",
                     payload={"turn_id": turn.pk, "resumed": resumed})
        if not resumed:
            user_message = toolbox.user_message_for(ctx.session, turn, ctx.workspace)
            stored = sink.message_added(user_message)
            Turn.objects.filter(pk=turn.pk).update(user_message_id=stored.id)
    ctx.loaded = _history_for(ctx)
    return ctx.loaded


def _history_for(ctx: TurnContext) -> list[AgentMessage]:
    """The live history: this worker's copy from the previous turn plus the rows appended
    since (one small query), or a full load when the copy is missing or stale."""
    from sessions.models import Message

    bound = _bound_take(ctx.session.pk)
    if bound is not None:
        version = Session.objects.filter(pk=ctx.session.pk).values_list(
            "transcript_version", flat=True).first()
        last_id = max((m.id for m in bound.history if m.id is not None), default=0)
        live = Message.objects.filter(session=ctx.session, active=True)
        if version == bound.version:
            new = [message_to_agent(r) for r in live.filter(id__gt=last_id).order_by("id")]
            if live.count() == len(bound.history) + len(new):
                ctx.bound = bound
                return [*bound.history, *new]
    return history_load(session=ctx.session)


def _bind(ctx: TurnContext, history: tuple[AgentMessage, ...]) -> None:
    """Keep the pipeline and the final history for this session's next turn here."""
    pipeline = ctx.__dict__.get("pipeline")
    if pipeline is None or not history or any(m.id is None for m in history):
        return
    version = Session.objects.filter(pk=ctx.session.pk).values_list(
        "transcript_version", flat=True).first()
    _bound_keep(ctx.session.pk, BoundSession(pipeline=pipeline, history=history,
                                             version=version,
                                             system_prompt=ctx.session.system_prompt))


def _prepare(ctx: TurnContext, sink: DbSink, history: list[AgentMessage]):
    """Repair, reduce when a gate says so, plan. Reductions run only here, at an iteration
    boundary, after every result of the previous batch is stored."""
    from sessions.context import cold_resume, session_compact, session_prune

    lease_renew(session=ctx.session, owner=ctx.owner, seconds=settings.HERMES["LEASE_SECONDS"])
    prepared = ctx.pipeline.prepare(history)
    reduced = None
    idle_compaction = settings.HERMES["IDLE_COMPACTION_SECONDS"]
    if ctx.first_request and 0 < idle_compaction <= ctx.idle_seconds:
        # Idle compaction on resume (hermes' opt-in): the prefix is cold anyway.
        reduced = session_compact(ctx=ctx, sink=sink, history=prepared.history, forced=False,
                                  reason="idle")
    if (reduced is None and ctx.first_request
            and cold_resume(ctx.session, idle_seconds=ctx.idle_seconds)):
        reduced = session_prune(ctx=ctx, history=prepared.history,
                                projected=prepared.projected_tokens, cold=True)
    elif settings.HERMES["PRUNE_TRIGGER_TOKENS"] > 0:
        reduced = session_prune(ctx=ctx, history=prepared.history,
                                projected=prepared.projected_tokens)
    if (reduced is None and settings.HERMES["COMPACTION_ENABLED"]
            and ctx.pipeline.calibrator.should_compact(prepared.rough_tokens)):
        reduced = session_compact(ctx=ctx, sink=sink, history=prepared.history, forced=False,
                                  reason="threshold")
    if reduced is not None:
        prepared = ctx.pipeline.prepare(reduced)
    ctx.first_request = False
    for added in prepared.added:  # stored, so the next request is identical (history.py)
        sink.message_added(added)
    sink.estimate = prepared.rough_tokens
    return prepared.history, prepared.request


def _execute(ctx: TurnContext, sink: DbSink, calls: list[ToolCall]):
    from approvals.services import gate_state

    state = gate_state(session=ctx.session, turn=ctx.turn)
    tool_ctx = toolbox.tool_context(ctx, should_stop=sink.should_stop)
    outcome = dispatch_tool_calls(
        calls, registry=toolbox.registry_for(ctx.session), ctx=tool_ctx,
        gate=toolbox.policy_gate(ctx, state), should_stop=sink.should_stop)
    sink.tool_meta.update({call_id: dict(output.metadata)
                           for call_id, output in outcome.outputs.items() if output.metadata})
    results = apply_spill(list(outcome.results), tool_ctx)
    return results, list(outcome.pending)


def _observe(ctx: TurnContext, request: ModelRequest, response: ModelResponse) -> None:
    """Where the billed count arrives: re-anchor calibration, judge the compaction verdict,
    track cache health; all persisted on the row."""
    from sessions.context import breaker_fields

    billed = response.usage.prompt_tokens if response.usage else None
    calibrator = ctx.pipeline.calibrator
    calibrator.after_response(billed)
    ctx.pipeline.note_billed(billed)
    ctx.breaker.on_response(billed, ctx.threshold)
    # One UPDATE for everything a response changes on the row (it runs every iteration).
    Session.objects.filter(pk=ctx.session.pk).update(
        usage_anchor=calibrator.to_dict(), **breaker_fields(ctx.session, ctx.breaker),
        **toolbox.cache_health_fields(ctx, response.usage))


def _recover(ctx: TurnContext, sink: DbSink, history: list[AgentMessage],
             exc: TransportError):
    """A provider overflow compacts and retries (backstop 2); a 400 about history shape is
    repaired by a forced compaction (never the same payload again). Else None: fail."""
    from agents.history import is_history_shape_error
    from agents.tokens import is_context_overflow
    from sessions.context import session_compact

    ctx.pipeline.calibrator.after_error()
    classified = exc.classified
    overflow = bool(getattr(classified, "compress", False)) or is_context_overflow(str(exc))
    shape = bool(getattr(classified, "history_shape", False)) or is_history_shape_error(str(exc))
    if not (overflow or shape):
        return None
    if overflow and ctx.pipeline.note_overflow(str(exc)):
        # Output budget too big for what is left: resend sized by the provider's own count
        # before paying for a compaction.
        compacted = session_compact(ctx=ctx, sink=sink, history=history, forced=True,
                                    reason="overflow")
        return compacted if compacted is not None else history
    return session_compact(ctx=ctx, sink=sink, history=history, forced=True,
                           reason="overflow" if overflow else "history_shape")


def _await_approval(ctx: TurnContext, sink: DbSink, exc: ApprovalRequired) -> str:
    from approvals.services import approval_request_create

    sink.flush()
    with transaction.atomic():
        lease_validate(session=ctx.session, owner=ctx.owner)
        rows = approval_request_create(session=ctx.session, turn=ctx.turn,
                                       pending=list(exc.pending), workspace=str(ctx.workspace))
        Turn.objects.filter(pk=ctx.turn.pk).update(status=Turn.Status.AWAITING_APPROVAL)
        event_append(session_id=ctx.session.pk, type="turn.awaiting_approval",
                     payload={"turn_id": ctx.turn.pk, "approvals": [r.pk for r in rows]})
    return Turn.Status.AWAITING_APPROVAL


def _finish(ctx: TurnContext, sink: DbSink, status: str, event: str, payload: dict,
            error: str = "") -> str:
    """Record how the turn ended (its own transaction; the lease is not required so a
    failure is always reported) and announce it with the turn's usage totals."""
    try:
        sink.flush()
    except Exception:
        log.exception("flushing text of turn %s failed", ctx.turn.pk)
    with transaction.atomic():
        Turn.objects.filter(pk=ctx.turn.pk).update(status=status, error=error[:5000],
                                                   finished_at=timezone.now())
        Session.objects.filter(pk=ctx.session.pk).update(stop_requested=False)
        event_append(session_id=ctx.session.pk, type=event,
                     payload={"turn_id": ctx.turn.pk, "usage": sink.usage_total, **payload})
    return status


def _readable(exc: TransportError) -> str:
    """A provider failure as one sentence a person can act on (no stack trace)."""
    classified = exc.classified
    reason = getattr(getattr(classified, "reason", None), "value", None) or "provider_error"
    return f"The model provider failed ({reason}): {str(exc)[:300]}"
