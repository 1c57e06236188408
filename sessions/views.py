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
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, retarget

from accounts.spend import session_costs, sessions_with_cost, usage_export
from sessions.delegation import child_cards, children_cost
from sessions.events import event_to_dict
from sessions.forms import MessageForm, RenameForm, SearchForm
from sessions.models import Session
from sessions.search import message_search
from sessions.rendering import event_frame, transcript_context, viewer_label
from sessions.selectors import (event_list_after, session_get, session_list, session_list_team,
                                session_visible_q)
from sessions.services import (session_archive, session_create, session_rename,
                               session_rewind, turn_start, turn_steer, turn_stop)
from sessions.steer import turn_running

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
               "sessions": sessions_with_cost(session_list(user=request.user, query=q,
                                                           archived=archived)),
               "team_sessions": [] if q or archived else session_list_team(user=request.user)[:20]}
    template = "sessions/list.html#session-rows" if request.htmx else "sessions/list.html"
    return render(request, template, context)


@login_required
@require_POST
def session_create_view(request: HttpRequest) -> HttpResponse:
    """POST: start a new session and open it."""
    session = session_create(user=request.user)
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
               "session_cost": session_costs([session.pk]).get(session.pk),
               "children_cost": children_cost(session),
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
    error (400). Nothing is stored when the message is refused."""
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
        return render(request, "sessions/list.html#session-row",
                      {"session": session, "rename_error": error,
                       "rename_value": request.POST.get("title", "")}, status=400 if error else 200)
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


@login_required
@require_POST
def session_rewind_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Take back the last exchange (refused while a turn runs; the reason is shown)."""
    session = session_get(user=request.user, session_id=session_id, write=True)
    try:
        count = session_rewind(session=session)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Took back the last exchange ({count} messages).")
    return redirect("session_detail", session_id=session.pk)


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
    q = SearchForm(request.GET).query()
    sessions, hits = Session.objects.none(), []
    if q:
        visible = Session.objects.filter(session_visible_q(user=request.user))
        sessions = visible.filter(title__icontains=q).order_by("-last_activity_at")[:SEARCH_LIMIT]
        hits = [{"hit": hit, "snippet_html": snippet_html(hit.snippet)}
                for hit in message_search(user=request.user, query=q, limit=SEARCH_LIMIT)]
    return render(request, "sessions/search.html", {"q": q, "sessions": sessions, "hits": hits})


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
        "usage": usage_export(session)},
        json_dumps_params={"ensure_ascii": False})
    response["Content-Disposition"] = f'inline; filename="session-{session.pk}.json"'
    return response
