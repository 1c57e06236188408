"""What sessions/ needs from the apps above it, as hooks those apps fill in at ready().

Imports point down (issue 11 item 2; docs/architecture.md): agents ← sessions ← approvals ←
accounts. sessions/ still needs a few answers only an upper app has (an approval's state,
a team's admins, the price of a call). It declares each here as a typed callable with a
fail-closed default, and the owning app registers the real one in its AppConfig.ready()
(``approvals_register`` in approvals/apps.py, ``teams_register`` and ``money_register`` in
accounts/apps.py). The waits a turn can be saved in have their own registry
(sessions/waits.py), and so does the embedded worker a CLI turn needs (HERMES
["EMBEDDED_START"], a dotted path set by hermes_web/settings.py).

Defaults when an app is not installed (a bare test settings module): no team, no admin, no
budget, unknown cost; approvals raise RuntimeError, because a gate without state must not
run a tool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agents.policy.context import GateState


def _missing(what: str) -> Callable[..., Any]:
    def fail(*args, **kwargs):
        raise RuntimeError(f"{what}: the approvals app did not register its hooks")
    return fail


@dataclass
class ApprovalHooks:
    """Filled by approvals/apps.py.

    gate_state(session=, turn=, bypass=None, decisions_from=None) -> GateState: the durable
      approval state of a turn (``bypass``: the session's flag as the caller just read it;
      None: read it; ``decisions_from``: this run's earlier state, whose decisions hold).
    requests_create(session=, turn=, pending=, workspace=) -> list of rows: store the
      ApprovalRequests of calls the policy asked about (each row has ``pk``).
    rule_hit(rule_id) -> None: count one call an "always" rule let through.
    audit(action=, session=, detail=) -> None: one AuditEntry without an actor.
    event_html(user=, payload=) -> str: an approval card for a live approval event.
    states(session) -> {tool_call_id: state}: the latest approval state of each call.
    cards_html(session, user, request) -> list[str]: the pending approval cards of a page.
    """

    gate_state: Callable[..., GateState] = field(default=_missing("gate_state"))
    requests_create: Callable[..., list] = field(default=_missing("requests_create"))
    rule_hit: Callable[[int], None] = lambda rule_id: None
    audit: Callable[..., None] = field(default=_missing("audit"))
    event_html: Callable[..., str] = lambda *, user, payload: ""
    states: Callable[[Any], dict[str, str]] = lambda session: {}
    cards_html: Callable[..., list[str]] = lambda session, user, request=None: []


@dataclass
class TeamHooks:
    """Filled by accounts/apps.py (Team and Membership live there).

    admin_team_ids(user) -> list[int]: teams in which ``user`` is an admin.
    team_ids(user_id) -> list[int]: every team ``user_id`` belongs to.
    team_admin_ids(team_id) -> set[int]: user ids of that team's admins.
    team_default(user) -> Team | None: the team a new session of ``user`` belongs to.
    deny_rules(user_id, team_id) -> tuple[str, ...]: the deny patterns of the teams
    ``user_id`` belongs to and of ``team_id`` (None: none), oldest team first.
    admin_only_classes(user_id) -> dict[str, str]: risk class -> name of the first team of
    ``user_id`` that reserves it for its admins (what governs the member's sessions that
    belong to no team).
    team_rules(user_id, team_id) -> (deny_rules(...), admin_only_classes(...)): both in one
    round trip (asked before every batch of tool calls).
    """

    admin_team_ids: Callable[[Any], list[int]] = lambda user: []
    team_ids: Callable[[int], list[int]] = lambda user_id: []
    team_admin_ids: Callable[[int], set[int]] = lambda team_id: set()
    team_default: Callable[[Any], Any] = lambda user: None
    deny_rules: Callable[[int, int | None], tuple[str, ...]] = lambda user_id, team_id: ()
    admin_only_classes: Callable[[int], dict[str, str]] = lambda user_id: {}
    team_rules: Callable[[int, int | None], tuple[tuple[str, ...], dict[str, str]]] = (
        lambda user_id, team_id: ((), {}))


@dataclass(frozen=True)
class UnknownCost:
    """The cost of a call nobody can price (no pricing app installed)."""

    usd: Decimal | None = None
    unknown_reason: str = "no pricing installed"


@dataclass
class MoneyHooks:
    """Filled by accounts/apps.py (budgets, prices, spend).

    budgeted(transport, session=, on_warning=) -> transport: wrap a session's provider
      transport in the spend caps (identity when accounts is absent).
    has_budgets(session) -> bool: any budget applies to the session.
    reservations_settle(session_id=) -> None: release the session's spend reservations.
    cost_fields(provider=, model=, at=, buckets=) -> (cost, columns): price one call;
      ``cost.usd`` is a Decimal or None, ``cost.unknown_reason`` says why.
    session_costs(session_ids) -> {session_id: cost}; sessions_with_cost(queryset) -> list;
    usage_export(session) -> list[dict]; usage_reprice(since=) -> {"seen", "changed", "unknown"}.
    """

    budgeted: Callable[..., Any] = lambda transport, *, session, on_warning: transport
    has_budgets: Callable[[Any], bool] = lambda session: False
    reservations_settle: Callable[..., None] = lambda *, session_id: None
    cost_fields: Callable[..., tuple[Any, dict]] = lambda **kwargs: (UnknownCost(), {})
    session_costs: Callable[[Iterable[int]], dict] = lambda session_ids: {}
    sessions_with_cost: Callable[[Any], Any] = lambda sessions: sessions
    usage_export: Callable[[Any], list] = lambda session: []
    usage_reprice: Callable[..., dict] = lambda *, since=None: {"seen": 0, "changed": 0,
                                                                "unknown": 0}


APPROVALS = ApprovalHooks()
TEAMS = TeamHooks()
MONEY = MoneyHooks()


def approvals_register(**hooks: Callable[..., Any]) -> None:
    """Set approval hooks by name (approvals/apps.py). Raises TypeError on an unknown name."""
    _set(APPROVALS, hooks)


def teams_register(**hooks: Callable[..., Any]) -> None:
    """Set team hooks by name (accounts/apps.py). Raises TypeError on an unknown name."""
    _set(TEAMS, hooks)


def money_register(**hooks: Callable[..., Any]) -> None:
    """Set money hooks by name (accounts/apps.py). Raises TypeError on an unknown name."""
    _set(MONEY, hooks)


def _set(target: object, hooks: dict[str, Callable[..., Any]]) -> None:
    unknown = set(hooks) - set(type(target).__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown hooks for {type(target).__name__}: {sorted(unknown)}")
    for name, fn in hooks.items():
        setattr(target, name, fn)


@dataclass(frozen=True)
class DeletionHook:
    """What an app whose rows point at a session does about them when the session is
    deleted (sessions/services.py session_delete), registered at its ready().

    describe(session) -> list[str]: one sentence per row of that app that targets the
      session, saying what deletion will do to it (shown on the confirmation page; a
      non-empty answer also means the session is in use and is never reused as an empty
      "New session").
    detach(session) -> None: run inside the delete transaction before the rows go (pause a
      schedule, …); it must not commit on its own.
    """

    describe: Callable[[Any], list[str]]
    detach: Callable[[Any], None] = lambda session: None


DELETION_HOOKS: list[DeletionHook] = []
"""Registered by schedules/apps.py and webhooks/apps.py (their rows point at sessions)."""


def deletion_register(*, describe: Callable[[Any], list[str]],
                      detach: Callable[[Any], None] | None = None) -> None:
    """Register what an app does about its rows that target a deleted session."""
    hook = DeletionHook(describe=describe, detach=detach or (lambda session: None))
    if hook not in DELETION_HOOKS:
        DELETION_HOOKS.append(hook)
