"""Drive one task through the real product path and observe what it left (issue 17 item 3).

session_create → workspace fixture → turn_start → turn_run_task (the Celery task, run
in-process with ``apply`` exactly as a worker runs it) → the real runner, policy, workspace
and tools → the model over HTTP: the provider simulator with the reference agent as its
script (or a real provider in the real-model lanes). Approvals are decided through
approvals.services.approval_decide as the task says; an "expire" decision moves the
request's deadline into the past and lets approval_expire_due fail it closed. A budget is
set with accounts.services.budget_set, raised when it stops the turn, and the turn resumed
with turn_budget_resume. Child sessions (delegation) are driven the same way, until nothing
is runnable. Needs a configured Django (evals/run.py boots one; the tests use pytest-django).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Sum
from django.utils import timezone

from accounts.mcp_forms import McpServerForm
from accounts.mcp_services import mcp_server_save
from accounts.models import Membership, Team
from accounts.services import budget_set, turn_budget_resume
from agents.providers import resolve_profile
from simulator.faults import Fault
from simulator.script import Reply, Script, ScriptRequest
from approvals.models import ApprovalRequest
from approvals.services import approval_decide, approval_expire_due
from evals.reference_agent import reference_policy
from evals.spec import Observation, Task, grade
from schedules.services import schedule_create, schedule_fire
from sessions import toolbox
from sessions.mcp import mcp_manager_reset
from sessions.clarify import clarify_answer
from sessions.models import ClarifyQuestion, Message, RunEvent, Session, Turn, UsageRecord
from sessions.services import session_create, turn_start, turn_steer, workspace_path
from sessions.tasks import turn_run_task, turn_runnable

ROOT = Path(__file__).resolve().parents[1]
FINAL = {Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED}
MAX_DRIVE_ROUNDS = 200


@dataclass(slots=True)
class Outcome:
    """One repetition of one task: ``status`` "pass" / "fail" / "skipped: ..."; figures."""

    task: str
    status: str
    failures: list[str] = field(default_factory=list)
    iterations: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    wall_s: float = 0.0
    compactions: int = 0
    truth_failures: list[str] | None = None
    """The ground-truth grade's failed checks (None: not graded, e.g. skipped)."""
    calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "status": self.status, "failures": self.failures,
                "iterations": self.iterations, "tokens": self.tokens,
                "cost_usd": self.cost_usd, "wall_s": round(self.wall_s, 3),
                "compactions": self.compactions, "calls": self.calls,
                "truth_pass": None if self.truth_failures is None else not self.truth_failures,
                "truth_failures": self.truth_failures or []}


def iteration_budget(task: Task, cap: int | None = None) -> int:
    """The per-turn iteration budget of ``task``: its ``max_iterations`` (30 when unset),
    lowered to ``cap`` when one is given."""
    budget = int(task.data.get("max_iterations", 30))
    return min(budget, cap) if cap else budget


def tools_present() -> set[str]:
    """Names in the product's tool registry (what a task's requires_tools is checked
    against)."""
    return set(toolbox._full_registry().names())


class TaskScript:
    """The simulator script for one task: the reference agent, plus the task's environment
    actions keyed on what the requests carry (never on what the agent knows): faults pushed
    so that request number ``at`` gets them, steers sent through turn_steer when a request
    carries a matching tool result."""

    def __init__(self, task: Task, simulator, session_ref: dict, policy=reference_policy):
        self.task, self.simulator, self.session_ref = task, simulator, session_ref
        self.policy = policy
        self.count = 0
        self.lock = threading.Lock()
        self.fired: set[int] = set()
        for item in task.data.get("faults", []):  # faults for the very first request
            if int(item["at"]) == 1:
                self._push(item)

    def _push(self, item: dict) -> None:
        """Queue ``count`` (default 1) copies of the fault: the retries of that request
        meet them one after another. Faulted requests never reach the script, so they
        are counted here."""
        fault = Fault.from_dict({k: v for k, v in item.items() if k not in ("at", "count")})
        for _ in range(int(item.get("count", 1))):
            self.simulator.state.faults.push(fault)
        with self.lock:
            self.count += int(item.get("count", 1))

    def __call__(self, request: ScriptRequest) -> Reply:
        with self.lock:
            self.count += 1
            number = self.count
        for item in self.task.data.get("faults", []):
            # Faults are taken before the script runs: push now for the NEXT request. A
            # faulted request never reaches the script, so it is counted here by hand.
            if int(item["at"]) == number + 1:
                self._push(item)
        for index, item in enumerate(self.task.data.get("steers", [])):
            if index in self.fired:
                continue
            if any(re.search(item["when_result"], x.result) for x in request.tool_results):
                self.fired.add(index)
                session, user = self.session_ref["session"], self.session_ref["user"]
                turn_steer(session=session, user=user, text=item["text"])
        return self.policy(request)


