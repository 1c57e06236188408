"""Forms for account pages: a team's approval policy (accounts/services.py decides)."""

from __future__ import annotations

from django import forms

from agents.command_rules import RISK_SEVERITY


class TeamPolicyForm(forms.Form):
    """admin_only_risk_classes: the risk classes only an admin other than the requester may
    approve (checkboxes; none checked means the owner may approve everything)."""

    admin_only_risk_classes = forms.MultipleChoiceField(
        choices=[(c, c.replace("_", " ")) for c in RISK_SEVERITY], required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Risk classes that need an admin other than the requester")
