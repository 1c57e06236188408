"""When a schedule fires: validation, a human description and a preview of the next runs.

Pure rules over two well-kept libraries (issue 12 item 6: no hand-written cron parser):
croniter computes the next fire times and cron-descriptor writes the English description.
The schedules themselves are kept and fired by django-celery-beat's DatabaseScheduler; this
module only says whether an expression is acceptable and what it means, so the form can
explain a mistake before anything is stored.

A cron expression here is exactly five fields, ``minute hour day-of-month month
day-of-week``, the form celery's ``crontab`` (and so the beat scheduler) accepts; macros
(``@daily``) and a sixth seconds field are refused so that what the preview shows is what
beat runs. Times are UTC (settings.TIME_ZONE; the beat rows are stored with UTC).

With both day fields restricted a run needs both (``0 0 13 * 5``: Friday the 13th), as
celery's crontab reads them, so croniter is asked with ``day_or=False``. An expression whose
fields are each in range but that matches no date (``0 0 31 2 *``) is refused here, never
stored: croniter cannot compute its next run and celery's crontab refuses to load it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from cron_descriptor import Options, get_description
from croniter import CroniterError, croniter

MIN_INTERVAL_SECONDS = 60
"""The shortest interval (and, through cron's minute field, the shortest cron period): each
run is a whole model turn, and beat's own tick is seconds; faster would be a loop, not a
schedule."""

MAX_INTERVAL_SECONDS = 366 * 24 * 3600
"""The longest interval: a year and a day (past it, write a cron expression)."""

_PROBE_FROM = datetime(2000, 1, 1, tzinfo=timezone.utc)
"""Where the "does it ever fire" probe starts: fixed, so the answer never depends on the
clock. Every date that exists recurs within croniter's 50-year search (weekdays repeat
every 28 years, 29 February included)."""


class ScheduleError(ValueError):
    """A cron expression or interval that cannot be scheduled; ``str()`` is the readable
    reason a form shows."""


@dataclass(frozen=True, slots=True)
class CronFields:
    """The five fields of a valid expression, named as django-celery-beat's CrontabSchedule
    names them."""

    minute: str
    hour: str
    day_of_month: str
    month_of_year: str
    day_of_week: str

    @property
    def expression(self) -> str:
        return " ".join((self.minute, self.hour, self.day_of_month, self.month_of_year,
                         self.day_of_week))


def cron_parse(expression: str) -> CronFields:
    """The fields of ``expression`` (whitespace-normalised). Raises ScheduleError naming
    what is wrong: not five fields, a macro, or a field croniter rejects."""
    text = " ".join((expression or "").split())
    if not text:
        raise ScheduleError("Enter a cron expression, e.g. '*/15 * * * *' (every 15 minutes).")
    if text.startswith("@"):
        raise ScheduleError("Macros such as @daily are not accepted; write the five fields "
                            "(e.g. '0 0 * * *' for daily at midnight).")
    parts = text.split(" ")
    if len(parts) != 5:
        raise ScheduleError(
            f"A cron expression has five fields (minute hour day-of-month month day-of-week); "
            f"'{text}' has {len(parts)}.")
    if not croniter.is_valid(text):
        raise ScheduleError(f"'{text}' is not a valid cron expression: check each field's "
                            "range (minute 0-59, hour 0-23, day 1-31, month 1-12, "
                            "weekday 0-6).")
    try:
        _fire_times(text, after=_PROBE_FROM, count=1)
    except ScheduleError:
        raise ScheduleError(
            f"'{text}' never fires: no date matches its day-of-month, month and day-of-week "
            "together (e.g. 30 or 31 February, 31 April). Choose a day that exists in the "
            "month(s).") from None
    return CronFields(*parts)


def _fire_times(expression: str, *, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times of a syntactically valid ``expression`` after ``after``,
    with celery's day rule (both day fields must match: ``day_or=False``). Raises
    ScheduleError when they cannot be computed: no matching date within croniter's search
    (CroniterBadDateError) or a year past 9999 (OverflowError); never croniter's own."""
    try:
        it = croniter(expression, after, day_or=False)
        return [it.get_next(datetime) for _ in range(max(0, count))]
    except (CroniterError, ValueError, OverflowError) as exc:
        raise ScheduleError(f"The next run of '{expression}' cannot be computed "
                            f"({exc}).") from None


def cron_describe(expression: str) -> str:
    """English description of a valid expression ("Every 15 minutes"), in 24-hour time,
    with " (UTC)" appended. Raises ScheduleError for an invalid one."""
    fields = cron_parse(expression)
    options = Options()
    options.use_24hour_time_format = True
    try:
        text = get_description(fields.expression, options)
    except Exception as exc:  # cron-descriptor raises its own types for odd-but-valid forms
        raise ScheduleError(f"'{fields.expression}' cannot be described: {exc}") from exc
    return f"{text} (UTC)"


def cron_next_runs(expression: str, *, after: datetime, count: int = 5) -> list[datetime]:
    """The next ``count`` fire times strictly after ``after`` (an aware datetime), in its
    time zone. Raises ScheduleError for an invalid expression or one that never fires (or
    whose next runs cannot be computed), ValueError for a naive ``after``."""
    if after.tzinfo is None:
        raise ValueError("after must be timezone-aware")
    return _fire_times(cron_parse(expression).expression, after=after, count=count)


def interval_check(seconds: int) -> int:
    """``seconds`` if it is an acceptable interval, else ScheduleError with the bounds."""
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise ScheduleError("The interval must be a whole number of seconds.")
    if seconds < MIN_INTERVAL_SECONDS:
        raise ScheduleError(f"The shortest interval is {MIN_INTERVAL_SECONDS} seconds "
                            "(each run is a whole model turn).")
    if seconds > MAX_INTERVAL_SECONDS:
        raise ScheduleError("The longest interval is 366 days; use a cron expression instead.")
    return seconds


def interval_describe(seconds: int) -> str:
    """"Every 90 minutes", "Every 2 days", "Every 45 seconds"-style text for ``seconds``,
    in the largest unit that divides it exactly."""
    interval_check(seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds % size == 0:
            n = seconds // size
            return f"Every {unit}" if n == 1 else f"Every {n} {unit}s"
    raise AssertionError("unreachable: 1 divides every integer")


def interval_next_runs(seconds: int, *, start: datetime, count: int = 5) -> list[datetime]:
    """The next ``count`` fire times of an interval schedule whose last run (or creation)
    was at ``start``: start + k·seconds for k = 1..count (beat's interval semantics)."""
    interval_check(seconds)
    return [start + timedelta(seconds=seconds * k) for k in range(1, max(0, count) + 1)]
