"""Turns that wait without a worker: what each waiting status waits for, and the resume hook.

A turn that needs something only the outside world can give (an approval, its child agents'
results, the user's answer to a clarify question) is saved in one of WAITING_STATUSES and its
worker returns; nothing blocks. The app that owns a wait registers it here (approvals/ in its
AppConfig.ready, the delegate and clarify tools beside them), so sessions/ never imports the
apps above it (issue 11 item 2: arrows point down), and the apps above resume a turn through
``turn_resume_on_commit`` instead of importing the Celery task.

Fail closed: a turn in a waiting status whose wait nobody registered counts as still
pending, so it never resumes on missing state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessions.models import Session, Turn

WAITING_STATUSES: tuple[str, ...] = (
    Turn.Status.AWAITING_APPROVAL,
    Turn.Status.AWAITING_CHILDREN,
    Turn.Status.AWAITING_ANSWER,
)
"""Statuses of a turn saved mid-way with no worker attached; each blocks the turns behind it."""


@dataclass(frozen=True)
class Wait:
    """One kind of wait.

    pending(turn) -> True while the turn must keep waiting (called with no lease held; must
    not write). cancel(session) -> int cancels every open request of this kind for the
    session (Stop, inside the caller's transaction); returns how many it cancelled.
    expire_due() -> int settles requests past their deadline (called before a worker picks
    its next turn); returns how many it expired."""

    status: str
    pending: Callable[[Turn], bool]
    cancel: Callable[[Session], int]
    expire_due: Callable[[], int] = lambda: 0


_WAITS: dict[str, Wait] = {}
_RESUMERS: list[Callable[[int], None]] = []
_ENDED: list[tuple[Callable[[int], None], bool]] = []


def wait_register(wait: Wait) -> None:
    """Register (or replace, on a second AppConfig.ready in tests) the wait for a status.
    Raises ValueError for a status not in WAITING_STATUSES."""
    if wait.status not in WAITING_STATUSES:
        raise ValueError(f"{wait.status!r} is not a waiting status")
    _WAITS[wait.status] = wait


def resumer_register(resume: Callable[[int], None]) -> None:
    """sessions.tasks registers how a turn is resumed (enqueue on commit); once."""
    if resume not in _RESUMERS:
        _RESUMERS.append(resume)


def turn_wait_pending(turn: Turn) -> bool:
    """Is this waiting turn still waiting? Unknown or unregistered wait → True (deny)."""
    wait = _WAITS.get(turn.status)
    return True if wait is None else bool(wait.pending(turn))


def waits_cancel(session: Session) -> int:
    """Cancel every registered kind of open wait of a session (Stop). Returns the count."""
    return sum(wait.cancel(session) for wait in _WAITS.values())


def waits_expire_due() -> int:
    """Expire every registered kind of wait that is past its deadline. Returns the count."""
    return sum(wait.expire_due() for wait in _WAITS.values())


def turn_resume_on_commit(session_id: int) -> None:
    """Run the session's turns again once the caller's transaction commits (the decision
    that settled a wait is visible to the worker). Raises RuntimeError if sessions.tasks
    was never imported (no resumer: the turn would be stranded silently)."""
    if not _RESUMERS:
        raise RuntimeError("no turn resumer registered (sessions.tasks not imported)")
    for resume in _RESUMERS:
        resume(session_id)


def turn_ended_register(hook: Callable[[int], None], *, children_only: bool = False) -> None:
    """Register ``hook(turn_id)``, called inside the transaction that gave a turn its final
    status (completed, failed, cancelled, budget_blocked): sessions/delegation.py resumes a
    parent when its last child ends. ``children_only``: the hook concerns turns of child
    sessions only, and is skipped when the caller says the turn is not one. Once per hook."""
    if all(hook is not h for h, _ in _ENDED):
        _ENDED.append((hook, children_only))


def turn_ended_hooked(*, child: bool) -> bool:
    """Would ``turn_ended`` call any hook for a turn of such a session?"""
    return any(child or not children_only for _, children_only in _ENDED)


def turn_ended(turn_id: int, *, child: bool | None = None) -> None:
    """Call every turn-ended hook for ``turn_id``. Call it inside the transaction that wrote
    the final status, so a hook's writes commit (or roll back) with it. ``child``: whether
    the turn's session is a child agent (False skips the children-only hooks and their
    query; None: unknown, every hook runs)."""
    for hook, children_only in _ENDED:
        if children_only and child is False:
            continue
        hook(turn_id)
