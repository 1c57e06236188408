"""The database shell of agents/spend_caps.py: which budgets apply to a call, the
reservation under row locks before it, the settlement with its UsageRecord after it.

``budget_reserve`` is THE check before every provider call (chat turns, the finalizer,
compaction summaries; child agents and scheduled runs call it too): it raises
``BudgetExceeded`` or records one SpendReservation per applying budget. ``BudgetedTransport``
wraps a transport so every ``complete`` goes through it. Settlement
(``reservations_settle``) runs inside the transaction that writes the call's UsageRecord
(sessions/sink.py), so a call's cost is never both reserved and spent, nor neither.

Concurrency: the applying Budget rows are locked ``SELECT ... FOR UPDATE`` in id order
(PostgreSQL; no deadlock between two calls locking the same caps), then spend and open
reservations are summed and the reservation inserted in that same transaction, so two
calls cannot both see the same headroom. The overshoot bound is in agents/spend_caps.py.
A session has at most one provider call in flight (the lineage turn lease), so a session's
reservations are settled by session.

Teams: a session of a team is bound by that team's caps only. A session of NO team (a
personal one, or one made before its owner joined a team) is bound by the caps of EVERY team
its owner belongs to, the rule the approvals already follow for admin-only risk classes
(accounts/teams.py ``team_rules``): otherwise a member of a capped team spends past the cap
by starting a personal session. Its calls lock and reserve under those team budgets exactly
as a team session's do (one SpendReservation per applying Budget row, taken under that row's
lock), so a teamless turn and a team turn racing for the last headroom serialise on the same
row, and its spend counts in the team's total (accounts/spend.py ``team_usage``, the one
definition ``budget_spent`` and /spend/ share).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounts.models import Budget, Membership, SpendReservation, Team
from accounts.pricing import rate_overrides_load
from accounts.spend import team_usage
from agents.errors import TransportError, TurnCancelled
from agents.messages import ModelRequest
from agents.pricing import rates_resolve
from agents.spend_caps import (
    RESERVATION_TTL_SECONDS, BudgetExceeded, Cap, cap_decide, period_end, period_start,
    warning_text, worst_case_usd)
from agents.context.tokens import estimate_payload_tokens
from sessions.models import Session, UsageRecord
from sessions.selectors import LINEAGE_WALK_MAX, session_descendants

WAIT_POLL_SECONDS = 0.2


@dataclass
class Admission:
    """What ``budget_reserve`` did: the caps checked and the warnings (80%) raised."""

    caps: list[Cap] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reserved_usd: Decimal | None = Decimal(0)




def session_ancestors(session) -> list[int]:
    """``session``'s id and those of the sessions that delegated to it, nearest first
    (child agents have ``parent`` set, sessions/delegation.py)."""
    ids, parent_id = [session.pk], session.parent_id
    while parent_id is not None and len(ids) <= LINEAGE_WALK_MAX:
        ids.append(parent_id)
        parent_id = Session.objects.filter(pk=parent_id).values_list(
            "parent_id", flat=True).first()
    return ids


def _budgets_sql() -> tuple[str, str, str]:
    """budgets_for's SQL, built once from the models' columns: every Budget column and the
    team's name (``team_name``) of the budgets in scope %s of user %s, in scope %s of the
    sessions ``{sessions}``, or in scope %s of ``{team}`` (the session's team, or every team
    the owner belongs to), in id order; with the two ``{team}`` fragments."""
    meta, tmeta, mmeta = Budget._meta, Team._meta, Membership._meta
    col = {f.name: f.column for f in meta.concrete_fields}
    mcol = {f.name: f.column for f in mmeta.concrete_fields}
    select = ", ".join(f'b."{c}"' for c in col.values())
    scope = f'b."{col["scope"]}"'
    sql = (f'SELECT {select}, t."{tmeta.get_field("name").column}" AS team_name '
           f'FROM "{meta.db_table}" b LEFT JOIN "{tmeta.db_table}" t '
           f'ON t."{tmeta.pk.column}" = b."{col["team"]}" '
           f'WHERE ({scope} = %s AND b."{col["user"]}" = %s) '
           f'OR ({scope} = %s AND b."{col["session"]}" IN ({{sessions}})) '
           f'OR ({scope} = %s AND b."{col["team"]}" {{team}}) ORDER BY b."{meta.pk.column}"')
    teams_of_owner = (f'IN (SELECT "{mcol["team"]}" FROM "{mmeta.db_table}" '
                      f'WHERE "{mcol["user"]}" = %s)')
    return sql, "= %s", teams_of_owner


_BUDGETS_SQL, _TEAM_OF_SESSION, _TEAMS_OF_OWNER = _budgets_sql()


def budgets_for(session) -> list[Budget]:
    """The budgets that apply to a call of ``session``, in id order (the lock order): its
    owner's, its team's, its own, and those of the sessions that delegated to it: a
    session's cap bounds what its child agents spend too, or delegating would be a way
    around it. A session of no team gets the budgets of every team its owner belongs to
    now (the module's "Teams"; fail closed: a teamless session is never less bound than a
    team one)."""
    ancestors = session_ancestors(session)
    # Plain SQL (Budget.objects.raw): asked before the first call of every turn, and the
    # ORM's build of this OR of three scopes and a subquery cost more than its round trip
    # (issue 15 target 1). Each row carries its team's name as ``team_name``.
    sql = _BUDGETS_SQL.format(sessions=", ".join(["%s"] * len(ancestors)),
                              team=_TEAM_OF_SESSION if session.team_id else _TEAMS_OF_OWNER)
    team_param = session.team_id if session.team_id else session.owner_id
    return list(Budget.objects.raw(sql, ["user", session.owner_id, "session", *ancestors,
                                         "team", team_param]))


def budget_cap(budget: Budget, *, session_id: int | None = None,
               team_name: str | None = None) -> Cap:
    """The pure Cap of a Budget row, labelled for the reason sentence (a session budget seen
    from one of its child agents, ``session_id``, is the parent's; a team budget seen from
    a session of no team names its team, ``team_name``: the session is not visibly in it,
    and its owner may be in several capped teams)."""
    label = {"team": "team", "user": "your", "session": "this session's"}[budget.scope]
    if budget.scope == "session" and session_id not in (None, budget.session_id):
        label = "the delegating session's"
    if budget.scope == "team" and team_name:
        label = f"team {team_name}"
    return Cap(scope=budget.scope, period=budget.period, limit_usd=budget.limit_usd,
               label=label, key=budget.pk)


def budget_spent(budget: Budget, *, now) -> Decimal:
    """USD of known-cost usage in the budget's scope and current period (a session's scope:
    the session and its child agents, ``session_descendants``; a team's: ``team_usage``,
    its sessions and its members' sessions of no team, the figure /spend/ shows)."""
    start = period_start(budget.period, now)
    rows = UsageRecord.objects.filter(created_at__gte=start,
                                      created_at__lt=period_end(budget.period, now))
    if budget.scope == "session":
        rows = rows.filter(session_id__in=session_descendants(budget.session_id))
    elif budget.scope == "team":
        rows = rows.filter(team_usage(budget.team_id))
    else:
        rows = rows.filter(user_id=budget.user_id)
    return rows.aggregate(total=Sum("cost_usd"))["total"] or Decimal(0)


