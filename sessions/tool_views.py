"""Views of the issue-13 tools: the memory page, the todo panel and clarify questions.

Same rules as sessions/views.py: fetch through selectors scoped to the acting user (another
user's session or question is Http404), call one service, render; a ValidationError or a
refused memory change is a form error (400), never a 500.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.memory import MemoryRefused, memory_size
from sessions.clarify import clarify_answer, clarify_get
from sessions.models import ClarifyQuestion
from sessions.selectors import session_get
from sessions.templatetags.tool_panels import clarify_context, todo_context
from sessions.tool_forms import ClarifyAnswerForm, MemoryEntryForm
from sessions.tool_state import memory_entries, memory_limit, memory_page_change


def _memory_context(user, form=None, error_index=None) -> dict:
    entries = memory_entries(user_id=user.pk)
    return {"entries": list(enumerate(entries)), "used": memory_size(entries),
            "limit": memory_limit(), "form": form or MemoryEntryForm(),
            "error_index": error_index}


@login_required
@require_http_methods(["GET", "POST"])
def memory_view(request: HttpRequest) -> HttpResponse:
    """GET: the user's memory entries with edit and delete forms and an add form. POST: one
    change (MemoryEntryForm); success redirects back, a refusal (the cap, empty text, a
    stale entry) re-renders the page with the error (400)."""
    if request.method == "GET":
        return render(request, "sessions/memory.html", _memory_context(request.user))
    form = MemoryEntryForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            done = memory_page_change(user=request.user, op=data["op"], index=data["index"],
                                      content=data.get("content") or None)
        except MemoryRefused as exc:
            form.add_error(None, str(exc)[:1].upper() + str(exc)[1:])
        else:
            messages.success(request, done)
            return redirect("memory")
    index = form.cleaned_data.get("index") if hasattr(form, "cleaned_data") else None
    return render(request, "sessions/memory.html",
                  _memory_context(request.user, form, error_index=index), status=400)


@login_required
@require_GET
def todo_panel_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """The todo side panel of a session the user may read (refreshed by static/todo.js)."""
    session = session_get(user=request.user, session_id=session_id)
    return render(request, "sessions/_todo_panel.html", todo_context(session))


def _question(request: HttpRequest, session_id: int, question_id: int, *, write: bool):
    session = session_get(user=request.user, session_id=session_id, write=write)
    question = ClarifyQuestion.objects.filter(pk=question_id, session=session).first()
    if question is None:
        raise Http404("No such question")
    return session, question


@login_required
@require_GET
def clarify_card_view(request: HttpRequest, session_id: int, question_id: int) -> HttpResponse:
    """One question's card (static/clarify.js fetches it when a question arrives)."""
    session, question = _question(request, session_id, question_id, write=False)
    return render(request, "sessions/_clarify.html",
                  clarify_context(question, can_answer=session.owner_id == request.user.pk))


@login_required
@require_POST
def clarify_answer_view(request: HttpRequest, session_id: int, question_id: int
                        ) -> HttpResponse:
    """POST answer: the session owner answers (anyone else: 404). Success: the answered
    card (htmx) or a redirect to the chat; a bad or late answer: the card with its error
    (400)."""
    session, question = _question(request, session_id, question_id, write=True)
    form = ClarifyAnswerForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            question = clarify_answer(user=request.user, question_id=clarify_get(
                user=request.user, question_id=question.pk).pk,
                answer=form.cleaned_data["answer"])
        except ValidationError as exc:
            error = exc.messages[0]
        else:
            if not request.htmx:
                return redirect("session_detail", session_id=session.pk)
            return render(request, "sessions/_clarify.html",
                          clarify_context(question, can_answer=True))
    else:
        error = form.errors["answer"][0]
    question.refresh_from_db()
    if not request.htmx:
        messages.error(request, error)
        return redirect("session_detail", session_id=session.pk)
    return render(request, "sessions/_clarify.html",
                  clarify_context(question, can_answer=True, error=error), status=400)
