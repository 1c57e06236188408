"""HTML for one approval card, shared by the review queue, the chat page and the socket.

The socket renderer (sessions/consumers.py) has no request, so it passes the CSRF token it
has (the csrftoken cookie's secret is accepted by Django's CSRF check) or relies on the
page-wide hx-headers token. Who may decide is approvals/services.py's, not this module's.
"""

from __future__ import annotations

import json

from django.http import Http404, HttpRequest
from django.template.loader import render_to_string

from approvals.models import ApprovalRequest
from approvals.selectors import approval_get
from approvals.services import approval_permissions

ARGUMENTS_PREVIEW_CHARS = 4000


def approval_card_context(approval: ApprovalRequest, user, *, error: str = "") -> dict:
    """Template context of approvals/card.html for ``user`` (what they may press)."""
    perms = approval_permissions(user=user, approval=approval)
    pending = approval.state == ApprovalRequest.State.PENDING
    arguments = json.dumps(approval.arguments, indent=2, ensure_ascii=False, sort_keys=True)
    if len(arguments) > ARGUMENTS_PREVIEW_CHARS:
        arguments = arguments[:ARGUMENTS_PREVIEW_CHARS] + "\n…"
    return {"approval": approval, "perms": perms, "pending": pending,
            "can_decide": pending and (perms.can_approve or perms.can_deny),
            "arguments_preview": arguments, "error": error}


def approval_card_html(approval: ApprovalRequest, user, *, request: HttpRequest | None = None,
                       csrf_token: str = "", error: str = "") -> str:
    """The rendered card (str). ``approval`` must already be visible to ``user`` (fetched
    through approvals.selectors). Pass ``request`` from a view, or ``csrf_token`` from a
    socket."""
    context = approval_card_context(approval, user, error=error)
    if request is None and csrf_token:
        context["csrf_token"] = csrf_token
    return render_to_string("approvals/card.html", context, request=request)


def approval_event_html(*, user, payload: dict, csrf_token: str = "") -> str:
    """The card for an approval.requested / approval.decided event payload, as ``user``
    sees it; "" when the user may not see that approval."""
    try:
        approval_id = int((payload.get("approval") or {}).get("id"))
        approval = approval_get(user=user, approval_id=approval_id)
    except (Http404, TypeError, ValueError):
        return ""
    return approval_card_html(approval, user, csrf_token=csrf_token)


def session_approval_states(session) -> dict[str, str]:
    """{tool_call_id: state} of every approval request of ``session`` (the latest per call
    wins), for the chat page's tool cards (sessions/hooks.py APPROVALS.states)."""
    return dict(ApprovalRequest.objects.filter(session=session).order_by("id")
                .values_list("tool_call_id", "state"))


def session_cards_html(session, user, request: HttpRequest | None = None) -> list[str]:
    """The pending approval cards of ``session`` as ``user`` sees them (chat page)."""
    return [approval_card_html(a, user, request=request) for a in
            ApprovalRequest.objects.filter(session=session, state=ApprovalRequest.State.PENDING)]
