"""The composition root: wires agents/ to the database for one turn.

``turn_execute`` is called by the Celery task (sessions/tasks.py) while it holds the lineage
turn lease. It builds the harness from settings (provider profile, transport), the session
row (stored prompt, tool snapshot, durable breaker and calibration state) and the approval
state (approvals/services.py), runs agents.loop.run_turn with a DbSink, and records how the
turn ended. No harness decision is made here: this module only fetches, builds and stores.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from agents.budget import IterationBudget
from agents.cache import CacheSettings
from agents.errors import (ApprovalRequired, DelegationRequested, LeaseLost, TransportError,
                           TurnCancelled)
from agents.identity import bind_identity
from agents.loop import Harness, run_turn
from agents.messages import Message as AgentMessage
from agents.messages import ModelRequest, ModelResponse, ToolCall, common_prefix
from agents.prompt import build_system_prompt, recover_stable_len
from agents.providers import ProviderProfile, model_output_cap, resolve_profile
from agents.context.history import CallTally
from agents.context.reduction import ReductionState, recovery_plan, reduction_plan
from agents.recovery import INCOMPLETE_KIND
from agents.request import RequestPipeline
from agents.session_cache import BoundSession, SessionCache, entry_bytes
from agents.spend_caps import BudgetExceeded
from agents.context.tokens import Calibrator, estimate_text_tokens
from agents.tools.clarify import CLARIFY_RULE
from agents.tools.delegate import DELEGATE_TOOL
from agents.tools.dispatch import dispatch_tool_calls
from agents.tools.ledger import split_by_ledger
from agents.tools.spill import apply_spill
from agents.transports import get_transport
from agents.transports.anthropic_wire import render_cache_put, render_cache_take
from agents.transports.errors import QUOTA_ADVICE
from agents.transports.patience import Patience, PatientTransport, routes_resting
from agents.transports.retry import RetryPolicy
from sessions import delegation, toolbox
from sessions.clarify import clarify_answers, clarify_question_create
from sessions.context import (CACHE_TTL_SECONDS, breaker_fields, breaker_load, cache_settings,
                              cache_strategy, cache_strategy_store, session_compact,
                              session_micro_compact, session_prune)
from sessions.events import event_append
from sessions.hooks import APPROVALS, MONEY
from sessions.inputs import prompt_session_label
from sessions.leases import lease_held_by_other, lease_renew, lease_validate
from sessions.models import Session, Turn
from sessions.services import workspace_path
from sessions.sink import DbSink, ledger_for, started_call_ids, turn_usage_totals
from sessions.transcript import history_load, message_to_agent
from sessions.waits import WAITING_STATUSES, turn_ended, turn_ended_hooked
from sessions.writes import StartFacts, TurnStart, turn_finish_write

log = logging.getLogger("hermes.runner")


def provider_profile(session: Session) -> ProviderProfile:
    """The session's provider profile with the configured overrides (base URL, window)."""
    return profile_named(session.provider, session.model)


def profile_named(name: str, model: str | None) -> ProviderProfile:
    """Profile ``name`` with the configured overrides (base URL, window, ``model``)."""
    hermes = settings.HERMES
    base_url = None
    if name.startswith("simulator"):
        openai_wire = resolve_profile(name).transport == "openai_chat"
        base_url = hermes["SIMULATOR_URL"] + ("/v1" if openai_wire else "")
    else:
        profile = resolve_profile(name)
        key = "anthropic" if profile.transport == "anthropic_messages" else "openai"
        base_url = hermes["BASE_URLS"].get(key) or None
    return resolve_profile(name, base_url=base_url, model=model or None,
                           context_window=hermes["CONTEXT_WINDOW"])


def provider_keys(profile: ProviderProfile) -> list[tuple[str, str | None]]:
    """(label, key) pairs for ``profile``: its pool (HERMES_API_KEYS_<NAME>) when set, else
    the one key from its ``key_env`` labelled with that variable's name. Values come from
    settings (never os.environ); labels are what users see."""
    pool = settings.HERMES["KEY_POOLS"].get(profile.name)
    if pool:
        return [(label, key or None) for label, key in pool]
    api_key = settings.HERMES["API_KEYS"].get(profile.key_env or "", "") or None
    if api_key is None and profile.name.startswith("simulator"):
        api_key = "simulator"
    return [(profile.key_env or "", api_key)]


def provider_routes(session: Session, primary: ProviderProfile):
    """The session's provider and model first (each of its keys), then every configured
    fallback (HERMES_FALLBACK_PROVIDERS, each of its keys)."""
    from agents.transports.failover import Route

    chain = [(primary, session.model or primary.default_model)]
    for name, model in settings.HERMES["FALLBACK_PROVIDERS"]:
        profile = profile_named(name, model or None)
        chain.append((profile, model or profile.default_model))
    routes = []
    for profile, model in chain:
        for label, key in provider_keys(profile):
            routes.append(Route(provider=profile.name, model=model, credential=label,
                                transport=provider_transport(profile, model, key)))
    return routes


def provider_transport(profile: ProviderProfile, model: str, api_key: str | None = None):
    """The transport for ``profile`` and one key. One per (profile, model, key) per
    process: an SDK client holds a connection pool and an SSL context that cost more to
    build than a whole iteration of the harness."""
    if api_key is None:
        api_key = provider_keys(profile)[0][1]
    hermes = settings.HERMES
    return _transport(profile, model, api_key, hermes["RETRY_BASE_DELAY"],
                      hermes["MAX_RETRY_AFTER"],
                      hermes["BREAKPOINT_LIMITS"].get(profile.base_url))


