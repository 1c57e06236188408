"""Child agents on the database: spawn, wait, join, stop, and what the UI shows of them.

The decisions (toolset, prompt, summary budget, spill) are agents/tools/delegate.py's; this
module only stores and fetches (issue 12 item 1-2; seed "Delegation: a child that starts
empty").

- ``children_spawn`` (called by the runner, inside the transaction that saves the parent's
  turn as AWAITING_CHILDREN): one Session per child (``parent`` set, same owner and team,
  fresh history, its pinned toolset), one queued Turn each (origin "child", or the parent
  turn's origin when that turn is unattended), one ChildTask row, and the child's worker
  enqueued on commit. Each child session is its own lineage root, so it leases
  independently of the parent (sessions/leases.py) and children of a batch run at once.
- ``child_turn_ended`` (a turn-ended hook, sessions/waits.py): inside the transaction that
  ended a child's turn, lock the parent's turn row; the child that finds all its siblings
  ended writes the delegate call's tool result to the parent's ledger and resumes the
  parent on commit. Two children finishing together serialise on that lock, and the later
  one sees the earlier one's committed status, so exactly one of them joins.
- The AWAITING_CHILDREN Wait: pending while any child's turn has not ended; cancel (Stop on
  the parent) stops every child that has not ended.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.urls import reverse

from agents.tools import ToolContext
from agents.tools.delegate import (DEFAULT_MAX_DEPTH, ChildOutcome, DelegationContext,
                                   DelegationRequest, delegate_result)
from agents.messages import ToolCall
from sessions.events import event_append
from sessions.models import ChildTask, Message, Session, ToolResultLedger, Turn, UsageRecord
from sessions.services import turn_stop, workspace_path
from sessions.visible import visible_text
from sessions.waits import Wait, turn_ended_register, turn_resume_on_commit, wait_register

ENDED_STATUSES: tuple[str, ...] = (Turn.Status.COMPLETED, Turn.Status.FAILED,
                                   Turn.Status.CANCELLED, Turn.Status.BUDGET_BLOCKED)
"""A child whose turn is in one of these has ended (a budget-blocked child reports that
instead of holding its parent until someone raises the budget)."""

MAX_DEPTH_WALK = 16


def session_depth(session: Session) -> int:
    """0 for a session a person started, 1 for its children, and so on."""
    depth, parent_id = 0, session.parent_id
    while parent_id is not None and depth < MAX_DEPTH_WALK:
        depth += 1
        parent_id = Session.objects.filter(pk=parent_id).values_list("parent_id",
                                                                      flat=True).first()
    return depth


def delegation_context(ctx) -> DelegationContext:
    """The DelegationContext of one turn (``ctx``: sessions.runner.TurnContext): the
    session's pinned tools, its depth, the configured spawn depth and child iteration
    budget, the model window and the prompt size of the last request (tokens: the billed
    count when known, else the estimate)."""
    hermes = settings.HERMES
    pipeline = ctx.__dict__.get("pipeline")
    used = 0
    if pipeline is not None:
        if pipeline.last_billed is not None:
            used = pipeline.last_billed[1]
        elif pipeline.input_hint:
            used = pipeline.input_hint
    return DelegationContext(
        parent_tools=tuple(ctx.session.tool_names or ()), depth=session_depth(ctx.session),
        max_depth=int(hermes.get("DELEGATION_MAX_DEPTH", DEFAULT_MAX_DEPTH)),
        context_window=ctx.profile.context_window, context_used=used,
        max_iterations=int(hermes.get("CHILD_MAX_ITERATIONS", 50)))


def children_spawn(*, parent_session: Session, parent_turn: Turn, call: ToolCall,
                   request: DelegationRequest) -> list[ChildTask]:
    """Create the children of one delegate call (inside the caller's transaction; see the
    module docstring). Idempotent per (parent turn, call id, index): a child already
    created is returned, not created again. Returns the ChildTask rows in batch order."""
    origin = parent_turn.origin if parent_turn.unattended else "child"
    rows = []
    for index, spec in enumerate(request.children, 1):
        existing = ChildTask.objects.filter(parent_turn=parent_turn, call_id=call.id,
                                            index=index).first()
        if existing is not None:
            rows.append(existing)
            continue
        child = Session.objects.create(
            owner_id=parent_session.owner_id, team_id=parent_session.team_id,
            title=f"Child {index} of #{parent_session.pk}: {' '.join(spec.goal.split())}"[:200],
            provider=parent_session.provider, model=parent_session.model,
            parent=parent_session, tool_names=list(spec.tool_names))
        turn = Turn.objects.create(session=child, input_text=spec.prompt, origin=origin)
        rows.append(ChildTask.objects.create(
            parent_session=parent_session, parent_turn=parent_turn, call_id=call.id,
            call_arguments=call.arguments or "{}", index=index, goal=spec.goal,
            context=spec.context, child=child, turn=turn,
            summary_budget=spec.summary_budget))
        event_append(session_id=child.pk, type="turn.queued",
                     payload={"turn_id": turn.pk, "text": spec.prompt[:2000]})
        turn_resume_on_commit(child.pk)
    return rows


def child_iterations(session: Session) -> int:
    """The iteration budget of a child session (HERMES CHILD_MAX_ITERATIONS, default 50)."""
    return int(settings.HERMES.get("CHILD_MAX_ITERATIONS", 50))


def _final_reply(child_id: int) -> str:
    last = (Message.objects.filter(session_id=child_id, role=Message.Role.ASSISTANT,
                                   active=True).order_by("-id").first())
    return last.content if last is not None else ""


def child_turn_ended(turn_id: int) -> None:
    """Turn-ended hook: if ``turn_id`` is a child's turn, tell the parent, and when it was
    the last of its batch to end, ledger the delegate call's result and resume the parent
    (see the module docstring). Runs inside the transaction that ended the turn."""
    task = ChildTask.objects.filter(turn_id=turn_id).first()
    if task is None:
        return
    # Lock order: the parent's Session row (its lineage root, which turn_stop and every
    # transcript writer lock first), then its turn. Siblings ending together serialise here.
    list(Session.objects.select_for_update().filter(pk=task.parent_session_id)
         .values_list("pk", flat=True))
    parent_turn = Turn.objects.select_for_update().filter(pk=task.parent_turn_id).first()
    event_append(session_id=task.parent_session_id, type="child.updated",
                 payload={"turn_id": task.parent_turn_id, "call_id": task.call_id,
                          "child_id": task.child_id, "index": task.index})
    if parent_turn is None or parent_turn.status != Turn.Status.AWAITING_CHILDREN:
        return  # the parent was stopped: nothing to deliver
    siblings = list(ChildTask.objects.filter(parent_turn=parent_turn, call_id=task.call_id)
                    .order_by("index"))
    status = dict(Turn.objects.filter(pk__in=[s.turn_id for s in siblings])
                  .values_list("pk", "status"))
    if any(status.get(s.turn_id) not in ENDED_STATUSES for s in siblings):
        return
    if ToolResultLedger.objects.filter(session_id=task.parent_session_id,
                                       call_id=task.call_id, tool_name="delegate").exists():
        return  # already joined (a redelivered end)
    errors = dict(Turn.objects.filter(pk__in=status).values_list("pk", "error"))
    calls = dict(UsageRecord.objects.filter(turn_id__in=status).values("turn_id")
                 .annotate(n=Count("id")).values_list("turn_id", "n"))
    outcomes = [ChildOutcome(index=s.index, goal=s.goal, status=status[s.turn_id],
                             summary=_final_reply(s.child_id), error=errors[s.turn_id],
                             iterations=calls.get(s.turn_id, 0),
                             summary_budget=s.summary_budget) for s in siblings]
    parent = Session.objects.get(pk=task.parent_session_id)
    text = delegate_result(outcomes, ctx=ToolContext(workspace=workspace_path(parent)),
                           call_id=task.call_id)
    ToolResultLedger.objects.create(
        session=parent, turn=parent_turn, call_id=task.call_id, tool_name="delegate",
        arguments=task.call_arguments, content=text,
        is_error=not any(o.status == Turn.Status.COMPLETED for o in outcomes))
    event_append(session_id=parent.pk, type="children.finished",
                 payload={"turn_id": parent_turn.pk, "call_id": task.call_id,
                          "children": [s.child_id for s in siblings]})
    turn_resume_on_commit(parent.pk)


def _children_pending(turn: Turn) -> bool:
    """The wait's predicate: some child of ``turn`` has not ended."""
    return (ChildTask.objects.filter(parent_turn=turn)
            .exclude(turn__status__in=ENDED_STATUSES).exists())


