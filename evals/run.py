"""The task suite's runner: ``python -m evals.run`` (``make eval``), issue 17 items 3 and 4.

Rules of measurement (hermes's one agent-level eval, seed "What it does not measure"):
every measurement is three repetitions (``--reps``, default 3); a difference under 3%
between runs, or against the baseline, is noise. Each run prints per task pass/fail,
iterations, tokens by bucket (input / cache read / cache write / output), cost and wall
time, then the totals; writes the JSON report (``--report``, default var/evals/report.json);
and with ``--baseline`` compares against the stored baseline (evals/baseline.json) and names
the tasks that regressed (exit 1 if any). ``--write-baseline`` stores this run as the baseline.

The offline lane (``offline``, ``make eval-offline``): SmolLM2-135M-Instruct served by
llama-cpp-python's OpenAI-compatible server from ``.venv-offline/`` (evals/offline.py),
reached through the ``llamacpp`` provider profile. A 135M model cannot do the tasks, so it
is graded on structure only (evals/spec.py ``grade_structure``: well-formed calls of offered
tools, no HTTP error from the provider, every turn ends within its budget); the ground
truth is still graded and shown (``truth``), never counted. By default it runs
OFFLINE_TASKS with the per-turn budget capped at OFFLINE_ITERATIONS and replies capped at
OFFLINE_MAX_TOKENS, to keep its wall time to minutes on two cores.

A task passes only when all its repetitions pass. The figures shown are the median of the
repetitions; ``spread`` is (max - min) / median of the cost over the repetitions, flagged
``NOISY`` past 3% (the reference lane is deterministic, so it should read 0%).

Lanes (``--provider``): ``reference`` (default) the provider simulator with the reference
agent; ``anthropic`` the Messages API (needs ANTHROPIC_API_KEY; HERMES_MODEL picks the
model); ``openai`` any OpenAI-compatible endpoint (needs OPENAI_BASE_URL, and
OPENAI_API_KEY unless the endpoint takes none: set it to "none"). A real-model lane is graded
on the same ground truth; faults, steers and summaries that belong to the simulator are
skipped there and said so.

Environment: a temporary HERMES_DATA_DIR of its own (SQLite WAL database, workspaces),
embedded mode (no DATABASE_URL / REDIS_URL), the product's real path (evals/harness.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evals import breaks, offline  # noqa: E402  (no Django needed)

NOISE = 0.03
"""Relative difference under which two measurements are the same (3%)."""
REPS = 3
BASELINE = ROOT / "evals" / "baseline.json"
REPORT = ROOT / "var" / "evals" / "report.json"
SIMULATOR_ONLY = ("faults", "steers")
"""Task features that need the simulator: a real-model lane cannot inject them."""
OFFLINE_TASKS = ("t01", "t08", "t37")
"""The offline lane's default subset: multi-step file work, a parallel batch then a
dependent patch, an MCP tool (more: EVAL_ARGS="t03 t26 ..."; each session's prompt is
~2k tokens, of which ~900 differ per session, and one loaded CPU core reads them at
20-35 tokens a second)."""
OFFLINE_ITERATIONS = 3
"""The offline lane's per-turn iteration cap (the task's own budget when lower)."""
OFFLINE_MAX_TOKENS = 96
"""The offline lane's reply cap (tokens): SmolLM2 on a loaded CPU core writes a few a
second; 96 holds any argument object the tasks need."""


class LaneError(RuntimeError):
    """A real-model lane asked for without what it needs (key, endpoint)."""


def lane_environment(provider: str) -> dict[str, str]:
    """The environment variables that point the harness at ``provider``. Raises LaneError
    with the missing setting named."""
    if provider == "reference":
        return {"HERMES_PROVIDER": "simulator", "HERMES_MODEL": "", "ANTHROPIC_API_KEY": "",
                "OPENAI_API_KEY": ""}
    if provider == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise LaneError("make eval PROVIDER=anthropic needs ANTHROPIC_API_KEY in the "
                            "environment (and network access to api.anthropic.com); none is "
                            "set, so the real-model lane cannot run.")
        return {"HERMES_PROVIDER": "anthropic"}
    if provider == "openai":
        if not os.environ.get("OPENAI_BASE_URL"):
            raise LaneError("make eval PROVIDER=openai needs OPENAI_BASE_URL (an OpenAI-"
                            "compatible endpoint, e.g. http://127.0.0.1:8080/v1) and "
                            "OPENAI_API_KEY (\"none\" for an endpoint without keys); "
                            "OPENAI_BASE_URL is not set.")
        if not os.environ.get("OPENAI_API_KEY"):
            raise LaneError("make eval PROVIDER=openai needs OPENAI_API_KEY (\"none\" for an "
                            "endpoint that takes no key).")
        return {"HERMES_PROVIDER": "openai"}
    if provider == "offline":
        try:
            offline.model_path()
        except offline.OfflineLaneError as error:
            raise LaneError(f"the offline lane needs its model server: {error}") from error
        return {"HERMES_PROVIDER": "llamacpp", "HERMES_MODEL": offline.MODEL_ALIAS,
                "HERMES_CONTEXT_WINDOW": str(offline.N_CTX),
                "HERMES_MAX_OUTPUT_TOKENS": str(OFFLINE_MAX_TOKENS),
                "HERMES_FALLBACK_PROVIDERS": "", "ANTHROPIC_API_KEY": "",
                "OPENAI_API_KEY": ""}
    raise LaneError(f"unknown lane {provider!r}: reference, anthropic, openai or offline")


# --- summarising repetitions ------------------------------------------------------------

def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def summarise(task_id: str, reps: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the table from a task's repetitions (Outcome.to_dict() each)."""
    statuses = [r["status"] for r in reps]
    if all(s.startswith("skipped") for s in statuses):
        return {"task": task_id, "status": statuses[0], "reps": reps}
    status = "pass" if all(s == "pass" for s in statuses) else "fail"
    costs = [r["cost_usd"] or 0.0 for r in reps]
    mid = _median(costs)
    spread = (max(costs) - min(costs)) / mid if mid else 0.0
    buckets = ("input", "read", "write", "output")
    truth = [r.get("truth_pass") for r in reps]
    return {"task": task_id, "status": status,
            "truth_passes": sum(1 for t in truth if t),
            "calls": _median([r.get("calls", 0) for r in reps]),
            "passes": sum(1 for s in statuses if s == "pass"), "reps_run": len(reps),
            "iterations": _median([r["iterations"] for r in reps]),
            "compactions": _median([r.get("compactions", 0) for r in reps]),
            "tokens": {b: _median([r["tokens"].get(b, 0) for r in reps]) for b in buckets},
            "cost_usd": mid, "spread": spread, "noisy": spread > NOISE,
            "wall_s": _median([r["wall_s"] for r in reps]),
            "failures": sorted({f for r in reps for f in r["failures"]}), "reps": reps}


