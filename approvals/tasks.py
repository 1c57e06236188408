"""Celery tasks of the approval gate: only the periodic expiry sweep (fail-closed).

Scheduled every 15 s by CELERY_BEAT_SCHEDULE["approvals-expire"]; the runner also expires
lazily before a resume. Resumes are sessions/tasks.py's turn_run_task, not here.
"""

from __future__ import annotations

from celery import shared_task


@shared_task(name="approvals.expire_task")
def approval_expire_task() -> int:
    """Expire every overdue pending approval; returns how many expired."""
    from approvals.services import approval_expire_due

    return approval_expire_due()