def _user(name: str):
    """The task's owner: a member of its own team that lets owners approve destructive
    classes themselves (the two-person rule is tested in tests/security, not here), and
    staff so it may set its session's budget."""
    model = get_user_model()
    user = model.objects.filter(username=name).first()
    if user is None:
        user = model.objects.create_user(username=name, password=None, is_staff=True)
        team = Team.objects.create(name=f"team-{name}", admin_only_risk_classes=[])
        Membership.objects.create(user=user, team=team, role="admin")
    return user


class TaskSetupError(RuntimeError):
    """The task's environment could not be set up (an MCP server the admin form refused)."""


def _configure_mcp_servers(task: Task, user) -> None:
    """Save the task's ``[[mcp_servers]]`` for ``user``'s team as a team admin does: the
    admin form (it checks the fields, connects and lists the tools) then mcp_server_save.
    Raises TaskSetupError with the form's errors."""
    team_id = user.memberships.get().team_id
    team = Team.objects.get(pk=team_id)
    for item in task.data.get("mcp_servers", []):
        fill = {"{python}": sys.executable, "{root}": str(ROOT)}
        command = str(item.get("command", ""))
        for key, value in fill.items():
            command = command.replace(key, value)
        form = McpServerForm(data={
            "name": item["name"], "transport": item["transport"], "command": command,
            "url": str(item.get("url", "")), "env": str(item.get("env", "")),
            "expose": str(item.get("expose", "")),
            "default_policy": str(item.get("default_policy", "ask")),
            "tool_policies": str(item.get("tool_policies", "")), "enabled": "on"},
            team=team, user=user)
        if not form.is_valid():
            raise TaskSetupError(f"MCP server {item['name']!r} refused by the admin form: "
                                 f"{form.errors.as_text()}")
        mcp_server_save(user=user, team_id=team_id, data=form.cleaned_data)


def _lineage(session: Session) -> list[Session]:
    out, frontier = [session], [session]
    while frontier:
        children = list(Session.objects.filter(parent__in=frontier).order_by("id"))
        out += children
        frontier = children
    return out


def _decide_approvals(task: Task, sessions: list[Session], user, notes: list[str]) -> bool:
    """Answer every pending approval of the lineage as the task says. True if any."""
    acted = False
    pending = ApprovalRequest.objects.filter(session__in=sessions,
                                             state=ApprovalRequest.State.PENDING).order_by("id")
    for approval in pending:
        text = f"{approval.tool_name}: {approval.command} {json.dumps(approval.arguments)}"
        rule = next((r for r in task.data.get("approvals", [])
                     if re.search(r.get("match", ""), text)), None)
        acted = True
        if rule is None:
            notes.append(f"unexpected approval asked: {approval.command!r}")
            approval_decide(user=user, approval_id=approval.pk, choice="deny",
                            reason="not expected by the task")
        elif rule["decision"] == "approve":
            approval_decide(user=user, approval_id=approval.pk, choice="once")
        elif rule["decision"] == "deny":
            approval_decide(user=user, approval_id=approval.pk, choice="deny",
                            reason=rule.get("reason", ""))
        else:
            ApprovalRequest.objects.filter(pk=approval.pk).update(
                expires_at=timezone.now() - timedelta(seconds=1))
            approval_expire_due()
    return acted


