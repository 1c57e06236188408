"""Chat views: each fetches through sessions/selectors.py, calls one service, renders.

A view never holds business logic (HackSoft, style.md §2.5): validation lives in the services
and forms, display shaping in sessions/rendering.py. Another user's or an unknown session is
Http404 from the selector (never a 403 that reveals it exists). A ValidationError becomes a
form error: status 400 for htmx posts (the composer is re-rendered in place), never a 500.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from agents.wording import plural
from sessions.delegation import child_cards, children_cost
from sessions.events import event_to_dict
from sessions.forms import MessageForm, RenameForm, SearchForm
from sessions.hooks import MONEY
from sessions.models import Session
from sessions.search import message_search
from sessions.rendering import event_frame, transcript_context, viewer_label
from sessions.selectors import (Sidebar, event_list_after, message_list_display, session_get, session_list, session_list_team,
                                session_visible_q)
from sessions.files import (file_preview, file_read, file_tree, file_upload, upload_limit_text,
                            upload_max_bytes, upload_too_big_text)
from sessions.gauge import gauge_events, session_context_gauge
from sessions.services import (DELETE_GONE, message_edit, message_id_parse, provider_choices,
                               session_archive, session_create_or_reuse, session_delete,
                               session_delete_preview, session_delete_summary, session_fork,
                               session_model_set, session_pin, session_rename, session_rewind,
                               turn_regenerate, turn_start, turn_steer, turn_stop)
from sessions.steer import turn_running
from sessions.visible import visible_text

EVENT_PAGE = 500
"""Events per polling response (the client asks again with the new ``after``)."""
SEARCH_LIMIT = 50
"""Rows per search section."""
MAX_SEQ = 2**63 - 1
"""Largest event seq (a PostgreSQL bigint)."""


@login_required
@require_GET
def session_list_view(request: HttpRequest) -> HttpResponse:
    """The user's sessions, newest activity first; ``q`` filters titles, ``archived=1``
    lists archived ones. An htmx request gets only the rows partial."""
    q = SearchForm(request.GET).query()
    archived = request.GET.get("archived") == "1"
    context = {"q": q, "archived": archived,
               "sessions": MONEY.sessions_with_cost(session_list(user=request.user, query=q,
                                                           archived=archived)),
               "team_sessions": [] if q or archived else session_list_team(user=request.user)[:20],
               "provider_choices": provider_choices()}
    template = "sessions/list.html#session-rows" if request.htmx else "sessions/list.html"
    return render(request, template, context)


@login_required
@require_POST
def session_create_view(request: HttpRequest) -> HttpResponse:
    """POST: open a new session: the user's newest empty, untouched one when there is one
    (sessions/services.py session_create_or_reuse: "New session" pressed again, or twice,
    does not pile up empty rows), else a new one. ``provider`` (optional): one of the
    configured provider profiles (provider_choices); a refused one goes back to the page it
    came from with the reason."""
    try:
        session, _ = session_create_or_reuse(user=request.user,
                                             provider=request.POST.get("provider", ""))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("session_list")
    return redirect("session_detail", session_id=session.pk)


def _back(request: HttpRequest, session_id: int) -> HttpResponse:
    """After an action: to the session page (htmx: a client-side redirect, so the page and
    its flash message load whole)."""
    url = reverse("session_detail", kwargs={"session_id": session_id})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _act(request: HttpRequest, action, done: str):
    """Run ``action()`` (a service call); a ValidationError becomes the flash error, else
    ``done`` is the flash success. Returns the service's result or None."""
    try:
        result = action()
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return None
    if done:
        messages.success(request, done)
    return result


@login_required
@require_POST
def message_edit_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Edit a past user message and re-run from it (the later messages are rewound). The
    reason is shown when refused (a turn is busy, the message is no longer live, bad text)."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    _act(request, lambda: message_edit(
        session=session, user=request.user,
        message_id=message_id_parse(request.POST.get("message_id")),
        text=request.POST.get("text", "")), "")
    return _back(request, session.pk)


@login_required
@require_POST
def turn_regenerate_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Regenerate the last reply (rewind it and send the same message again)."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    _act(request, lambda: turn_regenerate(session=session, user=request.user), "")
    return _back(request, session.pk)


