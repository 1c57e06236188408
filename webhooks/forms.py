"""The webhook form (rules in webhooks/services.py::webhook_create)."""

from __future__ import annotations

from django import forms

from sessions.selectors import session_list


class WebhookForm(forms.Form):
    """A new webhook on one of the user's own sessions."""

    session = forms.ModelChoiceField(queryset=None, empty_label="(choose a session)",
                                     error_messages={
                                         "required": "Choose the session deliveries go to.",
                                         "invalid_choice": "Choose one of your sessions."})
    name = forms.CharField(max_length=100, error_messages={
        "required": "Give the webhook a name."})
    instructions = forms.CharField(required=False, max_length=10_000,
                                   widget=forms.Textarea(attrs={"rows": 4}),
                                   help_text="What the agent should do with each delivery.")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["session"].queryset = session_list(user=user)
