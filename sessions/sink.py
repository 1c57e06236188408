"""DbSink: the EventSink the loop reports to, backed by rows and RunEvents.

Every message is stored in a transaction that re-validates the turn lease, then announced as
an event (written, then published after commit): one transaction per thing stored, with the
buffered text, the reply's usage row and the observed session columns folded into it and the
lease renewed by the same UPDATE (sessions/writes.py; issue 15). Text deltas are batched about every 50 ms so
a fast stream does not become one row per token; the batch is flushed before any other event
so the order on the wire is the order things happened. The first delta of each reply is sent
at once and opens the first window (HERMES["FIRST_DELTA_FLUSH"]): the reader sees the reply
start one window earlier, for one event per reply more than batching that delta too
(benchmarks/bench_stream.py prints both).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import replace
from decimal import Decimal

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from agents.errors import TransportError, TurnCancelled
from agents.messages import Message as AgentMessage
from agents.messages import ModelRequest, ModelResponse, ToolCall, Usage
from agents.pricing import Buckets
from agents.recovery import STOPPED_KIND
from agents.context.tokens import estimate_message_tokens, estimate_text_tokens
from agents.wording import served_label
from agents.tools.ledger import LedgerEntry, LedgerKey, ledger_key
from sessions.events import delta_append, event_append
from sessions.hooks import MONEY
from sessions.models import Message, RunEvent, Session, ToolResultLedger, Turn, UsageRecord
from sessions.steer import steers_land, steers_waiting
from sessions.transcript import _insert, message_row, message_to_agent, message_to_display
from sessions.writes import Entry, StartFacts, TurnStart, relax_commit, transcript_write

DELTA_BATCH_SECONDS = 0.05
"""How long text deltas are gathered into one text.delta event (issue 2: about 50 ms); the
default of HERMES["DELTA_BATCH_MS"]."""
CARD_STATUS_META = ("exit_code", "timed_out", "stopped", "steered", "denied")
"""The result metadata a tool card's status reads (sessions/tool_cards.py tool_status)."""
STOP_CHECK_SECONDS = 0.25
"""The stop flag is at most this old (seconds) when should_stop answers: read by the last
text.delta write (sessions/events.py::delta_append returns it), else polled."""


def estimated_usage(request: ModelRequest, response: ModelResponse,
                    prompt_estimate: int | None) -> Usage:
    """Usage for a call whose provider sent none (an OpenAI-compatible stream without
    ``include_usage``; B28): the pipeline's estimate of the request as uncached input and
    the reply's estimated tokens as output. The record is flagged ``estimated``."""
    prompt = prompt_estimate if prompt_estimate is not None else (
        estimate_text_tokens(request.system)
        + sum(estimate_message_tokens(m) for m in request.messages))
    return Usage(input_tokens=prompt,
                 output_tokens=max(1, estimate_message_tokens(response.message) - 10),
                 raw={"estimated": True})


def usage_totals_empty() -> dict:
    """A turn's usage totals before any call (the shape of ``usage_totals_add``)."""
    return {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "calls": 0, "served_by": []}


def usage_totals_add(total: dict, *, input_tokens: int, output_tokens: int, cache_read: int,
                     cache_write: int, served: str, cost: Decimal | None,
                     unknown: str | None) -> None:
    """Count one provider call into ``total`` (what turn.finished carries): the four token
    buckets (``cache_write_tokens``: both TTLs), ``calls``, ``served_by`` (route labels, each
    once, in call order), ``cost_usd`` (USD decimal string of the priced calls; absent while
    none is priced) and ``cost_unknown`` (why a call has no price; absent while every call
    has one). The one rule for the live line (DbSink) and the summed one
    (``turn_usage_totals``), so the two cannot disagree."""
    total["calls"] += 1
    total["input_tokens"] += input_tokens
    total["output_tokens"] += output_tokens
    total["cache_read_tokens"] += cache_read
    total["cache_write_tokens"] += cache_write
    if served not in total["served_by"]:
        total["served_by"].append(served)
    if cost is None:
        total["cost_unknown"] = unknown or "no price"
    else:
        total["cost_usd"] = str(Decimal(total.get("cost_usd", "0")) + cost)


