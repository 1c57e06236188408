"""Approval views: the review queue, a decision, one request's arguments in full, "always"
rules, the bypass toggle.

Thin: fetch through a selector scoped to the acting user (another user's object is a 404),
call one service, render. A ValidationError becomes a message on the page, never a 500.
HTMX requests get the card (or fragment) back in place of a redirect; a decision made on
the review queue page gets the whole queue region back, so nothing there goes stale.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from approvals.forms import ApprovalDecisionForm, SessionBypassForm
from approvals.rendering import approval_card_context, approval_card_html, approval_shown
from approvals.selectors import (
    approval_get,
    approval_list_pending,
    approval_list_recent,
    approval_rule_list,
)
from approvals.services import approval_decide, approval_rule_revoke, session_bypass_set
from sessions.selectors import session_get

__all__ = ["approval_arguments_view", "approval_card_html", "approval_decide_view",
           "approval_queue_view",
           "approval_rule_list_view", "approval_rule_revoke_view", "session_bypass_view"]


def _next_or(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return fallback


def _is_htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


def _queue_context(user, *, error_for: int | None = None, error: str = "") -> dict:
    """Context of approvals/queue_region.html: pending and recent cards for ``user``, the
    card ``error_for`` carrying ``error``."""
    pending = [approval_card_context(a, user, error=error if a.pk == error_for else "")
               for a in approval_list_pending(user=user)]
    recent = [approval_card_context(a, user, error=error if a.pk == error_for else "")
              for a in approval_list_recent(user=user)]
    return {"pending_cards": pending, "recent_cards": recent}


def _from_queue_page(request: HttpRequest) -> bool:
    """Was this HTMX request sent by the review queue page (HX-Current-URL)? There the
    whole region changes (count, pending list, recent decisions), not just one card."""
    path = getattr(request.htmx, "current_url_abs_path", None) or ""
    return path.split("?", 1)[0].split("#", 1)[0] == reverse("approval_queue")


@login_required
@require_GET
def approval_queue_view(request: HttpRequest) -> HttpResponse:
    """Pending requests first (with the decision buttons), recent decisions below. An HTMX
    request (the page refreshing itself, static/approvals.js) gets the queue region and the
    header's approvals link out of band."""
    if request.htmx:
        return render(request, "approvals/queue_region.html",
                      {**_queue_context(request.user), "oob_badge": True})
    return render(request, "approvals/queue.html", _queue_context(request.user))


@login_required
@require_GET
def approval_arguments_view(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Every argument of one request, nothing cut (a card caps what it shows at
    approvals.rendering.CARD_ARGUMENT_CHARS and links here). Its reviewers only (the
    session's owner and its team's admins, approval_get): anyone else gets a 404."""
    approval = approval_get(user=request.user, approval_id=approval_id)
    return render(request, "approvals/arguments.html",
                  {"approval": approval, "shown": approval_shown(approval, limit=None)})


@login_required
@require_POST
def approval_decide_view(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Decide one request; HTMX gets the updated card (the queue page: the whole queue
    region and the header badge), a plain form a redirect."""
    approval = approval_get(user=request.user, approval_id=approval_id)
    form = ApprovalDecisionForm(request.POST)
    error = ""
    if not form.is_valid():
        error = "Choose approve once, for this session, always, or deny."
    else:
        try:
            approval = approval_decide(user=request.user, approval_id=approval.pk,
                                       choice=form.cleaned_data["choice"],
                                       reason=form.cleaned_data["reason"])
        except ValidationError as exc:
            error = " ".join(exc.messages)
            approval.refresh_from_db()
    if _is_htmx(request) and _from_queue_page(request):
        # The queue page re-renders its whole region (the card moves from Pending to Recent
        # decisions, the count drops) and the header badge out of band; errors stay on the
        # card as a 400, swapped like a 200 (base.html).
        response = render(request, "approvals/queue_region.html",
                          {**_queue_context(request.user, error_for=approval.pk, error=error),
                           "oob_badge": True}, status=400 if error else 200)
        response["HX-Retarget"] = "#approval-queue"
        response["HX-Reswap"] = "outerHTML"
        return response
    if _is_htmx(request):
        # 400 with the card carrying the error: swapped in place like a 200 (base.html).
        return HttpResponse(approval_card_html(approval, request.user, request=request,
                                               error=error), status=400 if error else 200)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Request #{approval.pk} {approval.state}.")
    return redirect(_next_or(request, reverse("approval_queue")))


@login_required
@require_GET
def approval_rule_list_view(request: HttpRequest) -> HttpResponse:
    """"Always" rules the user may manage, with hit counts and a revoke button."""
    return render(request, "approvals/rules.html",
                  {"rules": approval_rule_list(user=request.user).select_related(
                      "user", "team", "created_by")})


@login_required
@require_POST
def approval_rule_revoke_view(request: HttpRequest, rule_id: int) -> HttpResponse:
    """Revoke one rule (404 when the user may not manage it)."""
    try:
        rule = approval_rule_revoke(user=request.user, rule_id=rule_id)
        messages.success(request, f"Rule #{rule.pk} revoked.")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect(reverse("approval_rules"))


@login_required
@require_POST
def session_bypass_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Turn the session's approval bypass on or off (owner only: others get a 404)."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    form = SessionBypassForm(request.POST)
    form.is_valid()
    session = session_bypass_set(user=request.user, session=session,
                                 enabled=form.cleaned_data.get("enabled", False))
    if session.bypass_approvals:
        messages.warning(request, "Approval bypass is ON for this session: tool calls run "
                                  "without asking (the hardline floor, your deny list and "
                                  "protected instruction files still apply).")
    else:
        messages.success(request, "Approval bypass is off: risky tool calls ask again.")
    if _is_htmx(request):
        return render(request, "approvals/bypass_form.html", {"session": session})
    try:
        fallback = reverse("session_detail", kwargs={"session_id": session.pk})
    except NoReverseMatch:
        fallback = reverse("approval_queue")
    return redirect(_next_or(request, fallback))