def budget_reserved(budget: Budget, *, now) -> Decimal:
    """USD of the worst cases of calls in flight under the budget (fresh reservations)."""
    fresh = now - timedelta(seconds=RESERVATION_TTL_SECONDS)
    return (SpendReservation.objects.filter(budget=budget, created_at__gte=fresh)
            .aggregate(total=Sum("worst_usd"))["total"] or Decimal(0))


def budget_reserve(*, session, model: str, prompt_estimate: int, max_tokens: int) -> Admission:
    """Admit or refuse one provider call of ``session`` (USD caps, agents/spend_caps.py).

    Worst case = prompt_estimate (tokens) × the dearest input-side rate + max_tokens × the
    output rate. Admitted calls leave one SpendReservation per applying budget. When the
    only thing in the way is other calls' reservations (spent is below the cap), waits up to
    HERMES["BUDGET_WAIT_SECONDS"] for them to settle before refusing. Raises BudgetExceeded
    with the readable reason. No budget → no query beyond the lookup, nothing stored."""
    budgets = budgets_for(session)
    if not budgets:
        return Admission()
    rates, _ = rates_resolve(session.provider, model, prompt_tokens=prompt_estimate,
                             overrides=rate_overrides_load())
    worst = worst_case_usd(rates, prompt_estimate=prompt_estimate, max_tokens=max_tokens)
    deadline = time.monotonic() + settings.HERMES.get("BUDGET_WAIT_SECONDS", 30)
    while True:
        outcome = _try_reserve(session, budgets, worst)
        if isinstance(outcome, Admission):
            return outcome
        reason, cap, spent_below = outcome
        if not spent_below or time.monotonic() >= deadline:
            raise BudgetExceeded(reason, cap)
        time.sleep(WAIT_POLL_SECONDS)