def turn_usage_totals(turn_ids: list[int]) -> dict[int, dict]:
    """The usage totals of each turn of ``turn_ids`` summed from its stored UsageRecords
    (``usage_totals_add``'s shape); a turn with no record is absent. One query. The
    reloaded page's cost lines come from here, and so does the live line of a turn that ran
    in several pieces (approval, children, a dead worker, a budget): its sink saw only the
    last piece's calls."""
    totals: dict[int, dict] = {}
    for (turn_id, provider, model, credential, input_tokens, output_tokens, cache_read,
         write_5m, write_1h, cost, unknown) in UsageRecord.objects.filter(
            turn__in=turn_ids).order_by("id").values_list(
            "turn_id", "provider", "model", "credential", "input_tokens", "output_tokens",
            "cache_read_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens",
            "cost_usd", "cost_unknown_reason"):
        usage_totals_add(totals.setdefault(turn_id, usage_totals_empty()),
                         input_tokens=input_tokens, output_tokens=output_tokens,
                         cache_read=cache_read, cache_write=write_5m + write_1h,
                         served=served_label(provider, model, credential), cost=cost,
                         unknown=unknown)
    return totals


def buckets_of_usage(usage: Usage) -> Buckets:
    """The priced buckets of a normalised Usage (agents/messages.py)."""
    return Buckets(input=usage.input_tokens, output=usage.output_tokens,
                   cache_read=usage.cache_read_tokens,
                   cache_write_5m=usage.cache_write_5m_tokens,
                   cache_write_1h=usage.cache_write_1h_tokens)


