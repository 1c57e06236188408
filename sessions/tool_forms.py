"""Forms of the issue-13 tool pages: the memory page and a clarify answer. They parse and
bound request data; the rules (the memory cap, who may answer) are the services'."""

from __future__ import annotations

from django import forms

from sessions.clarify import MAX_ANSWER_CHARS


class MemoryEntryForm(forms.Form):
    """One memory change: ``op`` add / edit / delete, ``index`` of the entry (edit,
    delete), ``content`` (add, edit)."""

    op = forms.ChoiceField(choices=[("add", "add"), ("edit", "edit"), ("delete", "delete")])
    index = forms.IntegerField(required=False, min_value=0)
    content = forms.CharField(required=False, max_length=10_000, strip=True,
                              widget=forms.Textarea(attrs={"rows": 2}))

    def clean(self):
        data = super().clean()
        op = data.get("op")
        if op in ("edit", "delete") and data.get("index") is None:
            raise forms.ValidationError("Which entry? (the page was incomplete; reload it)")
        if op in ("add", "edit") and not data.get("content"):
            self.add_error("content", "An entry cannot be empty.")
        return data


class ClarifyAnswerForm(forms.Form):
    """The answer to a clarify question: a chosen option or the user's own words."""

    answer = forms.CharField(max_length=MAX_ANSWER_CHARS, strip=True, error_messages={
        "required": "Write an answer or pick a choice.",
        "max_length": f"An answer is at most {MAX_ANSWER_CHARS} characters."})
