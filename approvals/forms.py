"""Forms for the approval gate's three POSTs: a decision, a rule revocation (no fields) and
the per-session bypass toggle. Validation of who may do what lives in approvals/services.py."""

from __future__ import annotations

from django import forms

from approvals.services import CHOICES


class ApprovalDecisionForm(forms.Form):
    """choice: once / session / always / deny; reason: optional, passed to the model on deny
    (at most 2,000 chars)."""

    choice = forms.ChoiceField(choices=[(c, c) for c in CHOICES])
    reason = forms.CharField(required=False, max_length=2000, strip=True)


class SessionBypassForm(forms.Form):
    """enabled: the new value of the session's approval bypass (absent means off)."""

    enabled = forms.BooleanField(required=False)
