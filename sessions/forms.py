"""Forms for the chat pages: they parse and validate request data and nothing more.

Validation rules live in sessions/services.py (``check_message_text``, the title rules of
``session_rename``); a form only calls them so the error is shown next to the field. Writes
never happen here.
"""

from __future__ import annotations

from django import forms

from sessions.services import check_message_text


class MessageForm(forms.Form):
    """One chat message. Not stripped: leading spaces and blank lines are the user's."""

    text = forms.CharField(required=False, strip=False, widget=forms.Textarea)

    def clean_text(self) -> str:
        """Raises ValidationError for an empty or over-long (> 100,000 chars) message."""
        return check_message_text(self.cleaned_data.get("text", ""))


class RenameForm(forms.Form):
    """A new session title (1–200 chars after trimming; session_rename re-checks)."""

    title = forms.CharField(max_length=200, error_messages={
        "required": "A title cannot be empty.",
        "max_length": "A title can be at most 200 characters."})


class SearchForm(forms.Form):
    """The ``q`` query of the session list and the search page (plain text, never syntax)."""

    q = forms.CharField(required=False, max_length=200, strip=True)

    def query(self) -> str:
        return self.cleaned_data.get("q", "") if self.is_valid() else ""