def _children_cancel(session: Session) -> int:
    """Stop on the parent: stop every child of its waiting turns that has not ended (a
    running child is asked to stop; a waiting or queued one is cancelled by turn_stop).
    Each child is stopped in its own transaction once the parent's Stop commits: the
    parent's transaction then never holds its own row while waiting for a child's, the
    reverse of the order a finishing child takes them in (no deadlock). Returns how many
    children will be stopped."""
    tasks = list(ChildTask.objects.filter(parent_session=session,
                                          parent_turn__status=Turn.Status.AWAITING_CHILDREN)
                 .exclude(turn__status__in=ENDED_STATUSES).select_related("child"))
    for task in tasks:
        transaction.on_commit(lambda child=task.child: turn_stop(session=child), robust=True)
    return len(tasks)


def descendant_ids(session: Session) -> list[int]:
    """Ids of every session delegated from ``session``, at any depth (breadth first)."""
    found: list[int] = []
    level = [session.pk]
    for _ in range(MAX_DEPTH_WALK):
        level = list(Session.objects.filter(parent_id__in=level).values_list("pk", flat=True))
        if not level:
            break
        found += level
    return found


def children_cost(session: Session) -> dict:
    """Selector: the spend of every session delegated from ``session`` (any depth):
    {"cost_usd": Decimal (known costs), "unknown": calls with unknown cost, "tokens": int,
    "children": int}."""
    ids = descendant_ids(session)
    agg = UsageRecord.objects.filter(session_id__in=ids).aggregate(
        cost=Sum("cost_usd"), unknown=Count("id", filter=Q(cost_usd__isnull=True)),
        tokens=Sum("input_tokens") + Sum("output_tokens") + Sum("cache_read_tokens")
        + Sum("cache_write_5m_tokens") + Sum("cache_write_1h_tokens"))
    return {"cost_usd": agg["cost"] or Decimal("0"), "unknown": agg["unknown"] or 0,
            "tokens": agg["tokens"] or 0, "children": len(ids)}


