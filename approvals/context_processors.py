"""Template context: the pending-approval count shown as a badge in the header."""

from __future__ import annotations

from django.http import HttpRequest


def pending_approvals(request: HttpRequest) -> dict:
    """{"pending_approval_count": int} for the acting user (0 when anonymous)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"pending_approval_count": 0}
    from approvals.selectors import approval_list_pending

    return {"pending_approval_count": approval_list_pending(user=user).count()}