@login_required
@require_POST
def session_fork_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Fork the session at ``message_id`` into a new session and open it."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    fork = _act(request, lambda: session_fork(
        session=session, user=request.user,
        message_id=message_id_parse(request.POST.get("message_id"))), "")
    if fork is None:
        return _back(request, session.pk)
    messages.success(request, f"This is a fork of “{session.title}”; the original is "
                              "unchanged.")
    return _back(request, fork.pk)


@login_required
@require_POST
def session_pin_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Pin (pinned=1, the default) or unpin (pinned=0). htmx: the sidebar's session list."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    session_pin(session=session, pinned=request.POST.get("pinned", "1") != "0")
    if request.htmx:
        return render(request, "sessions/sidebar.html#sidebar-sessions",
                      {"current_id": session.pk, "sidebar": Sidebar(user=request.user)})
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        target = reverse("session_list")
    return redirect(target)


@login_required
@require_GET
def sidebar_view(request: HttpRequest) -> HttpResponse:
    """The sidebar's session list, filtered by ``q`` (titles), for the search box."""
    q = SearchForm(request.GET).query()
    current = request.GET.get("current", "")
    return render(request, "sessions/sidebar.html#sidebar-sessions",
                  {"sidebar": Sidebar(user=request.user, query=q), "current_id": int(current) if current.isdigit() and
                   len(current) < 19 else None})


@login_required
@require_POST
def session_model_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Change the provider and model between turns (``choice`` is "provider|model")."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    provider, _, model = request.POST.get("choice", "").partition("|")
    before = (session.provider, session.model)
    changed = _act(request, lambda: session_model_set(
        session=session, provider=provider, model=model), "")
    if changed is not None and (changed.provider, changed.model) != before:
        messages.success(request, f"Now using {changed.provider} · {changed.model}. The system "
                         "prompt is rebuilt for it on the next turn (that request starts "
                         "without a warm cache).")
    return _back(request, session.pk)


@login_required
@require_GET
def message_raw_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """GET raw/?message=<id>: one displayed message's text as written (Markdown), as
    text/plain, for "Copy as Markdown". 404 for a message not shown in this session."""
    session = session_get(user=request.user, session_id=session_id)
    raw = request.GET.get("message", "")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19:
        raise Http404("No such message")
    row = message_list_display(session=session).filter(pk=int(raw)).first()
    if row is None:
        raise Http404("No such message")
    return HttpResponse(row.content, content_type="text/plain; charset=utf-8")


@login_required
@require_GET
def gauge_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """The context gauge partial (refreshed by the page after each turn)."""
    session = session_get(user=request.user, session_id=session_id)
    return render(request, "sessions/detail.html#gauge", {
        "session": session, "gauge": session_context_gauge(session=session),
        "gauge_events": gauge_events(session=session),
        "can_write": session.owner_id == request.user.pk})


@login_required
@require_GET
def files_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """The workspace panel: the file tree, and the preview of ``path`` when given. A path
    the workspace refuses (missing, a link, too long, …) is a 400 whose panel says why
    (htmx swaps 400s: base.html's responseHandling)."""
    session = session_get(user=request.user, session_id=session_id)
    context = _files_context(request, session, request.GET.get("path", ""))
    return render(request, "sessions/files.html#files-panel", context,
                  status=400 if context["files_error"] else 200)


def _files_context(request: HttpRequest, session, path: str, error: str = "") -> dict:
    entries, truncated = file_tree(session=session)
    preview = None
    if path and not error:
        try:
            preview = file_preview(session=session, path=path)
        except ValidationError as exc:
            error = " ".join(exc.messages)
    return {"session": session, "entries": entries, "truncated": truncated,
            "preview": preview, "files_error": error, "upload_limit": upload_limit_text(),
            "can_write": session.owner_id == request.user.pk}


@login_required
@require_GET
def file_download_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """One workspace file as an attachment (a link or anything but a regular file: 404
    with the reason)."""
    session = session_get(user=request.user, session_id=session_id)
    path = request.GET.get("path", "")
    try:
        data = file_read(session=session, path=path)
    except ValidationError as exc:
        return HttpResponse(" ".join(exc.messages), status=404, content_type="text/plain")
    response = HttpResponse(data, content_type="application/octet-stream")
    name = path.rsplit("/", 1)[-1].replace('"', "")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_POST