def child_cards(*, session: Session, call_id: str | None = None) -> list[dict]:
    """Selector (caller has already checked ``session`` is visible): one dict per child of
    ``session`` (optionally of one delegate call) for the child cards: index, goal (its
    hidden characters as ⟨U+202E⟩, sessions/visible.py visible_text), status,
    iterations (model calls), tokens, cost_usd (str or None when unknown), url."""
    tasks = ChildTask.objects.filter(parent_session=session).select_related("turn")
    if call_id:
        tasks = tasks.filter(call_id=call_id)
    tasks = list(tasks.order_by("parent_turn_id", "call_id", "index"))
    usage = {row["session_id"]: row for row in UsageRecord.objects.filter(
        session_id__in=[t.child_id for t in tasks]).values("session_id").annotate(
        n=Count("id"), cost=Sum("cost_usd"), unknown=Count("id", filter=Q(cost_usd__isnull=True)),
        tokens=Sum("input_tokens") + Sum("output_tokens") + Sum("cache_read_tokens")
        + Sum("cache_write_5m_tokens") + Sum("cache_write_1h_tokens"))}
    cards = []
    for task in tasks:
        row = usage.get(task.child_id, {})
        cost = row.get("cost")
        cards.append({
            "child_id": task.child_id, "call_id": task.call_id, "index": task.index,
            # Display only (static/child_cards.js): the model's text, hidden characters
            # as visible escapes (sessions/visible.py); the child got the goal as written.
            "goal": visible_text(task.goal), "status": task.turn.status,
            "status_label": task.turn.get_status_display(),
            "ended": task.turn.status in ENDED_STATUSES, "iterations": row.get("n", 0),
            "tokens": row.get("tokens") or 0,
            "cost_usd": None if (row.get("unknown") or cost is None and row.get("n"))
            else str(cost or Decimal("0")),
            "url": reverse("session_detail", args=[task.child_id])})
    return cards


wait_register(Wait(status=Turn.Status.AWAITING_CHILDREN, pending=_children_pending,
                   cancel=_children_cancel))
turn_ended_register(child_turn_ended, children_only=True)