class DbSink:
    """EventSink for one turn of one session, writing under ``owner``'s lease.

    Not thread-safe for concurrent message_added calls from several threads; the loop stores
    messages from its own thread only (tool threads return results to it).
    """

    def __init__(self, *, session: Session, turn: Turn, owner: str,
                 lease_seconds: int | None = None):
        self.session = session
        self.turn = turn
        self.owner = owner
        self._buffer: list[str] = []
        self._last_flush = time.monotonic()
        hermes = settings.HERMES
        self._window = float(hermes.get("DELTA_BATCH_MS", DELTA_BATCH_SECONDS * 1000)) / 1000
        self._first_flush = bool(hermes.get("FIRST_DELTA_FLUSH", True))
        self._reply_open = False
        """A delta of the current reply was seen (reset when anything else is announced)."""
        self._last_stop_check = 0.0
        self._stop = False
        self._lock = threading.Lock()
        self.usage_total = usage_totals_empty()
        self.estimate: int | None = None
        self.tool_meta: dict[str, dict] = {}
        """Display metadata of tool results not stored yet, by tool call id (the runner
        fills it from the dispatch outcome; message_added stores it on the row)."""
        self._calls: dict[str, dict] = {}
        self._ended: list[tuple[str, dict]] = []
        """tool.ended events of calls that finished since the last announcement: written
        with the next segment's (``tools_called``), no write of their own."""
        self.lease_seconds = lease_seconds
        """Every guarded write renews the turn lease to now + this (None: no renewal)."""
        self.lease_renewed_at: float | None = None
        """time.monotonic() of the last write that renewed the lease (runner._prepare
        skips its own renewal while this is recent)."""
        self._reply_call_ids: Counter[str] = Counter()
        """Tool call ids of the replies this sink stored (``fresh_calls``)."""
        self._steer_seen: tuple[bool, float] | None = None
        self._bypass_seen: tuple[bool, float] | None = None
        self._start_facts: StartFacts | None = None
        """(the session's bypass flag, time.monotonic()) as the last guarded write saw it."""
        """(a correction waited, time.monotonic()) as the last guarded write saw it."""
        self.reservation_open = True
        """Whether the provider call being recorded left spend reservations to settle (the
        runner sets it from the budgeted transport; unknown → True, so they are deleted)."""
        self.columns: dict = {}
        """Session columns to write with the next guarded write (runner._observe: the
        calibration anchor, the breaker, cache health), so a reply is one commit."""

    # --- EventSink -----------------------------------------------------------------------
    def message_added(self, message: AgentMessage, *, kind: str = "") -> AgentMessage:
        """Store ``message`` and announce it; returns it with its row id. Raises LeaseLost."""
        return self._write(messages=[(message, kind)])[0]

    def messages_added(self, messages: list[AgentMessage]) -> list[AgentMessage]:
        """Store a batch (a tool call batch's results) in ONE transaction under the lease,
        then announce each (B02, B05: a crash keeps all of them or none). Raises LeaseLost."""
        self._ended.clear()  # the results say it all
        return self._write(messages=[(m, "") for m in messages])

    def reply_added(self, message: AgentMessage, *, kind: str = "", usage: Usage | None,
                    request: ModelRequest, response: ModelResponse) -> AgentMessage:
        """A provider call's reply: its UsageRecord (settling its reservation) and usage
        event, then ``message`` and its event, in ONE transaction under the lease (with the
        text still buffered and the columns runner._observe left in ``columns``). Lease
        lost: the usage is still recorded (the call was billed), then LeaseLost."""
        stored = self._write(messages=[(message, kind)],
                             usages=[*self._billed(response.billed_before, request),
                                     self._usage(usage, request, response, "turn")])[0]
        self._reply_call_ids.update(c.id for c in message.tool_calls)
        return stored

    def reply_stopped(self, stop: TurnCancelled, *, request: ModelRequest) -> None:
        """The user stopped ``request``'s call (agents.EventSink). The text shown is kept as an
        assistant message marked STOPPED_KIND. A call stopped while the provider answered
        (``stop.billed``) is billed, so it also gets a UsageRecord like a reply's, priced
        and settling the call's budget reservation (accounts/budgets.py leaves it open for
        this write), in ONE transaction under the lease (the usage is kept if the lease is
        lost). The provider reports no output count before the end of a stream, so output
        is the estimate of the text shown, at least what message_start reported; the record
        is flagged ``estimated`` when the provider reported nothing at all."""
        shown = stop.partial
        message = AgentMessage(role="assistant", content=shown) if shown else None
        if not stop.billed:
            if message is not None:
                self.message_added(message, kind=STOPPED_KIND)
            return
        usage = stop.usage
        if usage is not None:
            usage = replace(usage, output_tokens=max(usage.output_tokens,
                                                     estimate_text_tokens(shown)),
                            raw={**usage.raw, "stopped": True})
        response = ModelResponse(message=message or AgentMessage(role="assistant", content=""),
                                 usage=usage, stop_reason="stopped", model=request.model)
        self.reservation_open = True  # the transport left it open whichever call this was
        self._write(messages=[(message, STOPPED_KIND)] if message is not None else [],
                    usages=[self._usage(usage, request, response, "turn")])

    def reply_failed(self, error: TransportError, *, request: ModelRequest,
                     kind: str) -> list[AgentMessage]:
        """A provider call failed (agents.EventSink): the text the user saw
        (``error.partial``) is kept as an assistant message marked ``kind``, and every
        attempt the provider billed though it failed (``error.billed``) gets its usage record
        (settling the call's budget reservation, which accounts/budgets.py left open), in ONE
        write. Once per error (``error.kept``): the loop keeps a call's failure where it
        happens and the runner calls this again for a failure the loop did not see (the
        finalizer's). Returns the stored messages ([] and no write when there is nothing
        to keep or it was kept)."""
        if error.kept:
            return []
        error.kept = True
        shown = error.partial
        billed = self._billed(error.billed, request)
        if not shown and not billed:
            return []
        if billed:
            self.reservation_open = True  # the transport left it open for this write
        return self._write(messages=[(AgentMessage(role="assistant", content=shown), kind)]
                           if shown else [], usages=billed)

    def _billed(self, billed, request: ModelRequest) -> list:
        """``_usage`` of each billed failed attempt (agents.messages.BilledAttempt), its usage
        as the provider reported it before the failure, priced at its route."""
        return [self._usage(b.usage, request, ModelResponse(
            message=AgentMessage(role="assistant", content=""), usage=b.usage,
            stop_reason="failed", model=b.model, provider=b.provider, credential=b.credential),
            "turn") for b in billed]

    def lease_fresh(self) -> bool:
        """A guarded write renewed the turn lease less than a third of LEASE_SECONDS ago:
        the lease is provably ours until then + LEASE_SECONDS (nobody takes an unexpired
        lease; the margin absorbs clock skew between workers), so checking it again would
        be a query that cannot fail."""
        renewed = self.lease_renewed_at
        return (renewed is not None and self.lease_seconds is not None
                and time.monotonic() - renewed < self.lease_seconds / 3)

    def fresh_calls(self, call_ids, *, seen: set[str] | None) -> bool:
        """True when every id of ``call_ids`` came from a reply this sink stored, once, and
        none is among ``seen`` (the call ids of the history the run started from; None:
        unknown → False). Such calls were emitted by a model call of this run: nothing can
        have announced or ledgered them yet, so the runner need not ask the database."""
        if seen is None:
            return False
        return all(self._reply_call_ids[cid] == 1 and cid not in seen for cid in call_ids)

    def turn_started(self, payload: dict, message: AgentMessage | None, *,
                     served_after: int | None = None, start_turn: TurnStart | None = None
                     ) -> tuple[AgentMessage | None, StartFacts | None]:
        """Announce ``turn.started`` (``payload``) and store the turn's user ``message``
        (None: a resumed turn, whose message is stored) after it, in one write under the
        lease; returns the stored message and the session's StartFacts as that write read
        them (``served_after``: the kept copy's turn id, sessions/writes.py; None facts
        where the write could not read them: the caller queries). ``start_turn``: mark the
        turn running in the same write (StartFacts.turn_started says whether it was).
        Raises LeaseLost."""
        stored = self._write(messages=[(message, "")] if message is not None else [],
                             head_events=[("turn.started", payload)],
                             start_facts=True, served_after=served_after,
                             start_turn=start_turn)
        return (stored[0] if stored else None), self._start_facts

    def _write(self, *, messages=(), events=(), usages=(), guarded: bool = True,
               relaxed: bool = False, head_events=(), start_facts: bool = False,
               served_after: int | None = None, start_turn: TurnStart | None = None):
        """One transaction (sessions/writes.py): the buffered text as a text.delta event,
        ``usages`` (each from ``_usage``), the messages with their events (tool results carry the
        metadata and the call gathered for them), ``events``; returns the stored messages
        as agent values. Raises LeaseLost (after storing the lease-free part)."""
        entries = []
        for message, kind in messages:
            gathered = self.tool_meta.pop(message.tool_call_id, None) \
                if message.tool_call_id else None
            row = message_row(session=self.session, message=message, kind=kind,
                              tool_meta=gathered)
            extra = {}
            call = self._calls.pop(row.tool_call_id, None) if row.role == "tool" else None
            if call is not None:  # so the card's summary can say what the call did
                extra["tool_call"] = call
            entries.append(Entry(row=row, extra=extra,
                                 event_type="tool.result" if row.role == "tool"
                                 else "message.added"))
        free = []
        text = self._take_text()
        self._reply_open = False  # anything else announced ends the reply: the next delta opens one
        if text:
            free.append(("text.delta", {"turn_id": self.turn.pk, "text": text}))
        free += [("usage", payload) for _, payload in usages]
        renew = self.lease_seconds if guarded else None
        read_at = time.monotonic()  # the flags the write returns are no older than this
        settle = None
        if usages and self.reservation_open:
            def settle(lease_ok: bool) -> None:  # same transaction as the usage row
                MONEY.reservations_settle(session_id=self.session.pk)
        written = transcript_write(
            session=self.session, owner=self.owner if guarded else None,
            turn_id=self.turn.pk, entries=entries, free_events=free, events=list(events),
            columns=self.columns if guarded else None, renew_seconds=renew,
            before_commit=settle, relaxed_commit=relaxed, head_events=list(head_events),
            usage_rows=[record for record, _ in usages], start_facts=start_facts,
            served_after=served_after, start_turn=start_turn)
        self._start_facts = written.start  # read by turn_started, right after
        if usages:
            self.reservation_open = True  # the next call's transport says again
        if guarded:
            self.columns = {}
            if renew is not None:
                self.lease_renewed_at = time.monotonic()
            if written.steer is not None:
                self._steer_seen = (written.steer, read_at)
                self._bypass_seen = (written.bypass, read_at)
                # The stop flag too: should_stop needs no SELECT for the next 250 ms.
                self._stop = self._stop or written.stop
                self._last_stop_check = max(self._last_stop_check, read_at)
        return [message_to_agent(r) for r in written.rows]

    def _store(self, message: AgentMessage, kind: str = "", meta: dict | None = None,
               extra: dict | None = None):
        """Insert one row and its event (inside the caller's lease-validated transaction).
        ``meta``: display metadata (else the one gathered in ``tool_meta``); ``extra``: more
        keys for the event payload."""
        gathered = self.tool_meta.pop(message.tool_call_id, None) if message.tool_call_id \
            else None
        row = _insert(session=self.session, message=message, kind=kind,
                      tool_meta=meta or gathered)
        event_type = "tool.result" if row.role == "tool" else "message.added"
        payload = {"turn_id": self.turn.pk, "message": message_to_display(row), **(extra or {})}
        call = self._calls.pop(row.tool_call_id, None) if row.role == "tool" else None
        if call is not None:  # so the card's summary can say what the call did
            payload["tool_call"] = call
        event_append(session_id=self.session.pk, type=event_type, payload=payload)
        return row

    def text_delta(self, text: str) -> None:
        """Gather ``text`` (one streamed piece of a reply); write the batch when the window
        (HERMES["DELTA_BATCH_MS"]) since the last write has passed, checked as deltas
        arrive. The first delta of a reply is written at once when HERMES
        ["FIRST_DELTA_FLUSH"] is on; off, the first window starts at that delta."""
        if not text:
            return
        now = time.monotonic()
        with self._lock:
            self._buffer.append(text)
            if not self._reply_open:
                self._reply_open = True
                if not self._first_flush:
                    self._last_flush = now  # the reply's first window starts here
                due = self._first_flush or self._window <= 0
            else:
                due = now - self._last_flush >= self._window
        if due:
            self.flush()

    def _reply_end(self) -> None:
        """Something other than text is announced: write the gathered text first, and let
        the next delta open a new reply."""
        self.flush()
        self._reply_open = False

    def flush(self) -> None:
        """Write the gathered text deltas as one text.delta event (no-op when empty); the
        write also reads the stop flag, so should_stop needs no poll while text streams."""
        text = self._take_text()
        if not text:
            return
        read_at = time.monotonic()  # the flag is read no earlier than this
        _, stop = delta_append(session_id=self.session.pk, turn_id=self.turn.pk, text=text)
        self._stop = self._stop or stop
        self._last_stop_check = max(self._last_stop_check, read_at)

    def _take_text(self) -> str:
        """The gathered text deltas, emptied ("" when none): written by ``flush`` alone or
        by the next write (``_write``) as its first event, so the order on the wire is the
        order things happened."""
        with self._lock:
            if not self._buffer:
                return ""
            text, self._buffer = "".join(self._buffer), []
            self._last_flush = time.monotonic()
        return text

    def tool_called(self, call: ToolCall, *, read_only: bool = False) -> None:
        """Announce that ``call`` starts now: ``tools_called`` with one call."""
        self.tools_called([call], read_only=[read_only])

    def tools_called(self, calls: list[ToolCall], *, read_only: list[bool]) -> None:
        """Announce that ``calls`` (one segment of the dispatch: they start together) start
        now, in one write under the lease: a worker whose lease expired (and whose turn
        another worker resumed) cannot start a call the other will run too. ``read_only``
        (per call, what its tool declares): when every call is a read the commit may be
        relaxed (sessions/writes.py). Raises LeaseLost."""
        ended, self._ended = self._ended, []
        self._write(events=[*ended, *(("tool.called", {"turn_id": self.turn.pk,
                                                       "tool_call": call.to_dict()})
                                      for call in calls)],
                    relaxed=all(read_only) and settings.HERMES["RELAXED_READ_ONLY_COMMITS"])
        for call in calls:
            self._calls[call.id] = call.to_dict()

    def tool_ended(self, call: ToolCall, output) -> None:
        """``call`` finished with ``output`` (agents.tools.ToolOutput): its card may say so
        before the batch's results are stored. The ``tool.ended`` event (call id and name,
        is_error, the metadata a card's status reads) rides on the next segment's
        announcement, so a reply's sequential steps turn done one by one at no extra commit
        (a fresh user saw three finished steps say "running" until the last one ended)."""
        meta = {k: output.metadata[k] for k in CARD_STATUS_META if k in output.metadata}
        self._ended.append(("tool.ended", {"turn_id": self.turn.pk, "tool_call_id": call.id,
                                           "name": call.name, "is_error": output.is_error,
                                           "tool_meta": meta}))

    def tool_finished(self, call: ToolCall, content: str, is_error: bool, *,
                      read_only: bool = False) -> None:
        """Ledger the output of a call that just finished, before it reaches the transcript
        (no lease needed: the side effect has happened whoever holds the lease now).
        ``read_only``: the commit may be relaxed (sessions/writes.py)."""
        entry = ToolResultLedger(
            session=self.session, turn=self.turn, call_id=call.id, tool_name=call.name,
            arguments=call.arguments or "{}", content=content, is_error=is_error)
        if not (read_only and settings.HERMES["RELAXED_READ_ONLY_COMMITS"]) \
                or connection.in_atomic_block:
            entry.save(force_insert=True)
            return
        with transaction.atomic():
            relax_commit(connection)
            entry.save(force_insert=True)

    def usage_recorded(self, usage: Usage | None, request: ModelRequest,
                       response: ModelResponse, *, purpose: str = "turn") -> None:
        """One UsageRecord per provider call (four disjoint buckets + raw), priced now
        (accounts/pricing.py) and written in ONE transaction with the settlement of the
        call's budget reservation and the usage event carrying the dollars (no lease
        needed: the call was billed whoever holds the lease now)."""
        self._write(usages=[self._usage(usage, request, response, purpose)], guarded=False)

    def _usage(self, usage: Usage | None, request: ModelRequest, response: ModelResponse,
               purpose: str):
        """(the unsaved UsageRecord, usage event payload) of one provider call; the turn's
        usage totals are counted now."""
        # A transport's own estimate (a cut chat-completions stream, openai_chat.cut_usage)
        # is flagged like the sink's: neither is a count the provider reported.
        estimated = usage is None or usage.raw.get("estimated") is True
        if usage is None:  # never let spend silently drop a call (B28): estimate, flagged
            usage = estimated_usage(request, response, self.estimate)
        provider = response.provider or self.session.provider
        model = response.model or request.model
        served = served_label(provider, model, response.credential)
        now = timezone.now()
        # Priced at the route that served the call (a fallback may be another provider).
        cost, columns = MONEY.cost_fields(provider=provider, model=model, at=now,
                                          buckets=buckets_of_usage(usage))
        record = UsageRecord(
            session=self.session, turn=self.turn, user_id=self.session.owner_id,
            team_id=self.session.team_id, provider=provider, credential=response.credential,
            model=model, purpose=purpose, estimated=estimated,
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_5m_tokens=usage.cache_write_5m_tokens,
            cache_write_1h_tokens=usage.cache_write_1h_tokens,
            reasoning_tokens=usage.reasoning_tokens, estimated_prompt_tokens=self.estimate,
            raw=usage.raw, created_at=now, **columns,
            cost_flagged=cost.usd is None and MONEY.has_budgets(self.session),
        )


        usage_totals_add(self.usage_total, input_tokens=usage.input_tokens,
                         output_tokens=usage.output_tokens,
                         cache_read=usage.cache_read_tokens,
                         cache_write=usage.cache_write_tokens, served=served, cost=cost.usd,
                         unknown=cost.unknown_reason)
        return record, {
            "turn_id": self.turn.pk, "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens, "prompt_tokens": usage.prompt_tokens,
            "estimated": estimated, "provider": provider, "credential": response.credential,
            "served_by": served,
            "cost_usd": None if cost.usd is None else str(cost.usd),
            "cost_unknown": cost.unknown_reason,
        }

    def steer_pending(self) -> bool:
        """A correction waits to land in this turn (sessions/steer.py; asked at safe points
        only). Every safe point follows a guarded write (the reply, a segment's
        announcement, the batch's results), whose UPDATE already answered the question:
        that answer is used while it is younger than STOP_CHECK_SECONDS, else one query."""
        seen = self._steer_seen
        if seen is not None and time.monotonic() - seen[1] < STOP_CHECK_SECONDS:
            return seen[0]
        return steers_waiting(session=self.session)

    def bypass_seen(self) -> bool | None:
        """The session's approval bypass flag as a guarded write read it less than
        STOP_CHECK_SECONDS ago (the reply's write, just before its calls are gated), else
        None (the gate reads the row)."""
        seen = self._bypass_seen
        if seen is not None and time.monotonic() - seen[1] < STOP_CHECK_SECONDS:
            return seen[0]
        return None

    def tools_ran(self) -> None:
        """A segment's calls have run: what the last write saw about corrections is older
        than that work, so the next safe point (between two segments) asks the database."""
        self._steer_seen = None

    def steer_land(self, build) -> list[AgentMessage]:
        """Land the waiting corrections: see sessions/steer.py steers_land. Raises LeaseLost."""
        self._steer_seen = None  # claimed below: the last write's answer is spent
        self._reply_end()
        return steers_land(session=self.session, turn=self.turn, owner=self.owner,
                           build=build, store=self._store)

    def should_stop(self) -> bool:
        """True once the user pressed stop. The flag answered is at most STOP_CHECK_SECONDS
        (0.25 s) old: the one the last text.delta write read (``flush``), else a SELECT;
        while text streams (a write every ~50 ms) no SELECT is made."""
        if self._stop:
            return True
        now = time.monotonic()
        if now - self._last_stop_check >= STOP_CHECK_SECONDS:
            self._last_stop_check = now
            try:
                # "or": a delta write on the loop's thread may have read True meanwhile.
                self._stop = self._stop or Session.objects.filter(
                    pk=self.session.pk, stop_requested=True).exists()
            except (OperationalError, InterfaceError):
                # Polled from a running tool too: a dropped connection must not fail the
                # command. Reconnect on the next poll; the turn's own next write notices.
                connection.close()
        return self._stop


