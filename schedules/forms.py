"""The schedule form: parses request data; the rules are schedules/services.py's
(``schedule_create`` re-checks and its ValidationError lands on the right field)."""

from __future__ import annotations

from django import forms

from agents.schedule_rules import MAX_INTERVAL_SECONDS, MIN_INTERVAL_SECONDS
from schedules.models import Schedule
from sessions.selectors import session_list


class ScheduleForm(forms.Form):
    """A new schedule. ``session`` offers only the user's own active sessions (another
    user's id is not a valid choice, so it can never be targeted)."""

    name = forms.CharField(max_length=100, error_messages={
        "required": "Give the schedule a name.",
        "max_length": "A name can be at most 100 characters."})
    prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), error_messages={
        "required": "The prompt is empty: say what the agent should do on each run."})
    kind = forms.ChoiceField(choices=Schedule.Kind.choices, initial=Schedule.Kind.CRON,
                             widget=forms.RadioSelect)
    cron_expression = forms.CharField(required=False, max_length=100,
                                      help_text="minute hour day-of-month month day-of-week, "
                                                "UTC; e.g. */15 * * * *")
    # The field's bounds are agents/schedule_rules.py's, with its sentences: 0 or -5 get the
    # same "shortest interval is 60 seconds" as 59, not Django's "greater than or equal to 1".
    interval_seconds = forms.IntegerField(
        required=False, min_value=MIN_INTERVAL_SECONDS, max_value=MAX_INTERVAL_SECONDS,
        error_messages={
            "invalid": "The interval must be a whole number of seconds.",
            "min_value": f"The shortest interval is {MIN_INTERVAL_SECONDS} seconds (each run "
                         "is a whole model turn).",
            "max_value": "The longest interval is 366 days; use a cron expression instead."})
    target = forms.ChoiceField(choices=Schedule.Target.choices,
                               initial=Schedule.Target.SESSION, widget=forms.RadioSelect)
    session = forms.ModelChoiceField(queryset=None, required=False,
                                     empty_label="(choose a session)", error_messages={
                                         "invalid_choice": "Choose one of your sessions."})

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["session"].queryset = session_list(user=user)
