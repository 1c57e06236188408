"""Webhook views: the inbound endpoint (CSRF-exempt, signature-checked) and the owner's pages.

The inbound view is the only CSRF-exempt view in the app: it has no cookie session to ride
on; the HMAC signature is its authentication (webhooks/services.py::webhook_receive).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig, ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from webhooks.forms import WebhookForm
from webhooks.selectors import webhook_deliveries, webhook_get, webhook_list
from webhooks.services import (Reception, webhook_create, webhook_delete, webhook_receive,
                               webhook_rotate)


@csrf_exempt
@require_POST
def webhook_inbound_view(request: HttpRequest, token: str) -> HttpResponse:
    """POST /hooks/<token>/: one delivery. Answers JSON with 202 (a turn queued), 200
    (duplicate), or 4xx with the reason (webhooks/services.py)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    # Over the cap by its own Content-Length: refused without reading the body.
    limit = settings.WEBHOOKS["MAX_BODY_BYTES"]
    try:
        body = b"" if declared > limit else request.body
    except RequestDataTooBig:  # over Django's DATA_UPLOAD_MAX_MEMORY_SIZE
        body, declared = b"", max(declared, limit + 1)
    result: Reception = webhook_receive(token=token, headers=request.headers, body=body,
                                        declared_length=declared)
    return JsonResponse(result.body, status=result.status)


@login_required
@require_http_methods(["GET", "POST"])
def webhook_list_view(request: HttpRequest) -> HttpResponse:
    """The user's webhooks and the create form; the new secret is shown once."""
    form = WebhookForm(request.POST or None, user=request.user)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                hook = webhook_create(user=request.user, **form.cleaned_data)
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                request.session[f"webhook-secret-{hook.pk}"] = hook.secret
                return redirect("webhook_detail", webhook_id=hook.pk)
        status = 400
    return render(request, "webhooks/list.html",
                  {"form": form, "webhooks": webhook_list(user=request.user)}, status=status)


@login_required
@require_GET
def webhook_detail_view(request: HttpRequest, webhook_id: int) -> HttpResponse:
    """One webhook: its URL, how to sign, the secret once after create/rotate, deliveries."""
    hook = webhook_get(user=request.user, webhook_id=webhook_id)
    secret = request.session.pop(f"webhook-secret-{hook.pk}", None)
    url = request.build_absolute_uri(f"/hooks/{hook.token}/")
    return render(request, "webhooks/detail.html", {
        "webhook": hook, "secret": secret, "url": url,
        "deliveries": webhook_deliveries(webhook=hook)})


@login_required
@require_POST
def webhook_action_view(request: HttpRequest, webhook_id: int, action: str) -> HttpResponse:
    """rotate (new secret, shown once) or delete one of the user's webhooks."""
    hook = webhook_get(user=request.user, webhook_id=webhook_id)
    if action == "rotate":
        webhook_rotate(webhook=hook)
        request.session[f"webhook-secret-{hook.pk}"] = hook.secret
        messages.success(request, "Secret rotated: the old one no longer verifies.")
        return redirect("webhook_detail", webhook_id=hook.pk)
    if action == "delete":
        webhook_delete(webhook=hook)
        messages.success(request, f"Webhook “{hook.name}” deleted.")
        return redirect("webhook_list")
    return JsonResponse({"error": "no such action"}, status=404)
