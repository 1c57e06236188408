"""Context reduction, committed: batch compaction, prune (gate, hysteresis, cold resume) and
the durable breaker, wired to rows.

The decisions are agents/'s (compaction.py, prune.py, breaker.py, tokens.py); this module
fetches their inputs, calls the summariser through the session's transport, and commits
each result in ONE transaction: compaction under the per-session compaction lease (300 s,
re-validated inside the transaction) and the turn lease; every live row → active=0,
compacted=1; the summary and surviving tail inserted as new live rows; the same session id
(seed, "Compaction is a flag flip, not a delete").
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from cachetools import LRUCache
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from agents.context.breaker import PROCESS_CLOCK_ID, CompactionBreaker
from agents.cache import CacheSettings
from agents.cache_strategy import CacheStrategy, SessionRhythm, choose_cache_strategy, long_gaps
from agents.context.compaction import (ROLLING_SUMMARY_KIND, SUMMARY_KIND, Skip,
                               build_summary_request, compaction_threshold,
                               compacted_transcript, drop_middle, fallback_summary,
                               plan_compaction)
from agents.errors import TransportError
from agents.messages import Message as AgentMessage
from agents.context.prune import ColdReclaimTally, plan_prune
from agents.context.tokens import estimate_message_tokens, estimate_text_tokens
from sessions.events import event_append
from sessions.leases import (compaction_lease_acquire, compaction_lease_release,
                             compaction_lease_validate, lease_validate)
from sessions.models import Message, Session, Turn, UsageRecord
from sessions.transcript import history_load, message_row, message_to_agent

log = logging.getLogger("hermes.context")

CACHE_TTL_SECONDS = {"5m": 300, "1h": 3600}


breaker_clock: Callable[[], float] = time.monotonic
breaker_clock_id: str = PROCESS_CLOCK_ID
"""The monotonic clock the breaker's 300 s probation is measured on, and its id (a stored
deadline is only kept by a breaker on the same clock). Module-level so a test can step
past probation without waiting (tests/sessions/test_long_session.py)."""


def breaker_load(session: Session) -> CompactionBreaker:
    """Rehydrate the breaker from the row (every bind: a restart never resets it)."""
    return CompactionBreaker.from_dict(session.compaction_state or None,
                                       clock=lambda: breaker_clock(), clock_id=breaker_clock_id)


def breaker_fields(session: Session, breaker: CompactionBreaker) -> dict:
    """The Session column holding the breaker, its JSON state (for one UPDATE together with
    other per-response state); stored once, never mirrored."""
    state = breaker.to_dict()
    session.compaction_state = state
    return {"compaction_state": state}


def breaker_save(session: Session, breaker: CompactionBreaker) -> None:
    """Persist the breaker (JSON)."""
    Session.objects.filter(pk=session.pk).update(**breaker_fields(session, breaker))


def transcript_replace(*, session: Session, turn_owner: str,
                       new_live: list[AgentMessage]) -> list[AgentMessage]:
    """In the caller's transaction: archive every live row (active=0, compacted=1) and insert
    ``new_live`` as fresh live rows in order. Returns them with their new ids."""
    lease_validate(session=session, owner=turn_owner)
    # Only active/compacted change: the search trigger watches content, tool_name and
    # tool_calls, so archiving does no search-index work (migration 0002).
    Message.objects.filter(session=session, active=True).update(active=False, compacted=True)
    Session.objects.filter(pk=session.pk).update(transcript_version=F("transcript_version") + 1)
    # One INSERT for the whole live set (ids come back, in order, from RETURNING): a tail of
    # a few hundred rows inserted one by one cost more than archiving 10,000 (bench-context).
    rows = Message.objects.bulk_create([
        message_row(session=session, message=m) for m in new_live])
    Session.objects.filter(pk=session.pk).update(message_count=len(rows),
                                                 last_activity_at=timezone.now())
    return [message_to_agent(r) for r in rows]


def session_compact(*, ctx, sink, history: list[AgentMessage], forced: bool,
                    reason: str) -> list[AgentMessage] | None:
    """Compact ``history`` now. Returns the new live history, or None when nothing was
    committed (breaker blocked, nothing to compact, lease busy). ``ctx`` is the runner's
    TurnContext, ``sink`` its DbSink (the summariser's usage is recorded through it)."""
    session = ctx.session
    breaker = ctx.breaker  # one breaker per bind: the verdict latch must be the same object
    if not forced:
        decision = breaker.may_compact()
        breaker_save(session, breaker)  # the deadline is armed at the first blocked check
        if not decision.allowed:
            return None
    window = ctx.profile.context_window
    first = not Message.objects.filter(session=session,
                                       kind__in=(SUMMARY_KIND, ROLLING_SUMMARY_KIND)).exists()
    plan = plan_compaction(history, window=window, estimate=estimate_message_tokens,
                           first_compaction=first)
    if isinstance(plan, Skip):
        if plan.plan is None:
            return None
        kind, new_live, error = "skip_small_middle", drop_middle(plan.plan), ""
        plan = plan.plan
    else:
        kind, new_live, error = _summarise(ctx, sink, plan, breaker)
    owner = f"compaction:{uuid.uuid4().hex[:12]}"
    if not compaction_lease_acquire(session=session, owner=owner):
        return None
    try:
        with transaction.atomic():
            compaction_lease_validate(session=session, owner=owner)
            summary_index = len(plan.head)
            stored = transcript_replace(session=session, turn_owner=ctx.owner,
                                        new_live=new_live)
            breaker.on_compaction_committed(kind)
            breaker_save(session, breaker)
            Session.objects.filter(pk=session.pk).update(
                compaction_count=F("compaction_count") + 1, prune_rearm_tokens=0,
                usage_anchor=None)
            tokens_after = sum(estimate_message_tokens(m) for m in stored)
            event_append(session_id=session.pk, type="compaction", payload={
                "turn_id": ctx.turn.pk, "kind": kind, "reason": reason,
                "tokens_before": plan.total_tokens, "tokens_after": tokens_after,
                "messages_archived": len(history), "summary": stored[summary_index].content,
                "error": error})
            ctx.last_compaction = {"kind": kind, "error": error}
    finally:
        compaction_lease_release(session=session, owner=owner)
    ctx.rebuild_after_compaction()
    return history_load(session=session)


def _summarise(ctx, sink, plan,
               breaker: CompactionBreaker) -> tuple[str, list[AgentMessage], str]:
    """Call the summariser; on failure (or cooldown) fall back to deterministic dropping so
    the session can always continue. Returns (kind, new live set, the failure or "") so the
    event and `/compact` say what really happened (issue 10 defect 7). The output cap is
    the MODEL's (agents.providers.model_output_cap), not the profile's."""
    from agents.providers import model_output_cap

    if not breaker.may_summarise():
        return "fallback", drop_middle(plan), "summariser cooling down after a failure"
    request = build_summary_request(plan, model=ctx.session.model,
                                    window=ctx.profile.context_window,
                                    model_max_output=model_output_cap(ctx.profile,
                                                                      ctx.session.model),
                                    estimate_text=estimate_text_tokens)
    try:
        response = ctx.transport.complete(request, on_text=lambda _t: None)
    except TransportError as exc:
        breaker.on_summariser_failure(transient=bool(exc.classified and exc.classified.retryable))
        log.warning("summariser failed for session %s: %s", ctx.session.pk, exc)
        return "fallback", drop_middle(plan), str(exc)[:300]
    sink.usage_recorded(response.usage, request, response, purpose="summary")
    text = response.message.content.strip()
    if not text:
        return "fallback", drop_middle(plan), "the summariser returned no text"
    return "summary", compacted_transcript(plan, text), ""


def session_prune(*, ctx, history: list[AgentMessage], projected: int, forced: bool = False,
                  cold: bool = False) -> list[AgentMessage] | None:
    """Prune old tool output in place (the stub goes to sent_content; the full text stays on
    the row, retrievable) when the gate allows; the re-arm level is written in the same
    transaction as the edits, so a restart cannot defeat the hysteresis."""
    session = ctx.session
    trigger = settings.HERMES["PRUNE_TRIGGER_TOKENS"]
    plan = plan_prune(history, estimate=estimate_message_tokens, trigger_tokens=trigger,
                      rearm_level=session.prune_rearm_tokens, current_tokens=projected,
                      compaction_threshold=compaction_threshold(ctx.profile.context_window),
                      forced=forced, cold=cold)
    if plan is None or not plan.edits:
        return None
    with transaction.atomic():
        lease_validate(session=session, owner=ctx.owner)
        for edit in plan.edits:
            after = edit.after
            Message.objects.filter(pk=after.id, session=session).update(
                sent_content=after.sent_content,
                tool_calls=[c.to_dict() for c in after.tool_calls])
        Session.objects.filter(pk=session.pk).update(
            prune_rearm_tokens=plan.rearm_level, usage_anchor=None,
            transcript_version=F("transcript_version") + 1)
        session.prune_rearm_tokens = plan.rearm_level
        event_append(session_id=session.pk, type="prune", payload={
            "turn_id": ctx.turn.pk, "tokens_before": plan.tokens_before,
            "tokens_after": plan.tokens_after, "reclaimed": plan.reclaimed,
            "edits": len(plan.edits), "forced": forced, "cold": cold})
    ctx.pipeline.calibrator.on_compacted()
    return history_load(session=session)


RHYTHM_TURNS = 50
"""Turns looked back at to measure a session's idle gaps (older ones say little of now)."""


TALLIES_MAX = 16
"""Sessions whose cold-prune tally a worker keeps between turns (the most recently used)."""
_TALLIES: LRUCache[int, ColdReclaimTally] = LRUCache(maxsize=TALLIES_MAX)
_TALLIES_LOCK = threading.Lock()


def _tally_for(session_id: int, history: list[AgentMessage]) -> ColdReclaimTally:
    """The session's ColdReclaimTally brought up to ``history``: the history's tokens and what
    a cold prune would reclaim, costing only the messages appended since the last turn on this
    worker (the history is then the same messages plus new ones; anything else is tallied
    afresh, so the answer is always the full computation's). Kept per session in a small LRU:
    it holds the messages, which the worker's session cache (agents/session_cache.py) mostly
    holds already."""
    with _TALLIES_LOCK:
        tally = _TALLIES.pop(session_id, None)
    tally = (tally or ColdReclaimTally(estimate_message_tokens)).update(history)
    with _TALLIES_LOCK:
        _TALLIES[session_id] = tally
    return tally


def _rhythm_sql() -> str:
    """The plain SQL of session_rhythm's read, built once from the models' columns: the
    newest finished turns' (created_at, finished_at, the session's model-call count),
    newest first, at most %s of them. Both times come back in one timezone (aware on
    PostgreSQL, naive UTC on SQLite), so their differences are right on either."""
    turn, usage = Turn._meta, UsageRecord._meta
    tcol = {f.name: f.column for f in turn.concrete_fields}
    ucol = {f.name: f.column for f in usage.concrete_fields}
    calls = (f'(SELECT COUNT(*) FROM "{usage.db_table}" WHERE "{ucol["session"]}" = %s '
             f'AND "{ucol["purpose"]}" = %s)')
    return (f'SELECT "{tcol["created_at"]}", "{tcol["finished_at"]}", {calls} '
            f'FROM "{turn.db_table}" WHERE "{tcol["session"]}" = %s '
            f'AND "{tcol["finished_at"]}" IS NOT NULL ORDER BY "{turn.pk.column}" DESC LIMIT %s')


_RHYTHM_SQL = _rhythm_sql()


def session_rhythm(session: Session, *, idle_seconds: float, history: list[AgentMessage],
                   prompt_tokens: int) -> SessionRhythm:
    """The session's observed rhythm for agents/cache_strategy.py, from stored rows: the idle
    gaps between its last RHYTHM_TURNS turns (a turn's created_at minus the previous turn's
    finished_at, seconds) plus ``idle_seconds`` before this one, the history's tokens and what
    a cold prune would reclaim (estimate), per-burst growth and requests (model calls)."""
    # The model-call count rides on the turns query as a scalar subquery (one round trip per
    # turn start instead of two); a session with no finished turn yet counts on its own.
    # Plain SQL: asked at every turn start, and the ORM's build of this query (a subquery,
    # an annotation, a slice) cost more than its round trip (issue 15 target 1).
    with connection.cursor() as cursor:
        cursor.execute(_RHYTHM_SQL, [session.pk, "turn", session.pk, RHYTHM_TURNS])
        rows = cursor.fetchall()[::-1]
    calls = (rows[0][2] or 0) if rows else UsageRecord.objects.filter(
        session=session, purpose="turn").count()
    gaps = [max(0.0, (b[0] - a[1]).total_seconds()) for a, b in zip(rows, rows[1:])]
    if rows:
        gaps.append(max(0.0, idle_seconds))
    tally = _tally_for(session.pk, history)
    tokens, prunable = tally.tokens, tally.reclaimed
    bursts = 1 + len(long_gaps(tuple(gaps))) + sum(1 for g in gaps if g > 3600)
    return SessionRhythm(gaps_s=tuple(gaps), prompt_tokens=prompt_tokens,
                         history_tokens=tokens,
                         prunable_tokens=prunable,
                         burst_growth_tokens=tokens // bursts, burst_requests=calls / bursts)


def cache_strategy(session: Session, *, idle_seconds: float, history: list[AgentMessage],
                   prompt_tokens: int) -> CacheStrategy:
    """This turn's cache strategy. HERMES_CACHE_TTL "auto" (the default) chooses from the
    session's rhythm (agents/cache_strategy.py); "5m" or "1h" fix the message tier, with
    HERMES_CACHE_PROMPT_TTL for the prompt tier and HERMES_PRUNE_ON_COLD_RESUME as set."""
    configured = settings.HERMES["CACHE_TTL"]
    if configured in CACHE_TTL_SECONDS:
        return CacheStrategy(prompt_ttl=settings.HERMES["CACHE_PROMPT_TTL"] or configured,
                             message_ttl=configured,
                             prune_on_cold_resume=settings.HERMES["PRUNE_ON_COLD_RESUME"],
                             reason=f"configured: HERMES_CACHE_TTL={configured}")
    chosen = choose_cache_strategy(session_rhythm(
        session, idle_seconds=idle_seconds, history=history, prompt_tokens=prompt_tokens))
    if not settings.HERMES["PRUNE_ON_COLD_RESUME"]:
        chosen = CacheStrategy(prompt_ttl=chosen.prompt_ttl, message_ttl=chosen.message_ttl,
                               prune_on_cold_resume=False, reason=chosen.reason)
    return chosen


def cache_settings(strategy: CacheStrategy) -> CacheSettings:
    """The planner's settings for a strategy."""
    return CacheSettings(ttl=strategy.message_ttl, prompt_ttl=strategy.prompt_ttl)


def cache_strategy_store(session: Session, strategy: CacheStrategy) -> None:
    """Remember the message TTL this turn's requests carry: a resume after longer is cold
    (runner._prepare feeds it to agents/context/reduction.py as ``cache_ttl_seconds``)."""
    if session.cache_message_ttl != strategy.message_ttl:
        Session.objects.filter(pk=session.pk).update(cache_message_ttl=strategy.message_ttl)
        session.cache_message_ttl = strategy.message_ttl


def session_micro_compact(*, ctx, sink) -> bool:
    """Micro-compaction (off by default; HERMES_MICRO_COMPACTION): after a turn, fold the
    oldest un-absorbed exchange into one rolling summary. The splice and its archive are ONE
    transaction (every live row → active=0, compacted=1; the new summary and survivors
    inserted), so a resume can never load both the summary and what it summarised (seed,
    "The lesson hiding in micro-compaction"). Returns True when a fold was committed."""
    from agents.context.compaction import build_fold_request, micro_commit, plan_micro_compaction

    session = ctx.session
    live = history_load(session=session)
    plan = plan_micro_compaction(live)
    if plan is None:
        return False
    request = build_fold_request(plan, model=session.model, max_tokens=2_000)
    try:
        response = ctx.transport.complete(request, on_text=lambda _t: None)
    except TransportError as exc:  # nothing spliced: the transcript stays as it was
        log.warning("micro-compaction summariser failed for session %s: %s", session.pk, exc)
        return False
    sink.usage_recorded(response.usage, request, response, purpose="summary")
    folded = response.message.content.strip() or fallback_summary(plan.exchange)
    with transaction.atomic():
        stored = transcript_replace(session=session, turn_owner=ctx.owner,
                                    new_live=micro_commit(plan, folded))
        event_append(session_id=session.pk, type="compaction", payload={
            "turn_id": ctx.turn.pk, "kind": "micro", "reason": "micro",
            "tokens_before": sum(estimate_message_tokens(m) for m in live),
            "tokens_after": sum(estimate_message_tokens(m) for m in stored),
            "messages_archived": len(plan.archive_ids), "summary": stored[0].content})
    return True