@lru_cache(maxsize=32)
def _transport(profile: ProviderProfile, model: str, api_key: str | None, base_delay: float,
               max_retry_after: float, breakpoint_limit: int | None):
    from sessions.provider_state import BREAKPOINT_LIMITS

    options = {}
    if profile.transport == "anthropic_messages":
        options = {"breakpoint_store": BREAKPOINT_LIMITS, "breakpoint_limit": breakpoint_limit}
    return get_transport(profile, api_key=api_key, model=model,
                         retry=RetryPolicy(base_delay=base_delay,
                                           max_retry_after=max_retry_after), **options)


BOUND = SessionCache()
"""This worker process's kept sessions (agents/session_cache.py), bounded by
HERMES["BOUND_SESSIONS_MAX"] entries and HERMES["BOUND_SESSIONS_BYTES"] estimated bytes."""


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
    compactions: int = 0
    """Compactions committed in this turn: automatic ones run at most once per turn (B10)."""
    breaker_noticed: bool = False
    """The "breaker tripped" notice was already shown in this turn (B10)."""
    last_compaction: dict | None = None
    """{"kind", "error"} of the last compaction committed in this turn (defect 7)."""
    budget: IterationBudget | None = None
    """This run's iteration budget: what it charged is added to Turn.iterations."""
    resumed: bool = True
    """The run continues a turn that started before (set by _begin; unknown → True)."""
    gate: object | None = None
    """The GateState of this run's previous tool batch: its decisions are reused (they only
    change while the turn waits, between runs; approvals/services.py gate_state)."""
    finished_version: int | None = None
    """The session's transcript_version as the statement that ended the turn read it."""
    seen_call_ids: frozenset[str] | None = None
    """Every call id of the history this run started from (None: unknown, so every call
    is looked up in the ledger)."""
    call_tally: CallTally | None = None
    """The call ids of ``loaded`` (set by _begin), kept with the session for its next turn."""

    @cached_property
    def profile(self) -> ProviderProfile:
        return provider_profile(self.session)

    @cached_property
    def registry(self):
        """The session's tools for this run (its pinned snapshot; the schema never changes
        mid-turn, sessions/toolbox.py::tool_schema_rebuild), loaded once per run: it was one
        query per tool batch and per prompt build."""
        return toolbox.registry_for(self.session)

    @cached_property
    def clarify_answers(self) -> dict[str, str]:
        """{tool_call_id: answer} of this turn's answered questions, read once per run: an
        answer can only arrive while the turn waits AWAITING_ANSWER, that is between runs
        (the run that asked has ended), so it cannot change during this one. A turn that
        was not resumed has asked nothing yet: no query."""
        return clarify_answers(turn=self.turn) if self.resumed else {}

    @cached_property
    def transport(self):
        """The session's provider with its keys and fallbacks (FailoverTransport; cooldowns
        in the database, every failover announced as an event) behind the spend caps."""
        from agents.transports.failover import FailoverTransport
        from sessions.provider_state import COOLDOWNS

        failover = FailoverTransport(provider_routes(self.session, self.profile),
                                     store=COOLDOWNS, notice=self.failover_notice)
        # Every route throttled: wait it out (backoff, shared cooldowns, Retry-After).
        primary = failover.routes[0].label()
        patient = PatientTransport(
            failover, resting=routes_resting(failover),
            patience=Patience(total=settings.HERMES["THROTTLE_PATIENCE"],
                              max_hint=settings.HERMES["MAX_RETRY_AFTER"]),
            notice=lambda seconds, hint, attempts: self.throttle_notice(
                primary, seconds, hint, attempts))
        # Every provider call of the turn (loop, finalizer, summaries) passes the spend caps.
        return MONEY.budgeted(patient, session=self.session, on_warning=lambda text: (
            event_append(session_id=self.session.pk, type="budget.warning",
                         payload={"turn_id": self.turn.pk, "reason": text})))

    def failover_notice(self, failed, following, hint) -> None:
        """A route failed: tell the user which provider and key (label only) failed, why,
        and what is tried next."""
        nxt = f"; trying {following.label()}" if following is not None else ""
        event_append(session_id=self.session.pk, type="provider.failover", payload={
            "turn_id": self.turn.pk, "failed": failed.label(), "reason": hint.reason.value,
            "next": following.label() if following is not None else None,
            "text": f"{failed.label()} failed ({hint.reason.value}){nxt}."})

    def throttle_notice(self, label: str, seconds: float, hint, attempts: int) -> None:
        """Every route is throttled: tell the user the turn waits, how long, and for whom
        (``label``: the primary route, by key label)."""
        event_append(session_id=self.session.pk, type="provider.failover", payload={
            "turn_id": self.turn.pk, "failed": label, "reason": hint.reason.value,
            "next": label, "wait_seconds": round(seconds, 1), "attempts": attempts,
            "text": f"{label} is throttling ({hint.reason.value}); waiting "
                    f"{seconds:.0f} s before trying again."})

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
            skills_index=toolbox.skills_index_for(session, self.workspace),
            memory=toolbox.memory_for(session),
            user_profile="", session_id=prompt_session_label(session),
            started_at=session.started_at.date())
        Session.objects.filter(pk=session.pk).update(tool_names=names, system_prompt=prompt.text)
        session.tool_names, session.system_prompt = names, prompt.text
        self.__dict__.pop("registry", None)  # built from the names just pinned

    @cached_property
    def pipeline(self) -> RequestPipeline:
        self.ensure_prompt()
        session = self.session
        tools = self.registry.specs(session.tool_names)
        if (self.bound is not None and self.bound.system_prompt == session.system_prompt
                and self.bound.pipeline.tools == tools):  # a rebuild may keep the prompt
            return self.bound.pipeline
        stable_len = recover_stable_len(session.system_prompt, home=self.home,
                                        tool_names=session.tool_names, model=session.model,
                                        provider=session.provider)
        return RequestPipeline(
            transport=self.transport, model=session.model, system=session.system_prompt,
            stable_len=stable_len, tools=tools,
            profile=self.profile, calibrator=self.calibrator_restore(stable_len),
            # Replaced before each turn's first request by its cache strategy (_prepare).
            cache=CacheSettings(),
            max_tokens=min(settings.HERMES["MAX_OUTPUT_TOKENS"],
                           model_output_cap(self.profile, session.model)),
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
        from agents.context.tokens import prefix_fingerprint

        session = self.session
        tools = self.registry.specs(session.tool_names)
        live = self.loaded if self.loaded is not None else history_load(session=session)
        return Calibrator.from_dict(
            session.usage_anchor, threshold=self.threshold,
            current_fingerprint=lambda n: prefix_fingerprint(
                system=session.system_prompt, tools=tools, messages=live[:n]))

    @cached_property
    def breaker(self):
        return breaker_load(self.session)

    @cached_property
    def threshold(self) -> int:
        from agents.context.compaction import compaction_threshold

        return compaction_threshold(self.profile.context_window)


def turn_execute(*, session: Session, turn: Turn, owner: str) -> str:
    """Run (or resume) ``turn``; returns its final status. Caller holds the turn lease."""
    ctx = TurnContext(session=session, turn=turn, owner=owner)
    sink = DbSink(session=session, turn=turn, owner=owner,
                  lease_seconds=settings.HERMES["LEASE_SECONDS"])
    with bind_identity(session_id=str(session.pk), user_id=str(session.owner_id)):
        try:
            if turn.kind in ("compact", "prune"):
                return _reduce_by_hand(ctx, sink)
            if turn.status == Turn.Status.QUEUED and turn.user_message_id is None:
                # Between turns, never mid-turn: the one place availability reaches the
                # schema (a resumed or redelivered turn keeps the tools it started with).
                toolbox.tool_schema_refresh(session)
            history = _begin(ctx, sink)
            answered = _answer_already_stored(ctx, history)
            if answered is not None:  # the worker died after the reply, before the end
                return _finish(ctx, sink, Turn.Status.COMPLETED, "turn.finished",
                               {"text": answered.content[:2000], "status": "completed",
                                "iterations": 0})
            harness = Harness(
                transport=ctx.transport, prepare=lambda h: _prepare(ctx, sink, h),
                execute=lambda calls: _execute(ctx, sink, calls),
                observe=lambda req, resp: _observe(ctx, sink, req, resp),
                recover=lambda h, exc: _recover(ctx, sink, h, exc))
            # A resumed turn continues its budget (what earlier runs charged is stored).
            # (The row as turn_next read it under this lease: only the holder changes it.)
            spent = ctx.turn.iterations or 0
            ctx.budget = IterationBudget(delegation.child_iterations(session) if session.parent_id
                                         else settings.HERMES["MAX_ITERATIONS"],
                                         spent_before=spent)
            result = run_turn(history, harness=harness, sink=sink, budget=ctx.budget)
        except ApprovalRequired as exc:
            return _await_approval(ctx, sink, exc)
        except DelegationRequested as exc:
            return _await_children(ctx, sink, exc)
        except TurnCancelled:
            return _finish(ctx, sink, Turn.Status.CANCELLED, "turn.cancelled", {})
        except BudgetExceeded as exc:  # everything done so far is stored; resumable
            return _finish(ctx, sink, Turn.Status.BUDGET_BLOCKED, "budget.exceeded",
                           {"reason": exc.reason, "resumable": True}, error=exc.reason)
        except LeaseLost:
            log.warning("turn %s lost its lease; stopping without further writes", turn.pk)
            return "lease_lost"
        except TransportError as exc:
            # The loop kept a failed call's text and billed attempts where it failed; the
            # finalizer's call it does not catch: kept here (once: TransportError.kept).
            sink.reply_failed(exc, kind=INCOMPLETE_KIND,
                              request=ModelRequest(model=session.model, system="", messages=()))
            return _finish(ctx, sink, Turn.Status.FAILED, "turn.failed",
                           {"reason": _readable(exc),
                            "interrupted_tool": exc.interrupted_call,
                            "partial_kept": bool(exc.partial)},
                           error=str(exc))
        except (OperationalError, InterfaceError):
            raise  # the connection died, not a bug in the turn: the task resumes the turn
        except Exception as exc:  # a bug: record it for the user, keep the trace in the log
            log.exception("turn %s failed", turn.pk)
            return _finish(ctx, sink, Turn.Status.FAILED, "turn.failed",
                           {"reason": f"Internal error ({type(exc).__name__}); the message "
                                      "was kept and you can retry."}, error=repr(exc))
    if settings.HERMES["MICRO_COMPACTION"]:
        try:
            session_micro_compact(ctx=ctx, sink=sink)
        except LeaseLost:
            return "lease_lost"
    status = _finish(ctx, sink, Turn.Status.COMPLETED, "turn.finished",
                     {"text": result.text[:2000], "status": result.status,
                      "iterations": result.iterations, "free_iterations": result.free})
    if status == Turn.Status.COMPLETED:  # still under our lease: no other turn ran since
        _bind(ctx, result.history)
    return status


def _reduce_by_hand(ctx: TurnContext, sink: DbSink) -> str:
    """`/compact` or `/prune` typed in the chat: run it now, whatever the gates say (the
    breaker still records the outcome)."""
    with transaction.atomic():
        lease_validate(session=ctx.session, owner=ctx.owner)
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
    outcome = ctx.last_compaction or {}
    if done is not None and outcome.get("kind") == "fallback":  # say what really happened
        text = (f"/compact: the summariser failed ({outcome.get('error') or 'unavailable'}); "
                "older messages were replaced by a deterministic note instead of a summary.")
    # "command" tells the transcript this text is the command's outcome to show, not a reply.
    return _finish(ctx, sink, Turn.Status.COMPLETED, "turn.finished",
                   {"text": text, "status": "completed", "iterations": 0,
                    "command": ctx.turn.kind})


def _begin(ctx: TurnContext, sink: DbSink) -> list[AgentMessage]:
    """Mark the turn running and, for a new turn, store its user message: one transaction
    (the session row first, as every transcript writer locks it, then the turn's)."""
    turn = ctx.turn
    from sessions.models import Message

    # This worker's copy of the history from the session's previous turn, if it kept one:
    # the start write tells whether it is still current (_history_for).
    bound = BOUND.take(ctx.session.pk)
    with transaction.atomic():
        # A turn awaiting approval, one a dead worker left running (redelivered task or
        # recovery job), or one stopped by a budget and resumed: its message is stored.
        resumed = turn.status in WAITING_STATUSES or turn.user_message_id is not None
        ctx.resumed = resumed
        # The write validates the lease; Stop winning the race below rolls it back. It
        # also reads what the start needs of the session (the newest message's time, the
        # transcript version, whether another worker served the session since the kept
        # copy), from before its own rows: no query of its own (issue 15 target 1).
        # The write marks the turn running too where it can (one round trip less); the
        # turn's status guard is what loses to Stop.
        started_at = turn.started_at or timezone.now()
        open_statuses = (Turn.Status.QUEUED, Turn.Status.RUNNING, *WAITING_STATUSES)
        stored, facts = sink.turn_started(
            {"turn_id": turn.pk, "resumed": resumed},
            None if resumed else toolbox.user_message_for(ctx.session, turn, ctx.workspace),
            served_after=bound.turn_id if bound is not None else None,
            start_turn=TurnStart(turn_id=turn.pk, started_at=started_at,
                                 open_statuses=tuple(open_statuses)))
        if facts is not None and facts.turn_started is not None:
            started = facts.turn_started
        else:  # the write could not (SQLite, a child session): the same guard, by itself
            columns = {"status": Turn.Status.RUNNING, "started_at": started_at}
            if stored is not None:
                columns["user_message_id"] = stored.id
            started = bool(Turn.objects.filter(pk=turn.pk, status__in=open_statuses)
                           .update(**columns))
        if not started:
            raise TurnCancelled("stopped before it started")  # Stop won the race
        turn.status = Turn.Status.RUNNING
        if stored is not None:
            turn.user_message_id = stored.id
    if facts is None:  # the write could not read them (SQLite, a child session)
        last = (Message.objects.filter(session=ctx.session)
                .exclude(pk=stored.id if stored is not None else None).order_by("-id")
                .values_list("created_at", flat=True).first())
    else:
        last = facts.last_message_at
    ctx.idle_seconds = (timezone.now() - last).total_seconds() if last else 0.0
    ctx.loaded = _history_for(ctx, bound, facts, stored)
    # Calls that began and have no stored result are "interrupted", never "not executed".
    # Only calls the live history leaves unanswered can need that word (agents/context/
    # history.py asks about no other id), so only they are looked up.
    ctx.call_tally = _call_tally(ctx.bound, ctx.loaded)
    ctx.seen_call_ids = ctx.call_tally.seen
    ctx.pipeline.started_call_ids = started_call_ids(
        session=ctx.session, ledgered=True, among=ctx.call_tally.unanswered)
    return ctx.loaded


def _call_tally(bound: BoundSession | None, history: list[AgentMessage]) -> CallTally:
    """The call ids of ``history``: the kept copy's tally extended by the rows appended
    since (``history`` is the copy plus those rows when ``bound`` was used), else counted
    over the whole history."""
    if bound is not None and bound.call_tally is not None:
        return bound.call_tally.extended(history[len(bound.history):])
    return CallTally.of(history)


def _answer_already_stored(ctx: TurnContext, history: list[AgentMessage]):
    """A resumed turn whose final reply is already stored (an assistant message without
    tool calls after this turn's user message): the reply, else None. Asking the model
    again would redo the whole turn, side effects included (found by the soak)."""
    user_id = ctx.turn.user_message_id  # the row's, loaded by turn_next or set by _begin
    last = history[-1] if history else None
    if (user_id is None or last is None or last.role != "assistant" or last.tool_calls
            or last.id is None or last.id <= user_id):
        return None
    return last


def _history_for(ctx: TurnContext, bound: BoundSession | None, facts: StartFacts | None,
                 stored: AgentMessage | None = None) -> list[AgentMessage]:
    """The live history: this worker's copy from the previous turn (``bound``, taken from
    the session cache) plus the rows appended since (one small query), or a full load when
    the copy is missing or stale: the transcript was rewritten, or another turn of the
    session started since (another worker served it; agents/session_cache.py says why the
    whole copy goes). ``facts``: the session's stamps as the turn's start write read them
    (None: read them here); ``stored``: the user message that write stored (None: none),
    the only new row when the newest row before the write is the copy's last (no query)."""
    from sessions.models import Message

    if bound is not None:
        if facts is not None and facts.served_after is not None:
            version, served = facts.transcript_version, facts.served_after
        else:
            later = Turn.objects.filter(session_id=OuterRef("pk"), id__gt=bound.turn_id,
                                        started_at__isnull=False).exclude(pk=ctx.turn.pk)
            stamps = Session.objects.filter(pk=ctx.session.pk).annotate(
                served=Exists(later)).values_list("transcript_version", "served").first()
            version, served = stamps if stamps is not None else (None, True)
        # Every rewrite of the live transcript (compaction, rewind, edit, prune) bumps
        # transcript_version, and only the lease holder appends rows: the copy plus the
        # rows after it is the live history (a COUNT over every live row was 2-4 ms a turn).
        if bound.usable(version=version, served_since=served):
            if facts is not None and facts.last_message_id == bound.last_id:
                # No row was written after the copy but this turn's own message: no query.
                new = [stored] if stored is not None else []
            else:
                new = [message_to_agent(r) for r in Message.objects.filter(
                    session=ctx.session, active=True, id__gt=bound.last_id).order_by("id")]
            ctx.bound = bound
            render_cache_put(bound.rendered)  # the first request renders only what is new
            return [*bound.history, *new]
    return history_load(session=ctx.session)


def _bind(ctx: TurnContext, history: tuple[AgentMessage, ...]) -> None:
    """Keep the pipeline and the final history for this session's next turn here."""
    pipeline = ctx.__dict__.get("pipeline")
    if pipeline is None or not history or any(m.id is None for m in history):
        return
    version = ctx.finished_version if ctx.finished_version is not None else (
        Session.objects.filter(pk=ctx.session.pk).values_list("transcript_version",
                                                              flat=True).first())
    hermes = settings.HERMES
    size = entry_bytes(history, system_prompt=ctx.session.system_prompt, previous=ctx.bound)
    rendered, rendered_size = render_cache_take()
    # The start's tally covers ctx.loaded; when the final history still begins with it
    # (no compaction or prune rewrote it), only this turn's own messages are counted.
    loaded, tally = ctx.loaded, ctx.call_tally
    tally = (tally.extended(history[len(loaded):])
             if tally is not None and loaded and common_prefix(history, loaded) == len(loaded)
             else CallTally.of(history))
    BOUND.keep(ctx.session.pk, BoundSession(pipeline=pipeline, history=history, version=version,
                                            system_prompt=ctx.session.system_prompt,
                                            turn_id=ctx.turn.pk, size=size, rendered=rendered,
                                            rendered_size=rendered_size, call_tally=tally),
               max_entries=hermes["BOUND_SESSIONS_MAX"],
               max_bytes=hermes["BOUND_SESSIONS_BYTES"])


def _prepare(ctx: TurnContext, sink: DbSink, history: list[AgentMessage]):
    """Repair, reduce when the plan says so (agents/context/reduction.py decides the order), plan.
    Reductions run only here, at an iteration boundary, after every result of the previous
    batch is stored."""
    if not sink.lease_fresh():  # else a write renewed it moments ago (DbSink.lease_fresh)
        seconds = settings.HERMES["LEASE_SECONDS"]
        lease_renew(session=ctx.session, owner=ctx.owner, seconds=seconds)
        sink.lease_renewed_at = time.monotonic()
    strategy = None
    if ctx.first_request:
        # The cache strategy is chosen once per turn, before its first request is planned:
        # TTLs only matter for the writes that must outlive the idle gap after this turn.
        strategy = cache_strategy(ctx.session, idle_seconds=ctx.idle_seconds, history=history,
                                  prompt_tokens=estimate_text_tokens(ctx.session.system_prompt))
        ctx.pipeline.cache = cache_settings(strategy)
    prepared = ctx.pipeline.prepare(history)
    hermes = settings.HERMES
    plan = reduction_plan(ReductionState(
        first_request=ctx.first_request, idle_seconds=ctx.idle_seconds,
        idle_compaction_seconds=hermes["IDLE_COMPACTION_SECONDS"],
        cold_prune=strategy.prune_on_cold_resume if strategy else hermes["PRUNE_ON_COLD_RESUME"],
        # Cold means past the TTL the PREVIOUS turn's message breakpoints carried.
        cache_ttl_seconds=CACHE_TTL_SECONDS.get(ctx.session.cache_message_ttl, 300),
        prune_trigger_tokens=hermes["PRUNE_TRIGGER_TOKENS"],
        compaction_enabled=hermes["COMPACTION_ENABLED"], compactions=ctx.compactions,
        over_threshold=ctx.pipeline.calibrator.should_compact(prepared.rough_tokens)))
    reduced = None
    for step in plan:  # the first step that commits a reduction ends the plan
        if step in ("idle_compaction", "compaction"):
            reduced = session_compact(ctx=ctx, sink=sink, history=prepared.history,
                                      forced=False,
                                      reason="idle" if step == "idle_compaction" else "threshold")
            if reduced is None and step == "compaction":
                _notice_breaker(ctx)  # the breaker refused
        else:
            reduced = session_prune(ctx=ctx, history=prepared.history,
                                    projected=prepared.projected_tokens,
                                    cold=step == "cold_prune")
        if reduced is not None:
            break
    if reduced is not None:
        ctx.compactions += 1
        prepared = ctx.pipeline.prepare(reduced)
    if strategy is not None:
        cache_strategy_store(ctx.session, strategy)
    ctx.first_request = False
    for added in prepared.added:  # stored, so the next request is identical (history.py)
        sink.message_added(added)
    sink.estimate = prepared.rough_tokens
    return prepared.history, prepared.request


def _execute(ctx: TurnContext, sink: DbSink, calls: list[ToolCall]):
    """Answer from the tool-result ledger what already ran (a redelivered task, a replayed
    call id), report a call with effects that started with no recorded output as of unknown
    outcome, dispatch the rest; the calls of a segment are announced together when they
    start, and a call with effects is ledgered when it ends."""
    registry = ctx.registry

    def read_only(call: ToolCall) -> bool:
        return bool(getattr(registry.get(call.name), "read_only", False))

    split = split_by_ledger(calls, **_ledger_facts(ctx, sink, calls, read_only))
    order = {id(call): index for index, call in enumerate(calls)}
    ranked = list(split.answered.items())
    pending: list = []
    fresh = [calls[i] for i in split.to_run]
    tool_ctx = toolbox.tool_context(ctx, should_stop=sink.should_stop)
    if fresh:
        state = APPROVALS.gate_state(session=ctx.session, turn=ctx.turn,
                                     bypass=sink.bypass_seen(), decisions_from=ctx.gate)
        ctx.gate = state
        # execute_code's script calls tools back through the same registry and policy gate.
        tool_ctx = toolbox.with_code_rpc(tool_ctx, registry=registry,
                                         gate=toolbox.policy_gate(ctx, state, registry=registry))
        announced: list[ToolCall] = []

        def on_calls(started: list[ToolCall]) -> None:
            announced.extend(started)
            sink.tools_called(started, read_only=[read_only(c) for c in started])

        def on_result(call: ToolCall, out) -> None:
            sink.tools_ran()
            sink.tool_ended(call, out)
            # A read has no effect to protect: its output is stored with the batch's results
            # (one commit) and a read interrupted before that simply runs again. A call with
            # effects is ledgered at once, before anything else can fail (B39).
            if not read_only(call):
                sink.tool_finished(call, out.text, out.is_error)

        try:
            outcome = dispatch_tool_calls(
                fresh, registry=registry, ctx=tool_ctx,
                gate=toolbox.policy_gate(ctx, state, registry=registry),
                should_stop=sink.should_stop, on_calls=on_calls, on_result=on_result,
                should_steer=sink.steer_pending,
                # A parallel read (session_search, say) on a batch's worker thread opened
                # that thread's own connection; the thread ends with the batch, and an
                # unclosed connection held a backend until garbage collection.
                after_worker_call=connections.close_all)
        except DelegationRequested as exc:
            # The delegate call runs alone in its segment (no path scope, not read-only),
            # so it is the call announced last. Earlier calls' results are in the ledger and
            # answer them on resume.
            exc.call = announced[-1]
            raise
        by_id = {c.id: order[id(c)] for c in reversed(fresh)}
        ranked += [(by_id.get(r.tool_call_id, len(calls)), r) for r in outcome.results]
        pending = list(outcome.pending)
        sink.tool_meta.update({call_id: dict(output.metadata)
                               for call_id, output in outcome.outputs.items()
                               if output.metadata})
    results = apply_spill([r for _, r in sorted(ranked, key=lambda pair: pair[0])], tool_ctx)
    return results, pending


def _ledger_facts(ctx: TurnContext, sink: DbSink, calls: list[ToolCall], read_only) -> dict:
    """split_by_ledger's ``ledger`` and ``started`` for ``calls``.

    Calls the model emitted in a reply of this run whose ids the session has not seen
    before (not in the history this run started from, not in an earlier reply of this
    run) can have no ledger entry and no start announcement: they are answered without
    a query. Anything else (a resumed turn's unanswered calls, a replayed id) is looked up.
    Of the calls that started with no recorded output, only those with effects are of
    unknown outcome; an interrupted read runs again. A delegate call announced with no
    ledgered result never took effect (its only effect is the transaction that creates
    its children and saves the turn awaiting them), so it runs again too
    (children_spawn is idempotent per call id)."""
    ids = [c.id for c in calls]
    if sink.fresh_calls(ids, seen=ctx.seen_call_ids):
        return {"ledger": {}, "started": set()}
    started = {cid for cid in started_call_ids(session=ctx.session, among=set(ids))
               if any(c.id == cid and c.name != DELEGATE_TOOL and not read_only(c)
                      for c in calls)}
    return {"ledger": ledger_for(session=ctx.session, calls=calls), "started": started}


def _observe(ctx: TurnContext, sink: DbSink, request: ModelRequest,
             response: ModelResponse) -> None:
    """Where the billed count arrives: re-anchor calibration, judge the compaction verdict,
    track cache health; all persisted on the row."""
    billed = response.usage.prompt_tokens if response.usage else None
    # No budget applied to the call: its UsageRecord write has no reservation to delete.
    sink.reservation_open = getattr(ctx.transport, "reserved", True)
    calibrator = ctx.pipeline.calibrator
    calibrator.after_response(billed)
    ctx.pipeline.note_billed(billed)
    was_tripped = ctx.breaker.tripped
    ctx.breaker.on_response(billed, ctx.threshold)
    if ctx.breaker.tripped and not was_tripped:  # tell the user the moment it trips (B10)
        _notice_breaker(ctx)
    # Everything a response changes on the row, written by the reply's own transaction
    # (DbSink.reply_added, which the loop calls next): no commit of its own.
    sink.columns.update(usage_anchor=calibrator.to_dict(),
                        **breaker_fields(ctx.session, ctx.breaker),
                        **toolbox.cache_health_fields(ctx, response.usage))


def _recover(ctx: TurnContext, sink: DbSink, history: list[AgentMessage],
             exc: TransportError):
    """Run the recovery agents/context/reduction.py::recovery_plan chose from the classifier's
    hints; return the history to retry with (the first step that yields one), or None to
    fail."""
    ctx.pipeline.calibrator.after_error()
    hint = exc.classified
    plan = recovery_plan(compress=bool(hint and hint.compress),
                         history_shape=bool(hint and hint.history_shape),
                         breaker_tripped=ctx.breaker.tripped, compactions=ctx.compactions)
    for step in plan:
        if step == "shrink_output":
            if ctx.pipeline.note_overflow(hint.input_tokens, hint.context_limit):
                return history  # the next request asks for less output, sized by the provider
        elif step == "notice_breaker":
            _notice_breaker(ctx)
        elif step == "forced_prune":
            prepared = ctx.pipeline.prepare(history)
            pruned = session_prune(ctx=ctx, history=prepared.history,
                                   projected=prepared.projected_tokens, forced=True)
            if pruned is not None:
                return pruned
        elif step == "forced_compaction":
            compacted = session_compact(ctx=ctx, sink=sink, history=history, forced=True,
                                        reason="overflow")
            if compacted is not None:
                ctx.compactions += 1
                return compacted
        elif step == "repair_history":
            ctx.bound = None
            ctx.pipeline.repair_strictly()
            event_append(session_id=ctx.session.pk, type="history.repaired", payload={
                "turn_id": ctx.turn.pk, "reason": hint.message[:300]})
            return history_load(session=ctx.session)
    return None


def _notice_breaker(ctx: TurnContext) -> None:
    """Tell the user, once per turn, that automatic compaction is paused (B10)."""
    if ctx.breaker_noticed or not ctx.breaker.tripped:
        return
    ctx.breaker_noticed = True
    event_append(session_id=ctx.session.pk, type="compaction.breaker_tripped", payload={
        "turn_id": ctx.turn.pk,
        "text": "Automatic compaction is paused: the last compactions did not shrink the "
                "context enough. Use /compact or /prune, or start a new session."})


def _await_approval(ctx: TurnContext, sink: DbSink, exc: ApprovalRequired) -> str:
    """Save the turn as waiting for the first pending call's kind of answer: a clarify
    question (AWAITING_ANSWER) or approval decisions (AWAITING_APPROVAL). Calls after it
    are re-gated on resume."""
    first = exc.pending[0][1] if exc.pending else None
    if first is not None and first.rule == CLARIFY_RULE:
        return _await_answer(ctx, sink, exc.pending[0][0])
    sink.flush()
    with transaction.atomic():
        lease_validate(session=ctx.session, owner=ctx.owner)
        # Stop pressed while the calls were being gated: no request is created, the turn
        # ends cancelled (the unanswered calls are repaired as never run).
        stopped = Session.objects.filter(pk=ctx.session.pk, stop_requested=True).exists()
        if not stopped:
            rows = APPROVALS.requests_create(
                session=ctx.session, turn=ctx.turn, workspace=str(ctx.workspace),
                pending=[(c, d) for c, d in exc.pending if d is None or d.rule != CLARIFY_RULE])
            Turn.objects.filter(pk=ctx.turn.pk).update(status=Turn.Status.AWAITING_APPROVAL,
                                                       iterations=_charged(ctx))
            event_append(session_id=ctx.session.pk, type="turn.awaiting_approval",
                         payload={"turn_id": ctx.turn.pk, "approvals": [r.pk for r in rows]})
    if stopped:
        return _finish(ctx, sink, Turn.Status.CANCELLED, "turn.cancelled", {})
    return Turn.Status.AWAITING_APPROVAL


def _await_children(ctx: TurnContext, sink: DbSink, exc: DelegationRequested) -> str:
    """Create the delegate call's children and save the turn as awaiting them, in one
    transaction (nothing half-written: no child without a waiting parent, no waiting parent
    without children); the worker then returns. The last child to end ledgers the call's
    result and resumes this turn (sessions/delegation.py)."""
    sink.flush()
    with transaction.atomic():
        lease_validate(session=ctx.session, owner=ctx.owner)
        stopped = Session.objects.filter(pk=ctx.session.pk, stop_requested=True).exists()
        if not stopped:
            rows = delegation.children_spawn(parent_session=ctx.session, parent_turn=ctx.turn,
                                             call=exc.call, request=exc.request)
            Turn.objects.filter(pk=ctx.turn.pk).update(status=Turn.Status.AWAITING_CHILDREN,
                                                       iterations=_charged(ctx))
            event_append(session_id=ctx.session.pk, type="turn.awaiting_children", payload={
                "turn_id": ctx.turn.pk, "call_id": exc.call.id,
                "children": [{"child_id": r.child_id, "index": r.index, "goal": r.goal[:300]}
                             for r in rows]})
    if stopped:
        return _finish(ctx, sink, Turn.Status.CANCELLED, "turn.cancelled", {})
    return Turn.Status.AWAITING_CHILDREN


def _await_answer(ctx: TurnContext, sink: DbSink, call: ToolCall) -> str:
    """Store the clarify question of ``call``, save the turn as AWAITING_ANSWER and end the
    task (no worker waits for a person); Stop pressed meanwhile ends it cancelled."""
    sink.flush()
    with transaction.atomic():
        lease_validate(session=ctx.session, owner=ctx.owner)
        stopped = Session.objects.filter(pk=ctx.session.pk, stop_requested=True).exists()
        if not stopped:
            question = clarify_question_create(session=ctx.session, turn=ctx.turn, call=call)
            Turn.objects.filter(pk=ctx.turn.pk).update(status=Turn.Status.AWAITING_ANSWER,
                                                       iterations=_charged(ctx))
            event_append(session_id=ctx.session.pk, type="turn.awaiting_answer",
                         payload={"turn_id": ctx.turn.pk, "question": question.pk})
    if stopped:
        return _finish(ctx, sink, Turn.Status.CANCELLED, "turn.cancelled", {})
    return Turn.Status.AWAITING_ANSWER


def _charged(ctx: TurnContext):
    """Turn.iterations plus what this run's budget charged (refunds already given back:
    a failover, a recovery, an execute_code-only iteration). Counted once per run."""
    used = ctx.budget.used if ctx.budget is not None else 0
    if ctx.budget is not None:
        ctx.budget = None  # a later write of the same run must not add it again
    return F("iterations") + used


def _finish(ctx: TurnContext, sink: DbSink, status: str, event: str, payload: dict,
            error: str = "") -> str:
    """Record how the turn ended (its own transaction; the lease is not required so a
    failure is always reported) and announce it with the turn's usage totals."""
    try:
        sink.flush()
    except Exception as exc:  # recorded on the turn below, not swallowed
        log.exception("flushing text of turn %s failed", ctx.turn.pk)
        error = f"{error}\n(streamed text not flushed: {exc!r})".strip()
    recent = sink.lease_fresh()
    usage = sink.usage_total
    if ctx.resumed:  # earlier runs of this turn (before an approval, ...) made calls too
        usage = turn_usage_totals([ctx.turn.pk]).get(ctx.turn.pk, usage)
    payload = {"turn_id": ctx.turn.pk, "usage": usage, **payload}
    if recent and not turn_ended_hooked(child=ctx.session.parent_id is not None):
        # Our lease is live (a write renewed it moments ago) and no parent waits on this
        # turn: the whole end is one statement where the database allows it.
        used = ctx.budget.used if ctx.budget is not None else 0
        done = turn_finish_write(session=ctx.session, turn_id=ctx.turn.pk, status=status,
                                 error=error, iterations_add=used, event_type=event,
                                 payload=payload)
        if done is not None:
            ctx.budget = None  # charged once
            ctx.finished_version = done[1]
            return status
    with transaction.atomic():
        # A write renewed our lease moments ago: nobody else can hold it (runner._prepare).
        if not recent and lease_held_by_other(session=ctx.session, owner=ctx.owner):
            # Our lease expired and another worker resumed this turn: its outcome is theirs.
            log.warning("turn %s is held by another worker; not marking it %s",
                        ctx.turn.pk, status)
            return "lease_lost"
        Turn.objects.filter(pk=ctx.turn.pk).update(status=status, error=error[:5000],
                                                   finished_at=timezone.now(),
                                                   iterations=_charged(ctx))
        Session.objects.filter(pk=ctx.session.pk).update(stop_requested=False)
        event_append(session_id=ctx.session.pk, type=event, payload=payload)
        # A child's end may resume its parent (same transaction).
        turn_ended(ctx.turn.pk, child=ctx.session.parent_id is not None)
    return status


def _readable(exc: TransportError) -> str:
    """A provider failure as sentences a person can act on (no stack trace): what failed,
    which tool call was cut off (never run; B21), whether the text shown was kept (B22),
    and what to do about quota (B23)."""
    classified = exc.classified
    reason = classified.reason.value if classified is not None else "provider_error"
    text = f"The model provider failed ({reason}): {str(exc)[:300]}"
    interrupted = exc.interrupted_call
    if interrupted:
        text += f" The reply was cut off while writing a call to {interrupted}; it was not run."
    if exc.partial:
        text += " The text shown so far was kept, marked incomplete."
    if classified is not None and classified.quota:
        text += " " + QUOTA_ADVICE
    return text
