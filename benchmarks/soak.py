"""`make soak`: many turns over many sessions through real Celery worker processes, with
faults sprinkled in (issue 10 build item 4). Prints the figures docs/reliability.md quotes.

What runs: a provider simulator (this process, real HTTP), two `celery -A hermes_web worker`
processes (prefork) on PostgreSQL + Redis; SOAK_SESSIONS sessions (default 50) get
SOAK_TURNS turns in all (default 1,000), queued a few at a time. Every third turn runs a
side-effecting command (``echo <marker> >> effects.txt``) so a duplicated execution is
visible. Faults while it runs: provider errors (429, 529, 500, a stream cut mid-tool-call)
pushed into the simulator every SOAK_FAULT_EVERY seconds, and the "victim" worker
SIGKILLed every SOAK_KILL_EVERY seconds and restarted; this process plays beat
(turn_recover_task every 5 s). The "steady" worker is never killed: its RSS (main process
plus children) is sampled after warm-up and at the end.

Checked at the end (non-zero exit if any fails): every turn terminal; zero lost messages
(each turn's text is stored as exactly one user message); zero duplicated tool executions
(each marker appears at most once in its session's effects file); RSS growth printed.

Environment: DATABASE_URL and REDIS_URL (required: services mode); the soak creates and
drops its own database ``hermes_bench_soak`` and uses Redis database HERMES_BENCH_REDIS_DB
(default 14).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, django_boot, prepare_environment, print_table  # noqa: E402

TURNS = int(os.environ.get("SOAK_TURNS", "1000"))
SESSIONS = int(os.environ.get("SOAK_SESSIONS", "50"))
FAULT_EVERY = float(os.environ.get("SOAK_FAULT_EVERY", "3"))
KILL_EVERY = float(os.environ.get("SOAK_KILL_EVERY", "45"))
QUEUE_DEPTH = 3
"""Turns queued per session at once (the rest are sent as earlier ones end)."""
TIME_LIMIT = float(os.environ.get("SOAK_TIME_LIMIT", "3600"))


def worker_argv(name: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "hermes_web", "worker", "-l", "warning",
            "-n", f"{name}@%h", "--pool", "prefork", "--concurrency", "4",
            "--without-gossip", "--without-mingle", "--prefetch-multiplier", "1"]


def start_worker(name: str, env: dict, log_dir: Path) -> subprocess.Popen:
    log = open(log_dir / f"{name}-{time.monotonic_ns()}.log", "wb")
    return subprocess.Popen(worker_argv(name), cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def rss_mb(proc: subprocess.Popen) -> float:
    """RSS of a worker's main process and its pool children, in MB."""
    import psutil

    try:
        main = psutil.Process(proc.pid)
        return sum(p.memory_info().rss for p in [main, *main.children(recursive=True)]) / 2**20
    except psutil.NoSuchProcess:
        return 0.0