def _try_reserve(session, budgets: list[Budget], worst: Decimal | None):
    """One locked attempt: an Admission, or (reason, cap, spent_is_below_the_cap)."""
    now = timezone.now()
    admission = Admission(reserved_usd=worst)
    # Team names from the unlocked list: locking the rows with their team joined would
    # lock the Team rows too (SELECT ... FOR UPDATE covers every joined table).
    names = {b.pk: b.team_name for b in budgets if b.team_id}
    with transaction.atomic():
        locked = list(Budget.objects.select_for_update().filter(
            pk__in=[b.pk for b in budgets]).order_by("id"))
        for budget in locked:
            cap = budget_cap(budget, session_id=session.pk,
                             team_name=None if session.team_id else names.get(budget.pk))
            spent = budget_spent(budget, now=now)
            reserved = budget_reserved(budget, now=now)
            decision = cap_decide(cap, spent=spent, reserved=reserved, now=now,
                                  cost_known=worst is not None, policy=budget.unknown_policy,
                                  worst=worst)
            if not decision.allowed:
                return decision.reason, cap, spent < cap.limit_usd and worst is not None
            admission.caps.append(cap)
            if decision.warn:
                admission.warnings.append(warning_text(cap, spent=spent + reserved))
        SpendReservation.objects.bulk_create([
            SpendReservation(budget=b, session_id=session.pk, worst_usd=worst or Decimal(0),
                             created_at=now) for b in locked])
    return admission


def reservations_settle(*, session_id: int) -> None:
    """Drop the session's open reservations (its call has been recorded, or failed). Call
    inside the transaction that writes the call's UsageRecord."""
    SpendReservation.objects.filter(session_id=session_id).delete()


BUDGETS_REUSE_SECONDS = 2.0
"""How long one turn's transport reuses the list of budgets that apply (BudgetedTransport)."""


class BudgetedTransport:
    """A transport whose every ``complete`` is admitted by ``budget_reserve`` first. A call
    that raises settles its reservation (nothing was billed that we can price); a call that
    returns, or is stopped mid-stream (``TurnCancelled.billed``), is settled by its
    UsageRecord write. ``on_warning(text)`` receives the 80%
    warnings. Everything else is delegated to the wrapped transport. ``reserved``: whether
    the last call left reservations for its UsageRecord write to settle (False: no budget
    applied, nothing to delete)."""

    def __init__(self, inner, *, session, on_warning=None):
        self._inner = inner
        self._session = session
        self._on_warning = on_warning
        self._warned: set[str] = set()
        self.reserved = True  # unknown until a call: settle
        self._applying: tuple[float, list] | None = None

    def _budgets(self) -> list:
        """budgets_for(session), reused for BUDGETS_REUSE_SECONDS: the budgets that apply
        to a session are asked before every provider call, usually a fraction of a second
        apart within one turn. A budget an admin adds mid-turn binds from at most that many
        seconds later; its limit and spend are always read under the row locks of
        budget_reserve."""
        now = time.monotonic()
        if self._applying is None or now - self._applying[0] >= BUDGETS_REUSE_SECONDS:
            self._applying = (now, budgets_for(self._session))
        return self._applying[1]

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def complete(self, request: ModelRequest, **kwargs):
        # Cheap when no budget applies: the payload is only measured when one does.
        if not self._budgets():
            self.reserved = False
            return self._inner.complete(request, **kwargs)
        self.reserved = True
        estimate = estimate_payload_tokens(self._inner.build_payload(request))
        admission = budget_reserve(session=self._session, model=request.model,
                                   prompt_estimate=estimate, max_tokens=request.max_tokens)
        for text in admission.warnings:
            if text.split(":")[0] not in self._warned and self._on_warning is not None:
                self._warned.add(text.split(":")[0])
                self._on_warning(text)
        try:
            return self._inner.complete(request, **kwargs)
        except BaseException as exc:
            # A stop that came while the provider answered is billed, and so is a failure
            # after it began answering: the loop writes their usage, which settles the
            # reservation in the same transaction (sessions/sink.py reply_stopped,
            # reply_failed), so the cost is never neither reserved nor spent.
            billed = ((isinstance(exc, TurnCancelled) and exc.billed)
                      or (isinstance(exc, TransportError) and exc.billed))
            if admission.caps and not billed:
                reservations_settle(session_id=self._session.pk)
            raise