def _answer_questions(task: Task, sessions: list[Session], user, notes: list[str]) -> bool:
    """Answer every pending clarify question of the lineage with the task's [[answers]]
    (in order; a question past the list is noted and answered "no answer planned")."""
    acted = False
    answers = task.data.get("answers", [])
    for question in ClarifyQuestion.objects.filter(
            session__in=sessions, state=ClarifyQuestion.State.PENDING).order_by("id"):
        acted = True
        asked = ClarifyQuestion.objects.filter(session__in=sessions).exclude(
            state=ClarifyQuestion.State.PENDING).count()
        if asked < len(answers):
            text = str(answers[asked]["text"])
        else:
            notes.append(f"unexpected clarify question: {question.question!r}")
            text = "no answer planned"
        clarify_answer(user=user, question_id=question.pk, answer=text)
    return acted


def _drive(task: Task, root: Session, user, notes: list[str], budget: dict,
           iteration_cap: int | None = None) -> None:
    """Run every runnable turn of the lineage until the root's last turn is final.
    ``iteration_cap`` (real-model lanes): stop driving once a turn has been charged more
    iterations than its budget (a model that keeps asking questions or for approvals is
    resumed again and again; the overrun is noted as a run that did not settle)."""
    for _ in range(MAX_DRIVE_ROUNDS):
        sessions = _lineage(root)
        if iteration_cap is not None:
            over = (Turn.objects.filter(session__in=sessions, iterations__gt=iteration_cap)
                    .order_by("id").first())
            if over is not None:
                notes.append(f"the task did not settle: a turn was charged {over.iterations} "
                             f"iterations, over its budget of {iteration_cap} (resumed after "
                             f"each answer or approval); the runner stopped driving it")
                return
        ran = False
        for session in sessions:
            if turn_runnable(session=session):
                turn_run_task.apply(args=[session.pk])
                ran = True
        if ran:
            continue
        if _decide_approvals(task, sessions, user, notes):
            continue
        if _answer_questions(task, sessions, user, notes):
            continue
        last = Turn.objects.filter(session=root).order_by("-id").first()
        if (last is not None and last.status == Turn.Status.BUDGET_BLOCKED
                and budget and not budget.get("raised")):
            budget["raised"] = True
            budget_set(actor=user, scope="session", session=root, period="day",
                       limit=str(budget["raise_to_usd"]))
            turn_budget_resume(session=root, user=user)
            continue
        return
    notes.append(f"the task did not settle in {MAX_DRIVE_ROUNDS} rounds")