def main() -> int:
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        print("make soak needs DATABASE_URL and REDIS_URL (services mode)")
        return 2
    os.environ.setdefault("HERMES_BENCH_REDIS_DB", "14")
    from simulator import SimulatorServer
    from simulator.faults import Fault
    from simulator.script import Reply, Script, ScriptRequest, ToolCallSpec

    simulator = SimulatorServer(host="127.0.0.1", port=0).start()

    def policy(request: ScriptRequest) -> Reply:
        if request.tool_results:
            return Reply(text="done: " + request.tool_results[-1].result[:80])
        text = request.last_user_text
        if text.startswith("tool "):
            marker = text.split()[1]
            return Reply(text="writing", tool_calls=(ToolCallSpec(
                name="terminal",
                input={"command": f"echo {marker} >> effects.txt; sleep 0.2"}),))
        return Reply(text=f"reply to {text}", token_delay=0.002)

    simulator.state.script = Script(policy)
    bench = prepare_environment("soak", simulator_url=simulator.url, use_redis=True, extra={
        "HERMES_LEASE_SECONDS": "3", "HERMES_VISIBILITY_TIMEOUT": "6",
        "HERMES_RETRY_BASE_DELAY": "0.2", "HERMES_LOG_LEVEL": "WARNING",
        "HERMES_APPROVAL_TIMEOUT": "300"})
    django_boot()
    from django.contrib.auth import get_user_model

    from hermes_web.celery import app
    from sessions.models import Message, Session, Turn
    from sessions.services import session_create, turn_start, workspace_path
    from sessions.tasks import turn_recover_task

    app.control.purge()
    env = {**os.environ, **bench.env}
    log_dir = bench.tmp / "logs"
    log_dir.mkdir()
    steady = start_worker("steady", env, log_dir)
    victim = start_worker("victim", env, log_dir)
    user = get_user_model().objects.create_user(username="soak", password="soak-pw")
    sessions = [session_create(user=user) for _ in range(SESSIONS)]
    texts: dict[int, str] = {}  # turn id -> text
    planned = [[] for _ in sessions]
    for n in range(TURNS):
        kind = "tool" if n % 3 == 0 else "hello"
        planned[n % SESSIONS].append(f"{kind} m{n:05d} soak turn")
    terminal = {Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED}
    faults = Counter()
    kills = 0
    started = time.monotonic()
    last_fault = last_kill = last_recover = started
    rss_start = None
    sent = 0
    while True:
        now = time.monotonic()
        # Keep QUEUE_DEPTH turns waiting per session.
        for index, session in enumerate(sessions):
            open_turns = Turn.objects.filter(session=session).exclude(
                status__in=terminal).count()
            while open_turns < QUEUE_DEPTH and planned[index]:
                text = planned[index].pop(0)
                texts[turn_start(session=session, user=user, text=text).pk] = text
                open_turns += 1
                sent += 1
        done = Turn.objects.filter(pk__in=texts, status__in=terminal).count()
        if done == TURNS:
            break
        if now - started > TIME_LIMIT:
            print(f"time limit reached with {done}/{TURNS} turns terminal")
            break
        if rss_start is None and done >= min(50, TURNS // 4):
            rss_start = rss_mb(steady)
        if now - last_fault >= FAULT_EVERY:
            last_fault = now
            kind = random.choice(["rate_limit", "overloaded", "server_error", "stream_cut"])
            simulator.state.faults.push(Fault(kind=kind, retry_after="0"
                                              if kind == "rate_limit" else None))
            faults[kind] += 1
        if now - last_kill >= KILL_EVERY:
            last_kill = now
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait()
            kills += 1
            victim = start_worker("victim", env, log_dir)
        if now - last_recover >= 5:
            last_recover = now
            turn_recover_task()  # beat's job
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    rss_end = rss_mb(steady)
    statuses = Counter(Turn.objects.filter(pk__in=texts).values_list("status", flat=True))
    lost = duplicated_users = 0
    for turn_id, text in texts.items():
        count = Message.objects.filter(session__in=sessions, role="user", content=text).count()
        lost += count == 0
        duplicated_users += count > 1
    duplicated_tools = 0
    executed = 0
    for session in sessions:
        path = workspace_path(session) / "effects.txt"
        lines = path.read_text().split() if path.exists() else []
        executed += len(lines)
        duplicated_tools += sum(c - 1 for c in Counter(lines).values() if c > 1)
    not_terminal = TURNS - sum(statuses[s] for s in terminal)
    reasons = Counter(e.split(":")[0][:60] for e in Turn.objects.filter(
        pk__in=texts, status=Turn.Status.FAILED).values_list("error", flat=True))
    for proc in (steady, victim):
        os.killpg(proc.pid, signal.SIGTERM)
    for proc in (steady, victim):
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    simulator.stop()
    rows = [
        ("turns / sessions", f"{TURNS} / {SESSIONS}"),
        ("wall time", f"{elapsed:.0f} s ({TURNS / elapsed:.1f} turns/s)"),
        ("turn statuses", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))),
        ("not terminal", not_terminal),
        ("why turns failed", ", ".join(f"{k} {v}" for k, v in reasons.most_common(4)) or "-"),
        ("lost user messages", lost),
        ("user messages stored twice", duplicated_users),
        ("side-effecting calls run / run twice", f"{executed} / {duplicated_tools}"),
        ("provider faults injected", ", ".join(f"{k} {v}" for k, v in sorted(faults.items()))),
        ("worker SIGKILLs (victim)", kills),
        ("steady worker RSS after warm-up → end",
         f"{rss_start or 0:.0f} MB → {rss_end:.0f} MB "
         f"({rss_end - (rss_start or rss_end):+.0f} MB)"),
        ("model requests", len(simulator.state.requests)),
    ]
    print_table("Soak (benchmarks/soak.py)", ("figure", "value"), rows)
    ok = not_terminal == 0 and lost == 0 and duplicated_users == 0 and duplicated_tools == 0
    print("PASS" if ok else "FAIL")
    if ok:
        bench.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
