"""Schedule pages: list + create, detail with history, preview, pause/resume/run now/delete.

Thin: every object comes through schedules/selectors.py scoped to the acting user (another
user's schedule is a 404), one service per action, ValidationError shown on the form.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.schedule_rules import ScheduleError
from schedules.forms import ScheduleForm
from schedules.selectors import schedule_get, schedule_list, schedule_runs
from schedules.services import (run_cost, run_status, schedule_create, schedule_delete,
                                schedule_fire, schedule_set_enabled, schedule_timing,
                                timing_preview)


def _rows(user) -> list[dict]:
    rows = []
    for schedule in schedule_list(user=user):
        try:
            timing = schedule_timing(schedule, count=1)
        except ScheduleError as exc:
            timing = None
            schedule.timing_error = str(exc)
        rows.append({"schedule": schedule, "timing": timing})
    return rows


@login_required
@require_http_methods(["GET", "POST"])
def schedule_list_view(request: HttpRequest) -> HttpResponse:
    """GET: the user's schedules and the create form. POST: create; a bad cron expression,
    interval or session is shown on its field (status 400), nothing stored."""
    form = ScheduleForm(request.POST or None, user=request.user,
                        initial={"session": request.GET.get("session")})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                schedule = schedule_create(
                    user=request.user, name=data["name"], prompt=data["prompt"],
                    kind=data["kind"], cron_expression=data["cron_expression"],
                    interval_seconds=data["interval_seconds"], target=data["target"],
                    session=data["session"])
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(request, f"Schedule “{schedule.name}” created.")
                return redirect("schedule_detail", schedule_id=schedule.pk)
        status = 400
    return render(request, "schedules/list.html", {"form": form, "rows": _rows(request.user)},
                  status=status)


@login_required
@require_GET
def schedule_preview_view(request: HttpRequest) -> HttpResponse:
    """HTMX fragment: the description and next five runs of the timing typed so far, or
    the reason it is not valid."""
    kind = request.GET.get("kind", "cron")
    try:
        seconds = int(request.GET.get("interval_seconds") or -1)
    except ValueError:
        seconds = -1
    try:
        timing = timing_preview(kind=kind, cron_expression=request.GET.get("cron_expression", ""),
                                interval_seconds=seconds)
        error = ""
    except ScheduleError as exc:
        timing, error = None, str(exc)
    return render(request, "schedules/preview.html", {"timing": timing, "error": error})


@login_required
@require_GET
def schedule_detail_view(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """One schedule: what and when, the next runs, the run history with status and cost."""
    schedule = schedule_get(user=request.user, schedule_id=schedule_id)
    try:
        timing, timing_error = schedule_timing(schedule), ""
    except ScheduleError as exc:
        timing, timing_error = None, str(exc)
    runs = []
    for run in schedule_runs(schedule=schedule):
        status, label, detail = run_status(run)
        runs.append({"run": run, "status": status, "label": label, "detail": detail,
                     "cost": run_cost(run)})
    return render(request, "schedules/detail.html", {
        "schedule": schedule, "timing": timing, "timing_error": timing_error, "runs": runs})


@login_required
@require_POST
def schedule_action_view(request: HttpRequest, schedule_id: int, action: str) -> HttpResponse:
    """pause / resume / run (now) / delete one of the user's schedules."""
    schedule = schedule_get(user=request.user, schedule_id=schedule_id)
    try:
        if action == "pause":
            schedule_set_enabled(schedule=schedule, enabled=False)
            messages.success(request, "Paused: beat will not fire it until you resume.")
        elif action == "resume":
            schedule_set_enabled(schedule=schedule, enabled=True)
            messages.success(request, "Resumed.")
        elif action == "run":
            run = schedule_fire(schedule_id=schedule.pk, trigger="manual")
            messages.success(request, f"Run {run.number} started." if run and run.turn_id
                             else f"Run not started: {run.error if run else 'schedule gone'}")
        elif action == "delete":
            schedule_delete(schedule=schedule)
            messages.success(request, f"Schedule “{schedule.name}” deleted.")
            return redirect("schedule_list")
        else:
            raise Http404("No such action")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("schedule_detail", schedule_id=schedule_id)