def observe(task: Task, root: Session, others: list[Session] = ()) -> Observation:
    """Everything the grader needs, read from the database and the workspace: the answer,
    status and files of ``root`` (the last session used); calls, approvals, events and
    usage of every session of the task (``others`` and all their children too)."""
    sessions = [s for r in [*others, root] for s in _lineage(r)]
    obs = Observation()
    ws = workspace_path(root)
    for path in sorted(ws.rglob("*")):
        if path.is_file() and ".hermes" not in path.relative_to(ws).parts:
            try:
                obs.files[str(path.relative_to(ws))] = path.read_text()
            except (OSError, UnicodeDecodeError):
                obs.files[str(path.relative_to(ws))] = None
    final = (Message.objects.filter(session=root, role="assistant").exclude(content="")
             .order_by("-id").first())
    obs.answer = final.content if final else ""
    for message in Message.objects.filter(session__in=sessions, role="assistant").order_by("id"):
        for call in message.tool_calls or []:
            obs.calls.append(_call_of(call))
            obs.raw_calls.append(_raw_call_of(call))
    # Read afresh: the root object predates its first turn's tool rebuild (MCP tools).
    for session in Session.objects.filter(pk__in=[s.pk for s in sessions]):
        for spec in toolbox.registry_for(session).specs(session.tool_names or None):
            obs.offered[spec.name] = dict(spec.input_schema)
    ended = {e.payload.get("turn_id"): str(e.payload.get("status", ""))
             for e in RunEvent.objects.filter(session__in=sessions, type="turn.finished")}
    obs.turns = [(t.status, t.iterations, ended.get(t.pk, "")) for t in
                 Turn.objects.filter(session__in=sessions).order_by("id")]
    obs.approvals = [(f"{a.tool_name}: {a.command}", a.state) for a in
                     ApprovalRequest.objects.filter(session__in=sessions).order_by("id")]
    obs.events = dict(RunEvent.objects.filter(session__in=sessions).values_list("type")
                      .annotate(n=Count("id")).values_list("type", "n"))
    last = Turn.objects.filter(session=root).order_by("-id").first()
    obs.status = last.status if last else "none"
    if last is not None and last.status != Turn.Status.COMPLETED and last.error:
        obs.notes.append(f"last turn {last.status}: {last.error[:300]}")
    usage = UsageRecord.objects.filter(session__in=sessions)
    sums = usage.aggregate(i=Sum("input_tokens"), r=Sum("cache_read_tokens"),
                           w5=Sum("cache_write_5m_tokens"), w1=Sum("cache_write_1h_tokens"),
                           o=Sum("output_tokens"), c=Sum("cost_usd"))
    obs.tokens = {"input": sums["i"] or 0, "read": sums["r"] or 0,
                  "write": (sums["w5"] or 0) + (sums["w1"] or 0), "output": sums["o"] or 0}
    obs.cost_usd = None if usage.filter(cost_usd__isnull=True).exists() else float(
        sums["c"] or 0)
    obs.iterations = usage.filter(purpose="turn").count()
    obs.purposes = dict(usage.values_list("purpose").annotate(n=Count("id"))
                        .values_list("purpose", "n"))
    return obs