def compare(current: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Regressions of ``current`` against ``baseline`` (report dicts): a task that passed and
    fails, or whose iterations, total tokens or cost grew by more than the noise (3%)."""
    base = {row["task"]: row for row in baseline.get("tasks", [])}
    out = []
    for row in current["tasks"]:
        old = base.get(row["task"])
        if old is None or old["status"] != "pass" or row["status"].startswith("skipped"):
            continue
        if row["status"] != "pass":
            out.append(f"{row['task']}: passed in the baseline, fails now "
                       f"({'; '.join(row.get('failures', []))[:200]})")
            continue
        for label, now, then in (
                ("iterations", row["iterations"], old["iterations"]),
                ("tokens", sum(row["tokens"].values()), sum(old["tokens"].values())),
                ("cost", row["cost_usd"], old["cost_usd"])):
            if then and (now - then) / then > NOISE:
                out.append(f"{row['task']}: {label} {then:g} -> {now:g} "
                           f"(+{(now - then) / then:.1%}, over the 3% noise)")
    return out


def print_table(rows: list[dict[str, Any]], totals: dict[str, Any], *,
                structure: bool = False) -> None:
    """The per-task table and the totals. ``structure``: the offline lane's columns too
    (tool calls made, ground-truth passes out of the repetitions, shown, not graded)."""
    header = ("task", "result", "iter", "compact", "input", "read", "write", "output",
              "cost $", "spread", "wall s", *(("calls", "truth") if structure else ()))
    cells = []
    for row in rows:
        if row["status"].startswith("skipped"):
            cells.append((row["task"], row["status"], *[""] * (len(header) - 2)))
            continue
        t = row["tokens"]
        result = row["status"] if row["status"] == "pass" else (
            f"FAIL {row['passes']}/{row['reps_run']}")
        extra = (f"{row['calls']:.0f}", f"{row['truth_passes']}/{row['reps_run']}")
        cells.append((row["task"], result, f"{row['iterations']:.0f}",
                      f"{row['compactions']:.0f}", f"{t['input']:.0f}",
                      f"{t['read']:.0f}", f"{t['write']:.0f}", f"{t['output']:.0f}",
                      f"{row['cost_usd']:.4f}",
                      f"{row['spread']:.1%}" + (" NOISY" if row["noisy"] else ""),
                      f"{row['wall_s']:.2f}", *(extra if structure else ())))
    t = totals["tokens"]
    extra = (f"{totals['calls']:.0f}", f"{totals['truth_passed']}/{totals['graded']}")
    cells.append(("TOTAL", f"{totals['passed']}/{totals['graded']} pass, "
                           f"{totals['skipped']} skipped",
                  f"{totals['iterations']:.0f}", "", f"{t['input']:.0f}", f"{t['read']:.0f}",
                  f"{t['write']:.0f}", f"{t['output']:.0f}", f"{totals['cost_usd']:.4f}", "",
                  f"{totals['wall_s']:.2f}", *(extra if structure else ())))
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]

    def line(values):
        return "  ".join(v.ljust(w) if i < 2 else v.rjust(w)
                         for i, (v, w) in enumerate(zip(values, widths)))
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for index, c in enumerate(cells):
        if index == len(cells) - 1:
            print("  ".join("-" * w for w in widths))
        print(line(c))


def totals_of(rows: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    graded = [r for r in rows if not r["status"].startswith("skipped")]
    return {"graded": len(graded), "passed": sum(1 for r in graded if r["status"] == "pass"),
            "skipped": len(rows) - len(graded),
            "iterations": sum(r["iterations"] for r in graded),
            "tokens": {b: sum(r["tokens"][b] for r in graded)
                       for b in ("input", "read", "write", "output")},
            "cost_usd": sum(r["cost_usd"] for r in graded), "wall_s": wall,
            "calls": sum(r.get("calls", 0) for r in graded),
            "truth_passed": sum(1 for r in graded
                                if r.get("truth_passes", 0) == r.get("reps_run"))}


# --- running ------------------------------------------------------------------------------

def run_suite(tasks, *, reps: int = REPS, simulator=None, policy=None, progress=None,
              server: offline.LlamaServer | None = None,
              max_iterations: int | None = None) -> dict[str, Any]:
    """Run ``tasks`` × ``reps`` in the configured Django (a report dict). ``simulator``
    None = a real-model lane (simulator-only features skipped). ``server``: the offline
    lane's model server; each repetition is then graded on structure (grade_structure with
    the statuses the server logged during it). ``max_iterations`` caps each task's budget."""
    from evals.harness import Outcome, iteration_budget, run_task
    from evals.reference_agent import reference_policy
    from evals.spec import grade, grade_structure

    def grader(task, mark):
        if server is None:
            return grade
        return lambda t, obs: grade_structure(obs, budget=iteration_budget(t, max_iterations),
                                              statuses=server.statuses_since(mark))

    started = time.monotonic()
    rows = []
    for task in tasks:
        outcomes = []
        for rep in range(1, reps + 1):
            if simulator is None and any(task.data.get(k) for k in SIMULATOR_ONLY):
                outcome = Outcome(task=task.id, status="skipped: needs the simulator "
                                  "(fault or steer injection)")
            else:
                mark = server.mark() if server is not None else 0
                outcome = run_task(task, simulator=simulator, rep=rep,
                                   policy=policy or reference_policy,
                                   grade_fn=grader(task, mark), max_iterations=max_iterations)
            outcomes.append(outcome.to_dict())
            if outcome.status.startswith("skipped"):
                outcomes = [outcome.to_dict()] * reps
                break
        row = summarise(task.id, outcomes)
        rows.append(row)
        if progress:
            progress(row)
    wall = time.monotonic() - started
    return {"reps": reps, "noise": NOISE, "tasks": rows, "totals": totals_of(rows, wall)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the Hermes task suite (issue 17).")
    parser.add_argument("tasks", nargs="*", help="task ids (or prefixes); default all")
    parser.add_argument("--provider", default=os.environ.get("PROVIDER") or "reference")
    parser.add_argument("--reps", type=int, default=REPS)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="compare against this baseline (make eval: evals/baseline.json)")
    parser.add_argument("--write-baseline", action="store_true")
    parser.add_argument("--max-iterations", type=int, default=None,
                        help="cap each task's per-turn iteration budget (offline lane: "
                             f"{OFFLINE_ITERATIONS})")
    parser.add_argument("--break", dest="breakage", default=None,
                        help="apply a deliberate harness break (evals/breaks.py: "
                             "reverse-parallel, drop-oldest-result, truncate-results) to show "
                             "the suite notices it")
    args = parser.parse_args(argv)
    try:
        lane = lane_environment(args.provider)
    except LaneError as error:
        print(f"eval: {error}", file=sys.stderr)
        return 2

    from evals.spec import load_tasks

    structure = args.provider == "offline"
    if structure and args.max_iterations is None:
        args.max_iterations = OFFLINE_ITERATIONS
    tasks = load_tasks(args.tasks or (list(OFFLINE_TASKS) if structure else None))
    tmp = Path(tempfile.mkdtemp(prefix="hermes-eval-"))
    for key in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(key, None)
    os.environ.update({"DJANGO_SETTINGS_MODULE": "hermes_web.settings",
                       "HERMES_DATA_DIR": str(tmp), "HERMES_SQLITE_PATH": str(tmp / "eval.db"),
                       "HERMES_SIMULATOR_EMBEDDED": "0", "HERMES_BACKEND": "local",
                       "HERMES_LOG_LEVEL": "ERROR", "DJANGO_SECRET_KEY": "eval-suite",
                       **lane})
    simulator = server = None
    try:
        if structure:
            server = offline.LlamaServer(ROOT / "var" / "evals" / "llama-server.log").start()
            os.environ["OPENAI_BASE_URL"] = server.url
            print(f"model server: SmolLM2-135M-Instruct at {server.url} (llama-cpp-python, "
                  f"{offline.CHAT_FORMAT}, n_ctx {offline.N_CTX}), up in "
                  f"{server.started_s:.1f} s; log {server.log_path}")
        if args.provider == "reference":
            from simulator import SimulatorServer

            simulator = SimulatorServer(host="127.0.0.1", port=0).start()
            # A cut stream (fault tasks) leaves the client's socket reset; the stdlib server
            # would print that traceback on the table. Its requests are recorded anyway.
            simulator._server.handle_error = lambda request, address: None
            os.environ["HERMES_SIMULATOR_URL"] = simulator.url
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0, interactive=False)
        if args.breakage:
            breaks.apply(args.breakage)
            print(f"HARNESS BREAK APPLIED: {args.breakage} (evals/breaks.py)")
        print(f"hermes task suite: {len(tasks)} tasks x {args.reps} repetitions, lane "
              f"{args.provider}, data dir {tmp}")
        if structure:
            print(f"graded on structure only (calls, provider statuses, loop ends within "
                  f"{args.max_iterations} iterations a turn; replies capped at "
                  f"{OFFLINE_MAX_TOKENS} tokens)")
        report = run_suite(tasks, reps=args.reps, simulator=simulator, server=server,
                           max_iterations=args.max_iterations,
                           progress=lambda row: print(f"  {row['task']}: {row['status']}",
                                                      flush=True))
    except offline.OfflineLaneError as error:
        print(f"eval: {error}", file=sys.stderr)
        return 2
    finally:
        if simulator is not None:
            simulator.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report["lane"] = args.provider
    if structure:
        report["grade"] = "structure"
        report["max_iterations"] = args.max_iterations
        report["max_tokens"] = OFFLINE_MAX_TOKENS
        report["server_start_s"] = round(server.started_s, 2) if server else None
    print()
    print_table(report["tasks"], report["totals"], structure=structure)
    for row in report["tasks"]:
        for failure in row.get("failures", []):
            print(f"  {row['task']}: {failure}")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nreport: {args.report}")
    failed = [r["task"] for r in report["tasks"] if r["status"] == "fail"]
    if args.write_baseline:
        rows = {row["task"]: {k: v for k, v in row.items() if k != "reps"}
                for row in report["tasks"]}
        if args.tasks and BASELINE.exists():  # a subset: replace only its rows
            kept = json.loads(BASELINE.read_text()).get("tasks", [])
            rows = {**{row["task"]: row for row in kept}, **rows}
        slim = {"lane": report["lane"], "reps": report["reps"],
                "tasks": [rows[name] for name in sorted(rows)]}
        BASELINE.write_text(json.dumps(slim, indent=1, default=str) + "\n")
        print(f"baseline written: {BASELINE}")
    if args.baseline is not None:
        if not args.baseline.exists():
            print(f"no baseline at {args.baseline}: nothing to compare")
        else:
            regressions = compare(report, json.loads(args.baseline.read_text()))
            if regressions:
                print(f"\nREGRESSED against {args.baseline} ({len(regressions)}):")
                for line in regressions:
                    print(f"  {line}")
                return 1
            print(f"\nno regression against {args.baseline} (noise rule: 3%)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