def file_upload_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Upload one file into the workspace root (size cap: sessions/files.py). htmx: the
    panel, with the error (400) when refused."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    upload = request.FILES.get("file")
    error, path, renamed_from = "", "", ""
    if upload is None:
        error = "Choose a file to upload."
    elif upload.size > upload_max_bytes():
        error = upload_too_big_text(upload.name, upload.size)
    else:
        try:
            path = file_upload(session=session, name=upload.name, data=upload.read())
        except ValidationError as exc:
            error = " ".join(exc.messages)
        # Saved under another name (folders dropped, "../" refused, spaces trimmed): say so.
        asked = request.POST.get("name") or upload.name
        if path and asked != path:
            renamed_from = asked
    if request.htmx:
        context = _files_context(request, session, path, error)
        context["uploaded"], context["uploaded_as"] = path, renamed_from
        return render(request, "sessions/files.html#files-panel", context,
                      status=400 if error else 200)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"“{renamed_from}” was saved as {path}: uploads go to the "
                                  "workspace root under the file's own name." if renamed_from
                         else f"Uploaded {path}.")
    return redirect("session_detail", session_id=session.pk)


@login_required
@require_GET
def session_detail_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """The chat page: the stored transcript, the text streamed so far and the seq the
    socket resumes from (sessions/rendering.py transcript_context)."""
    session = session_get(user=request.user, session_id=session_id)
    context = {"session": session, "form": MessageForm(),
               # A child agent's session is read-only: it works only on its delegated task.
               "can_write": session.owner_id == request.user.pk and session.parent_id is None,
               "session_cost": MONEY.session_costs([session.pk]).get(session.pk),
               "children_cost": children_cost(session),
               "gauge": session_context_gauge(session=session),
               "gauge_events": gauge_events(session=session),
               "provider_choices": provider_choices(),
               **transcript_context(session=session, user=request.user, request=request)}
    return render(request, "sessions/detail.html", context)


@login_required
@require_GET
def session_children_view(request: HttpRequest, session_id: int) -> JsonResponse:
    """The child cards' data (sessions/delegation.py child_cards), optionally of one
    delegate call (``?call=<id>``), and the children's total spend:
    {"children": [card...], "total": {"cost_usd", "unknown", "tokens", "children"}}.
    Polled by static/child_cards.js while a child runs."""
    session = session_get(user=request.user, session_id=session_id)
    total = children_cost(session)
    return JsonResponse({
        "children": child_cards(session=session, call_id=request.GET.get("call") or None),
        "total": {**total, "cost_usd": str(total["cost_usd"])}})