def _call_of(call: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(call, dict):
        name = call.get("name", "")
        args = call.get("arguments", call.get("input", {}))
    else:
        name, args = getattr(call, "name", ""), getattr(call, "arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {"_raw": args}
    return str(name), args if isinstance(args, dict) else {}


def _raw_call_of(call: Any) -> tuple[str, str]:
    """(name, arguments text) of a stored call, the arguments exactly as the model sent
    them (a dict, from an older row, is dumped)."""
    if not isinstance(call, dict):
        call = {"name": getattr(call, "name", ""), "arguments": getattr(call, "arguments", "")}
    args = call.get("arguments", call.get("input", ""))
    return str(call.get("name", "")), args if isinstance(args, str) else json.dumps(args)


def run_task(task: Task, *, simulator=None, rep: int = 1, policy=reference_policy,
             grade_fn=grade, max_iterations: int | None = None) -> Outcome:
    """One repetition of ``task``. ``simulator``: the SimulatorServer whose script is set
    for this task (None: a real provider, configured in settings). ``grade_fn(task,
    observation) -> failures`` decides pass / fail (default: the task's ground truth; the
    ground truth's own verdict is kept in ``Outcome.truth_failures`` either way).
    ``max_iterations`` caps the task's per-turn iteration budget (a slow local model).
    Never raises for a task failure: it is reported in the Outcome."""
    missing = [t for t in task.requires_tools if t not in tools_present()]
    if missing:
        return Outcome(task=task.id, status=f"skipped: tool {missing[0]} not present")
    started = time.monotonic()
    hermes = dict(settings.HERMES)
    window = int(task.data.get("context_window", 200_000))
    settings.HERMES = {**hermes, "BACKEND": "local", "RETRY_BASE_DELAY": 0.01,
                       "MAX_RETRY_AFTER": 1.0, "SIMULATOR_EMBEDDED": False,
                       "MAX_ITERATIONS": iteration_budget(task, max_iterations),
                       "CONTEXT_WINDOW": window if simulator is not None else
                       hermes["CONTEXT_WINDOW"], "BUDGET_WAIT_SECONDS": 0,
                       # A task's MCP server is started on a loaded host (CI, two cores):
                       # the waits are ceilings, a server that is up ends them at once.
                       "MCP_CHECK_TIMEOUT": max(hermes["MCP_CHECK_TIMEOUT"], 60.0),
                       "MCP_CONNECT_WAIT": max(hermes["MCP_CONNECT_WAIT"], 30.0)}
    toolbox.backend_kind.cache_clear()
    notes: list[str] = []
    try:
        user = _user(f"eval-{task.id}-{rep}"[:150])
        _configure_mcp_servers(task, user)
        session = session_create(user=user, title=f"eval {task.id} #{rep}")
        if simulator is not None and task.data.get("provider"):  # e.g. the OpenAI wire
            profile = resolve_profile(task.data["provider"])
            Session.objects.filter(pk=session.pk).update(provider=profile.name,
                                                         model=profile.default_model)
            session.refresh_from_db()
        ws = workspace_path(session)
        if task.workspace.is_dir():
            shutil.copytree(task.workspace, ws, dirs_exist_ok=True)
        ref = {"session": session, "user": user}
        if simulator is not None:
            simulator.state.reset()
            simulator.state.configure(context_window=window)
            simulator.state.script = Script(TaskScript(task, simulator, ref, policy))
        budget = dict(task.data.get("budget", {}))
        cap = settings.HERMES["MAX_ITERATIONS"] if simulator is None else None
        if budget:
            budget_set(actor=user, scope="session", session=session, period="day",
                       limit=str(budget["limit_usd"]))
        sessions = {1: session}
        for text, gap, number, only_if_failed in task.messages():
            if only_if_failed and not Turn.objects.filter(
                    session=sessions[number] if number in sessions else session,
                    status=Turn.Status.FAILED).exists():
                continue
            if gap and simulator is not None:
                simulator.state.clock.advance(gap)
            if number not in sessions:  # another session of the same user (memory tasks)
                sessions[number] = session_create(user=user,
                                                  title=f"eval {task.id} #{rep}.{number}")
                shutil.copytree(ws, workspace_path(sessions[number]), dirs_exist_ok=True)
            current = sessions[number]
            ref["session"] = current
            turn_start(session=current, user=user, text=text)
            _drive(task, current, user, notes, budget, cap)
        for index, item in enumerate(task.data.get("schedules", [])):
            # A schedule appending to the session, fired as beat would fire it (the run is an
            # unattended turn, origin "schedule"), `fires` times, the clock moved between.
            schedule = schedule_create(
                user=user, name=f"eval-{index}", prompt=str(item["prompt"]), kind="interval",
                interval_seconds=int(item.get("every_seconds", 3600)), target="session",
                session=current)
            for _ in range(int(item.get("fires", 1))):
                if simulator is not None:
                    simulator.state.clock.advance(int(item.get("every_seconds", 3600)))
                schedule_fire(schedule_id=schedule.pk, trigger="beat")
                _drive(task, current, user, notes, budget, cap)
        obs = observe(task, current, [s for s in sessions.values() if s.pk != current.pk])
        obs.notes += notes
        if simulator is not None:
            with simulator.state.lock:
                obs.faults_fired = sum(1 for r in simulator.state.requests if r.fault)
        failures = grade_fn(task, obs)
        truth = failures if grade_fn is grade else grade(task, obs)
        return Outcome(task=task.id, status="pass" if not failures else "fail",
                       failures=failures, iterations=obs.iterations, tokens=obs.tokens,
                       cost_usd=obs.cost_usd, wall_s=time.monotonic() - started,
                       compactions=obs.events.get("compaction", 0), truth_failures=truth,
                       calls=len(obs.raw_calls))
    except TaskSetupError as error:
        return Outcome(task=task.id, status="fail", failures=[f"setup: {error}"],
                       wall_s=time.monotonic() - started)
    except Exception as error:  # a crash is a failed task, reported, not a dead suite
        return Outcome(task=task.id, status="fail", failures=[f"crashed: {error!r}"],
                       wall_s=time.monotonic() - started)
    finally:
        settings.HERMES = hermes
        toolbox.backend_kind.cache_clear()
        if task.data.get("mcp_servers"):  # stop the server processes this task started
            mcp_manager_reset()