def ledger_for(*, session: Session, calls) -> dict[LedgerKey, LedgerEntry]:
    """The ledger entries matching ``calls`` (latest per key), each marked ``claimed`` when
    a stored tool result with that call id already exists in the session."""
    ids = {c.id for c in calls}
    if not ids:
        return {}
    answered = set(Message.objects.filter(session=session, role="tool", tool_call_id__in=ids)
                   .values_list("tool_call_id", flat=True))
    wanted = {ledger_key(c) for c in calls}
    found: dict[LedgerKey, LedgerEntry] = {}
    for row in ToolResultLedger.objects.filter(session=session, call_id__in=ids).order_by("id"):
        key = (row.call_id, row.tool_name, row.arguments or "{}")
        if key in wanted:
            found[key] = LedgerEntry(content=row.content, is_error=row.is_error,
                                     claimed=row.call_id in answered)
    return found


def started_call_ids(*, session: Session, ledgered: bool = False,
                     among: set[str] | None = None) -> set[str]:
    """Call ids announced as started (``tool.called`` events) that have no stored tool
    result and (unless ``ledgered``) no ledger entry: they began and their outcome is
    unknown (issue 10 defect 3; B01). ``ledgered=True`` keeps the ones the ledger answers
    (for the wire repair, which must say "interrupted", never "not executed").
    ``among``: only these call ids are asked about (the database filters the events by
    call id instead of this process decoding every ``tool.called`` payload of the
    session); None asks about all."""
    if among is not None and not among:
        return set()
    events = RunEvent.objects.filter(session=session, type="tool.called")
    if among is not None:
        events = events.filter(payload__tool_call__id__in=sorted(among))
    announced = {p["tool_call"]["id"] for p in events.values_list("payload", flat=True)
                 if isinstance(p, dict) and isinstance(p.get("tool_call"), dict)}
    if not announced:
        return set()
    done = set(Message.objects.filter(session=session, role="tool",
                                      tool_call_id__in=announced)
               .values_list("tool_call_id", flat=True))
    if not ledgered:
        done |= set(ToolResultLedger.objects.filter(session=session, call_id__in=announced)
                    .values_list("call_id", flat=True))
    return announced - done