@login_required
@require_POST
def message_send_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Queue a message as a turn. htmx: the turn-status partial, or the composer with its
    error (400, retargeted to #composer). Without htmx: a redirect, or the page with the
    error (400). Nothing is stored when the message is refused. (Opened in the browser by
    GET: a 405 with a readable page, hermes_web/middleware.py.)"""
    return _message_post(request, session_id, steer=False)


@login_required
@require_POST
def message_steer_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Send the message as a correction to the running turn (sessions/services.py
    turn_steer; the Steer button and Alt+Enter). Answers exactly like message_send_view;
    the status stays "running" while a turn runs (the correction lands inside it)."""
    return _message_post(request, session_id, steer=True)


def _message_post(request: HttpRequest, session_id: int, *, steer: bool) -> HttpResponse:
    session = session_get(user=request.user, session_id=session_id, write=True)
    form = MessageForm(request.POST)
    if form.is_valid():
        service = turn_steer if steer else turn_start
        try:
            turn = service(session=session, user=request.user, text=form.cleaned_data["text"])
        except ValidationError as exc:
            form.add_error("text", exc)
        else:
            if not request.htmx:
                return redirect("session_detail", session_id=session.pk)
            state = "running" if steer and turn_running(session=session) else "queued"
            return render(request, "sessions/detail.html#turn-status", {
                "status": {"state": state, "turn_id": turn.pk}, "session_id": session.pk})
    if request.htmx:
        response = render(request, "sessions/detail.html#composer",
                          {"form": form, "session": session}, status=400)
        return reswap(retarget(response, "#composer"), "outerHTML")
    context = {"session": session, "form": form, "can_write": True,
               **transcript_context(session=session, user=request.user, request=request)}
    return render(request, "sessions/detail.html", context, status=400)


@login_required
@require_POST
def turn_stop_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Ask the running turn to stop; it stops between stream chunks and tools."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    stopping = turn_stop(session=session)
    if not request.htmx:
        return redirect("session_detail", session_id=session.pk)
    return render(request, "sessions/detail.html#turn-status", {
        "status": {"state": "stopping" if stopping else "idle"}, "session_id": session.pk})


@login_required
@require_POST
def session_rename_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Rename. htmx: the row partial (400 with the error shown when refused)."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    form = RenameForm(request.POST)
    error = ""
    try:
        if not form.is_valid():
            raise ValidationError(form.errors["title"])
        session_rename(session=session, title=form.cleaned_data["title"])
    except ValidationError as exc:
        error = " ".join(exc.messages)
    if request.htmx:
        # The swapped-in row is drawn like the list's rows, its cost included.
        row = MONEY.sessions_with_cost(Session.objects.filter(pk=session.pk)).get()
        return render(request, "sessions/list.html#session-row",
                      {"session": row, "rename_error": error,
                       # echoed visible-safe, as it would be stored (sessions/visible.py)
                       "rename_value": visible_text(request.POST.get("title", ""))},
                      status=400 if error else 200)
    if error:
        messages.error(request, error)
    return redirect("session_list")


@login_required
@require_POST
def session_archive_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Archive (archived=1, the default) or restore (archived=0) a session."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    archived = request.POST.get("archived", "1") != "0"
    session_archive(session=session, archived=archived)
    messages.success(request, f"{'Archived' if archived else 'Restored'} “{session.title}”.")
    return redirect("session_list")


DELETED_KEY = "hermes_deleted_sessions"
"""The login's Django-session key listing the ids of sessions it deleted lately, so a
second POST of the same delete (a double click, a resubmitted form) is answered "already
deleted" to the one who deleted it, while everyone else gets the usual 404."""
DELETED_REMEMBERED = 20


@login_required
@require_http_methods(["GET", "POST"])
def session_delete_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """GET: the confirmation page (what goes, what stays, what is paused; the refusal when
    a turn is busy). POST (CSRF-checked like every form): delete it (sessions/services.py
    session_delete) and go to the session list. Owner only: anyone else, a team admin
    included, gets 404 as for an unknown session."""
    try:
        session = session_get(user=request.user, session_id=session_id, write=True)
    except Http404:
        if request.method == "POST" and session_id in request.session.get(DELETED_KEY, []):
            messages.info(request, DELETE_GONE)
            return redirect("session_list")
        raise
    if request.method == "GET":
        preview = session_delete_preview(session=session)
        return render(request, "sessions/delete.html", {
            "session": session, "preview": preview,
            "summary": session_delete_summary(preview),
            "session_cost": MONEY.session_costs([session.pk]).get(session.pk)})
    try:
        title = session_delete(session=session, user=request.user)
    except ValidationError as exc:
        text = " ".join(exc.messages)
        if text == DELETE_GONE:  # a concurrent POST of the same delete won
            messages.info(request, text)
            return redirect("session_list")
        messages.error(request, text)
        return redirect("session_delete", session_id=session.pk)
    request.session[DELETED_KEY] = ([session.pk] + request.session.get(DELETED_KEY, [])
                                    )[:DELETED_REMEMBERED]
    messages.success(request, f"Deleted “{title}”. What it cost stays counted on the Spend "
                              "page.")
    return redirect("session_list")


@login_required
@require_POST
def session_rewind_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Take back the last exchange, or with ``message_id`` (one of your live messages) that
    message and everything after it. Refused with the reason shown, nothing changed, while
    a turn runs or for an id that is not one of your live messages (never ignored: a bad id
    must not rewind the last exchange instead)."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    raw = request.POST.get("message_id")
    count = _act(request, lambda: session_rewind(
        session=session, message_id=None if raw is None else message_id_parse(raw)), "")
    if count is not None:
        what = "the last exchange" if raw is None else "that message and what followed it"
        messages.success(request, f"Took back {what} ({plural(count, 'message')}).")
    return _back(request, session.pk)


@login_required
@require_GET
def event_list_view(request: HttpRequest, session_id: int) -> JsonResponse:
    """Polling fallback: {"events": [frame…], "last_seq": N} for seq > ?after (frames as on
    the socket, docs/protocol.md). A bad ``after`` is a 400 with a reason."""
    session = session_get(user=request.user, session_id=session_id)
    after = request.GET.get("after", "0")
    # ASCII digits only: str.isdigit() accepts "²" and "١", which int() then rejects or
    # reads as another number; and at most a bigint (the seq column), or the query fails.
    if not (after.isascii() and after.isdigit()) or len(after) > 19 or int(after) > MAX_SEQ:
        return JsonResponse({"error": "after must be a non-negative integer (ASCII digits, "
                             f"at most {MAX_SEQ})"}, status=400)
    events = event_list_after(session_id=session.pk, after_seq=int(after), limit=EVENT_PAGE)
    label = viewer_label(session=session, user=request.user)
    frames = [event_frame(event_to_dict(e), user=request.user, user_label=label)
              for e in events]
    return JsonResponse({"events": frames, "last_seq": frames[-1]["seq"] if frames
                         else int(after)})


@login_required
@require_GET
def search_view(request: HttpRequest) -> HttpResponse:
    """Titles of every session the user may read, and full-text recall over the messages of
    their own sessions (sessions/search.py: rewound messages excluded, summarised-away ones
    included, DESIGN.md §3; the query is never passed as search syntax)."""
    form = SearchForm(request.GET)
    q = form.query()
    # A refused query (too long) used to read as an empty one: the page showed nothing under
    # the box. Say why instead.
    limit = SearchForm.base_fields["q"].max_length
    error = "" if form.is_valid() else (
        f"This search is too long: at most {limit} characters. Shorten it and search again.")
    sessions, hits = Session.objects.none(), []
    if q:
        visible = Session.objects.filter(session_visible_q(user=request.user))
        sessions = visible.filter(title__icontains=q).order_by("-last_activity_at")[:SEARCH_LIMIT]
        hits = [{"hit": hit, "snippet_html": snippet_html(hit.snippet)}
                for hit in message_search(user=request.user, query=q, limit=SEARCH_LIMIT)]
    return render(request, "sessions/search.html",
                  {"q": q, "sessions": sessions, "hits": hits, "error": error})


def snippet_html(snippet: str) -> str:
    """A search snippet with its «marks» as <mark> elements; everything else escaped."""
    return mark_safe(escape(snippet).replace("«", "<mark>").replace("»", "</mark>"))


EXPORT_TEXTS = {
    "content": "what the person saw and typed: the text the chat displays and search indexes",
    "sent_content": "the exact text sent to the model when it differed from content (a skill "
                    "invocation's expansion, a pruned tool result's stub); null means content "
                    "itself was sent",
}
"""Says which text each export field carries (issue 3 item 6)."""


def _message_export(row) -> dict:
    """One stored row as exported: both texts, the flags that say whether the model still
    sees it (active) or a compaction summarised it (compacted), and the scaffold length."""
    return {"id": row.pk, "role": row.role, "kind": row.kind, "content": row.content,
            "sent_content": row.sent_content, "stable_prefix_chars": row.stable_prefix_chars,
            "tool_calls": row.tool_calls, "tool_call_id": row.tool_call_id or None,
            "tool_name": row.tool_name or None, "is_error": row.is_error,
            "active": row.active, "compacted": row.compacted,
            "created_at": row.created_at.isoformat()}


@login_required
@require_GET
def session_export_view(request: HttpRequest, session_id: int) -> JsonResponse:
    """GET /sessions/<id>/export.json: every message of the session (live, summarised away
    and rewound, ordered by id) with ``content`` and ``sent_content``, plus the stored system
    prompt byte-exact. Owner and team admins only (Http404 otherwise, from the selector)."""
    session = session_get(user=request.user, session_id=session_id)
    rows = session.messages.order_by("id")
    response = JsonResponse({
        "session": {"id": session.pk, "title": session.title, "provider": session.provider,
                    "model": session.model, "started_at": session.started_at.isoformat()},
        "system_prompt": session.system_prompt, "texts": EXPORT_TEXTS,
        "messages": [_message_export(row) for row in rows],
        "usage": MONEY.usage_export(session)},
        json_dumps_params={"ensure_ascii": False})
    response["Content-Disposition"] = f'inline; filename="session-{session.pk}.json"'
    return response
