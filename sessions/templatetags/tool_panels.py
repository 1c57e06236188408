"""Template tags that put the issue-13 panels on the chat page with one line each
(``{% todo_panel session %}``, ``{% clarify_cards session %}``), so the page's view needs
no change; the same context builders serve the partials' own views."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from sessions.models import ClarifyQuestion, Session
from sessions.tool_state import todo_items
from sessions.visible import visible_html, visible_markup, visible_text

register = template.Library()


@register.filter
def visible(text) -> SafeString:
    """``{{ text|visible }}``: the model's or a user's text with its hidden and bidi
    characters as marked ⟨U+202E⟩ spans (sessions/visible.py visible_html), for the panels'
    free text (a todo item, a clarify question, its choices and answer) and the files
    panel's names (a file the model named ``report⟨U+202E⟩txt.exe``)."""
    return visible_html("" if text is None else str(text))


@register.filter
def visible_title(text) -> str:
    """``title="{{ text|visible_title }}"``: plain ⟨U+202E⟩ escapes for an attribute (a
    tooltip shows text, not a span); the template escapes it as usual."""
    return visible_text("" if text is None else str(text))


@register.filter
def visible_highlighted(html) -> SafeString:
    """``{{ html|visible_highlighted }}``: already-escaped, highlighted HTML (a file
    preview's Pygments output) with its hidden characters as the same marked spans
    (sessions/visible.py visible_markup)."""
    return visible_markup(str(html or ""))


def todo_context(session: Session) -> dict:
    """{"session_id", "items", "done"} for sessions/_todo_panel.html."""
    items = todo_items(session_id=session.pk)
    return {"session_id": session.pk, "items": items,
            "done": sum(1 for i in items if i.get("status") == "completed")}


def clarify_context(question: ClarifyQuestion, *, can_answer: bool, error: str = "") -> dict:
    """{"q", "can_answer", "error"} for sessions/_clarify.html."""
    return {"q": question, "can_answer": can_answer, "error": error}


@register.inclusion_tag("sessions/_todo_panel_page.html")
def todo_panel(session: Session) -> dict:
    return todo_context(session)


@register.inclusion_tag("sessions/_clarify_list.html", takes_context=True)
def clarify_cards(context, session: Session) -> dict:
    """The session's pending questions (the owner can answer them); an answered question
    lives on as its tool card's result ("The user answered: ...")."""
    user = context.get("user")
    can_answer = user is not None and session.owner_id == getattr(user, "pk", None)
    questions = ClarifyQuestion.objects.filter(
        session=session, state=ClarifyQuestion.State.PENDING).order_by("id")
    return {"cards": [clarify_context(q, can_answer=can_answer) for q in questions],
            "csrf_token": context.get("csrf_token")}
