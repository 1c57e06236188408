"""Cache economics of a scheduled prompt that fires 20 times (issue 12, "Measured").

The whole app path: a schedule created through schedules/services.py, each run fired with
``schedule_fire`` (as beat's task does), the turn run by the real runner (eager Celery)
against the provider simulator over HTTP, whose byte-exact prompt cache bills every request.
Two variants of the same 20 runs, each with an empty simulator cache and its own user:

- registered: the scheduled prompt's scaffold is registered and its length stored
  (``stable_prefix_len``), so the transport sends [scaffold, tail] and the planner marks the
  scaffold;
- unregistered: the identical text with no stored length and an empty registry, so the
  message is one block (what happens when no builder declares its prefix).

Each variant runs in three settings: a new session per run (the scaffold sits right after
the system prompt every time; a schedule's run sessions share one prompt label,
sessions/inputs.py); the same but with each session's id in its prompt (how every session
was named before: the "before" row, where nothing after the prompt can be read across
runs); and one existing session (the runs append to one conversation: each run's scaffold
sits at a new position after the previous run, so it is written once whatever the split,
and the history before it is read through the rolling breakpoints).
The simulator's clock advances 60 s between runs (a schedule every minute, inside the 5-minute
TTL). Figures per run come from the simulator's recorded usage: "uncached" = input tokens +
cache-write tokens (everything not served from cache), averaged over runs 2-20 (run 1 is
cold in every variant). Prints a table and the ratio unregistered / registered.

Run: ``python benchmarks/bench_schedule_cache.py`` (SQLite in a temp dir, or PostgreSQL
when DATABASE_URL is set). Not a test: it measures.
"""

from __future__ import annotations

import argparse
import time
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import django_boot, prepare_environment, print_table  # noqa: E402

RUNS = 20
PROMPT = "\n".join(
    f"{i}. Check item {i} of the overnight checklist: read the file reports/item-{i}.md if it "
    "exists, compare it with yesterday's numbers, and note anything that moved by more than "
    "five per cent, any error message, and any step that did not finish."
    for i in range(1, 41)) + "\nEnd with a table: item, status, note."
"""A realistic standing brief (~40 checklist items, ~2,000 tokens): the static part."""


def run_variant(*, registered: bool, target: str, sim) -> list[dict]:
    """Fire the schedule RUNS times; returns the usage of each run's requests, summed."""
    from django.contrib.auth import get_user_model

    from agents.cache import REGISTRY
    from simulator.script import Reply, Script
    from agents.unattended import BuiltMessage, schedule_message
    from schedules import services
    from schedules.services import schedule_create, schedule_fire
    from sessions.services import session_create

    def unregistered(**kwargs) -> BuiltMessage:
        """The same bytes, but no builder declaring where the scaffold ends: length 0
        (= no split) stored, and the process registry emptied."""
        built = schedule_message(**kwargs)
        REGISTRY.clear()
        return BuiltMessage(text=built.text, stable_len=0, display=built.display)

    from sessions import runner

    real_label = runner.prompt_session_label

    def id_label(session):
        """Before: every run's session named by its own id in the system prompt."""
        return str(session.pk)

    sim.state.reset()
    sim.state.script = Script(lambda request: Reply(text="Checklist done: nothing moved."))
    REGISTRY.clear()
    services.schedule_message = schedule_message if registered else unregistered
    runner.prompt_session_label = id_label if target == "new-ids" else real_label
    target = "new" if target == "new-ids" else target
    user = get_user_model().objects.create_user(
        username=f"bench-{time.monotonic_ns()}", password="x")
    session = session_create(user=user) if target == "session" else None
    schedule = schedule_create(user=user, name="overnight", prompt=PROMPT, kind="cron",
                               cron_expression="* * * * *", target=target, session=session)
    per_run = []
    try:
        for _ in range(RUNS):
            before = len(sim.state.requests)
            run = schedule_fire(schedule_id=schedule.pk)  # eager Celery: the turn runs on commit
            run.turn.refresh_from_db()
            assert run.turn.status == "completed", run.turn.error
            usage = [r.usage for r in sim.state.requests[before:] if r.usage]
            per_run.append({k: sum(u.get(k) or 0 for u in usage) for k in (
                "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")})
            sim.state.clock.advance(60)
    finally:
        services.schedule_message = schedule_message
        runner.prompt_session_label = real_label
    return per_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    from simulator import SimulatorServer

    sim = SimulatorServer(host="127.0.0.1", port=0).start()
    bench = prepare_environment("schedule_cache", simulator_url=sim.url,
                                extra={"HERMES_CELERY_EAGER": "1",
                                       "HERMES_EMBEDDED_BEAT": "0"})
    try:
        django_boot()
        rows, results = [], {}
        labels = {"new": "new session per run",
                  "new-ids": "new session per run, session id in each prompt (before)",
                  "session": "same session"}
        for target in labels:
            for registered in (True, False):
                per_run = run_variant(registered=registered, target=target, sim=sim)
                warm = per_run[1:]
                uncached = [r["input_tokens"] + r["cache_creation_input_tokens"] for r in warm]
                mean = sum(uncached) / len(uncached)
                results[(target, registered)] = mean
                rows.append((f"{labels[target]}, "
                             f"{'registered' if registered else 'unregistered'}",
                             per_run[0]["input_tokens"] + per_run[0]["cache_creation_input_tokens"],
                             sum(r["input_tokens"] for r in warm) / len(warm),
                             sum(r["cache_creation_input_tokens"] for r in warm) / len(warm),
                             sum(r["cache_read_input_tokens"] for r in warm) / len(warm),
                             mean))
        print_table(f"Scheduled prompt fired {RUNS} times (mean over runs 2-{RUNS}; tokens)",
                    ("variant", "run 1 uncached", "input", "cache write", "cache read",
                     "uncached/run"), rows)
        for target in labels:
            ratio = results[(target, False)] / max(results[(target, True)], 1e-9)
            print(f"  {labels[target]}: uncached per run, unregistered / registered = {ratio:.2f}x")
        return 0
    finally:
        sim.stop()
        bench.cleanup()


if __name__ == "__main__":
    sys.exit(main())
