"""The lineage turn lease (seed, "Two leases, and a hole"; hermes-facts §6).

One conditional UPDATE acquires it; every transcript write re-validates it inside its own
transaction (``lease_validate``), so a worker that lost its lease during a long turn cannot
land a row. There is no opt-out: every write path passes an owner. Held on the lineage
root's row so segments of one conversation never run twice at once.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from agents.errors import LeaseLost
from sessions.models import Session


def _root_id(session: Session) -> int:
    return session.lineage_root_id or session.pk


def lease_acquire(*, session: Session, owner: str, seconds: int) -> bool:
    """Take the lease if free, expired or already ours. Returns True on success."""
    now = timezone.now()
    return bool(Session.objects.filter(
        Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_owner=owner),
        pk=_root_id(session),
    ).update(lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds)))


def lease_renew(*, session: Session, owner: str, seconds: int) -> None:
    """Extend our lease. Raises LeaseLost if it is no longer ours."""
    now = timezone.now()
    if not Session.objects.filter(pk=_root_id(session), lease_owner=owner,
                                  lease_expires_at__gte=now).update(
            lease_expires_at=now + timedelta(seconds=seconds)):
        raise LeaseLost(f"turn lease of session {session.pk} lost")


def lease_validate(*, session: Session, owner: str) -> None:
    """Inside the caller's transaction: lock the root row and check the lease is ours and
    unexpired. Raises LeaseLost otherwise."""
    row = (Session.objects.select_for_update().filter(pk=_root_id(session))
           .values("lease_owner", "lease_expires_at").first())
    if (row is None or row["lease_owner"] != owner or row["lease_expires_at"] is None
            or row["lease_expires_at"] < timezone.now()):
        raise LeaseLost(f"turn lease of session {session.pk} lost")


def lease_release(*, session: Session, owner: str) -> None:
    """Give the lease up if it is ours (a no-op otherwise)."""
    Session.objects.filter(pk=_root_id(session), lease_owner=owner).update(
        lease_owner="", lease_expires_at=None)
