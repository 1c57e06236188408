"""Forms for account pages: /spend/'s date range and a budget, and a team's approval
policy. Bad input is a form error; nothing is stored (accounts/services.py re-validates
every value it stores and decides)."""

from __future__ import annotations

from django import forms

from accounts.models import Budget
from accounts.money import AMOUNT_HINT, amount_parse, amount_text
from accounts.spend import range_validate
from agents.policy.command_rules import RISK_SEVERITY


class UsdDecimalField(forms.DecimalField):
    """A DecimalField for USD typed in the Django admin (budget caps, rate overrides): the
    text passes accounts/money.py amount_text first, so "1,5" gets the same sentence as on
    /spend/ instead of a bare "Enter a number."."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        try:
            value = amount_text(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from exc
        return super().to_python(value)


class SpendRangeForm(forms.Form):
    """?start=YYYY-MM-DD&end=YYYY-MM-DD (inclusive, UTC). Reversed or longer than a year →
    error."""

    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start and end:
            try:
                data["range"] = range_validate(start, end)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from exc
        elif start or end:
            raise forms.ValidationError("give both a start and an end date")
        return data


class BudgetForm(forms.Form):
    """One cap: scope (team or a member), period, limit in USD ("" removes it), policy."""

    scope = forms.ChoiceField(choices=[("team", "Team"), ("user", "Member")])
    member = forms.IntegerField(required=False)
    period = forms.ChoiceField(choices=Budget.Period.choices)
    limit = forms.CharField(required=False, max_length=30,
                            help_text=f"USD: {AMOUNT_HINT}; empty removes the budget")
    unknown_policy = forms.ChoiceField(choices=Budget.UnknownPolicy.choices,
                                       initial=Budget.UnknownPolicy.BLOCK)

    def clean_limit(self):
        raw = self.cleaned_data.get("limit", "").strip()
        if raw:
            try:
                amount_parse(raw)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return raw

    def clean(self):
        data = super().clean()
        if data.get("scope") == "user" and not data.get("member"):
            raise forms.ValidationError("choose the member this budget is for")
        return data


class TeamPolicyForm(forms.Form):
    """admin_only_risk_classes: the risk classes only an admin other than the requester may
    approve (checkboxes; none checked means the owner may approve everything)."""

    admin_only_risk_classes = forms.MultipleChoiceField(
        choices=[(c, c.replace("_", " ")) for c in RISK_SEVERITY], required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Risk classes that need an admin other than the requester")
