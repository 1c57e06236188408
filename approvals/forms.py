"""Forms for the approval gate's POSTs: a decision and the per-session bypass toggle.
Who may do what is decided in approvals/services.py, not here."""

from __future__ import annotations

from django import forms

from approvals.services import CHOICES


class ApprovalDecisionForm(forms.Form):
    """choice: once / session / always / deny; reason: optional, passed to the model on deny
    (at most 2,000 chars). The pair decision=approve|deny + scope=once|session|always is
    accepted too (the chat page's card posts it)."""

    choice = forms.ChoiceField(choices=[(c, c) for c in CHOICES], required=False)
    decision = forms.ChoiceField(choices=[("approve", "approve"), ("deny", "deny")],
                                 required=False)
    scope = forms.ChoiceField(choices=[(c, c) for c in CHOICES if c != "deny"],
                              required=False)
    reason = forms.CharField(required=False, max_length=2000, strip=True)

    def clean(self) -> dict:
        data = super().clean()
        if not data.get("choice"):
            if data.get("decision") == "deny":
                data["choice"] = "deny"
            elif data.get("decision") == "approve":
                data["choice"] = data.get("scope") or "once"
            else:
                raise forms.ValidationError(
                    "Choose approve once, for this session, always, or deny.")
        return data


class SessionBypassForm(forms.Form):
    """enabled: the new value of the session's approval bypass (absent means off)."""

    enabled = forms.BooleanField(required=False)
