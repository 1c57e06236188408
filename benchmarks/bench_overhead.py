"""Harness overhead per iteration, model time excluded, on a 2,000-message session (issue 2,
"Speed": p95 under 20 ms).

Real turns run through the real worker path (``sessions.tasks.turn_run_task`` executed in
this process, as the Celery worker runs it: lease, runner, loop, DbSink, RunEvents) against
a real database and the provider simulator over real HTTP with no per-token delay. The
session is preloaded with 2,000 live messages (user turns, assistant turns with tool calls,
tool results from 100 chars to 16,000 chars) sized just under the compaction threshold: the
largest history the harness ever replays without compacting.

What is measured: for each iteration (one model call), the wall time from the start of its
preparation (for a turn's first iteration: from the task's start, so the lease, the user
message and the history load count) to the start of the next one's (for the last: to the end
of the task, so the final message and turn.finished count), minus the time spent inside
``transport.complete``; the sink's callbacks during the stream (text deltas, stop checks)
and the transport's rendering of the wire body (``build_payload``, our code: 5.7 ms a call
on this history before it became incremental, uncounted until 2026-12-02) are added back,
since they are harness work. So model time is the simulator's answer plus the SDK's
client-side work (its copy of the body, its SSE parsing); everything else counts. A breakdown by component is printed
(the components nest, so they do not sum), overall and by kind of iteration, with
garbage-collection pauses outside the model call by generation. The in-process simulator's
request log is cleared after each turn so its heap does not slow the harness's collections,
and the worker's collector tuning (``worker_gc_tuning``: freeze what start-up loaded, a
larger young generation) is applied before the first measured turn, as a worker applies it
when ready.

The floor (issue 15 target 1): right before the harness runs, the benchmark times the
writes an iteration cannot avoid, on the same database with psycopg and no Django: one
INSERT of a message row together with its RunEvent (one statement: a CTE, the event's
payload carrying the new row's id) and one COMMIT, ``--floor-samples`` times, for a
separate session so the measured one is untouched. Round trips: BEGIN (psycopg opens the
transaction), the INSERT, COMMIT. The verdict divides the harness's p95 by the floor's p95
(tail against tail, both taken under the same load); p50/p50 is printed beside it. On
SQLite the floor is the same two rows and COMMIT through the sqlite3 module.

Statements: every SQL statement and COMMIT the harness sends from any thread is counted
per iteration (from Django's execute wrappers and the connection's commit), so the number
of round trips is visible independently of how loaded the machine is.

Run: ``python benchmarks/bench_overhead.py`` (``make bench``); PostgreSQL when DATABASE_URL
is set (database hermes_bench_overhead, or hermes_bench_overhead_<HERMES_BENCH_DB_SUFFIX>,
dropped afterwards), else SQLite in a temporary directory. Exits 0 even when a target is
missed (prints FAIL).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (django_boot, percentile, prepare_environment,  # noqa: E402
                               print_table, verdict)

TARGET_P95_MS = 20.0
TARGET_FLOOR_RATIO = 3.0
"""Issue 15 target 1: overhead p95 under 3x the floor's p95 measured in the same run."""
FLOOR_SAMPLES = 300
SESSION_MESSAGES = 2000
TOOL_ITERATIONS_PER_TURN = 3
"""Model calls with tool calls per benchmark turn; +1 final text call = 4 iterations."""
CONTEXT_WINDOW = 1_000_000
"""A 1M-token model: the compaction threshold is then its 256K cap (hermes-facts §4)."""
TARGET_HISTORY_TOKENS = 150_000
"""Rough size of the preloaded history: under the 256K threshold with room for the turns the
benchmark adds (calibrated against the simulator's billed count), so nothing compacts."""

WORDS = ("the of and to in is that for it as with was on be by this are from or at an have "
         "not which but all were when we there can been has more if will one would so no out "
         "file function return value request session token cache model error result test "
         "import class self data path line config user message tool call prompt history "
         "server client database query index table field worker queue event stream").split()


# --- the simulated model --------------------------------------------------------------------
def bench_policy(request):
    """Per benchmark turn: three iterations of tool calls, then a final answer. The count is
    taken from the request itself (assistant messages since the last user text)."""
    from simulator.script import Reply, ToolCallSpec

    k = 0
    for message in reversed(request.body.get("messages") or []):
        content = message.get("content")
        if message.get("role") == "assistant":
            k += 1
        elif isinstance(content, str) or any(b.get("type") == "text" for b in content or ()):
            break
    if k == 0:
        return Reply(text="I will read the notes first.",
                     tool_calls=(ToolCallSpec(name="read_file", input={"path": "notes.md"}),))
    if k == 1:
        return Reply(text="Now the module and a search for its callers.", tool_calls=(
            ToolCallSpec(name="read_file", input={"path": "module.py", "limit": 80}),
            ToolCallSpec(name="search_files", input={"pattern": "def handle"})))
    if k < TOOL_ITERATIONS_PER_TURN:
        return Reply(text="One more look at the README.",
                     tool_calls=(ToolCallSpec(name="read_file", input={"path": "README.md"}),))
    return Reply(text=("Summary: the notes describe the plan, module.py holds the handlers and "
                       "their callers are listed above; nothing else needs changing. ") * 3)


# --- the 2,000-message session ----------------------------------------------------------------
def _prose(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def _tool_output(rng: random.Random, scale: float) -> str:
    """A tool result: mostly small, some medium, a few large (file dumps, logs)."""
    roll = rng.random()
    chars = (rng.randint(100, 600) if roll < 0.80 else rng.randint(1000, 2500) if roll < 0.98
             else rng.randint(8000, 16000))
    chars = int(chars * scale)
    lines: list[str] = []
    size = 0
    n = 1
    while size < chars:
        line = f"{n:>6}\t" + _prose(rng, rng.randint(20, 90))
        lines.append(line)
        size += len(line) + 1
        n += 1
    return "\n".join(lines)


def _exchange(rng: random.Random, n: int, *, calls_per_step: list[int],
              scale: float) -> list[dict]:
    """One past turn as row dicts: user text, tool-calling assistant steps with their
    results, a final assistant text."""
    rows = [{"role": "user", "content": _prose(rng, rng.randint(40, 400))}]
    for step, count in enumerate(calls_per_step):
        calls = [{"id": f"toolu_pre_{n}_{step}_{i}", "name": rng.choice(
                    ["read_file", "search_files", "terminal", "patch"]),
                  "arguments": json.dumps({"path": f"src/mod_{rng.randint(1, 90)}.py"})}
                 for i in range(count)]
        rows.append({"role": "assistant", "content": _prose(rng, rng.randint(0, 160)),
                     "tool_calls": calls})
        for call in calls:
            rows.append({"role": "tool", "content": _tool_output(rng, scale),
                         "tool_call_id": call["id"], "tool_name": call["name"]})
    rows.append({"role": "assistant", "content": _prose(rng, rng.randint(150, 900))})
    return rows


def build_history(total: int, *, scale: float = 1.0, seed: int = 2) -> list[dict]:
    """Exactly ``total`` rows of legal history (every call answered, every turn finished);
    ``scale`` multiplies the tool-result sizes."""
    rng = random.Random(seed)
    rows: list[dict] = []
    n = 0
    while len(rows) < total - 40:
        steps = [rng.choice([1, 1, 1, 2, 3]) for _ in range(rng.randint(0, 5))]
        rows += _exchange(rng, n, calls_per_step=steps, scale=scale)
        n += 1
    left = total - len(rows)
    if left % 2:  # one 5-row exchange (user, assistant with 2 calls, 2 results, answer)
        rows += _exchange(rng, n, calls_per_step=[2], scale=scale)
        n += 1
        left -= 5
    while left > 0:
        rows += _exchange(rng, n, calls_per_step=[], scale=scale)
        n += 1
        left -= 2
    assert len(rows) == total, len(rows)
    return rows


def sized_history(total: int) -> list[dict]:
    """``total`` rows whose estimated size is about TARGET_HISTORY_TOKENS (the tool results
    are scaled to fit; the shape of the mix is kept)."""
    from agents.messages import Message as AgentMessage
    from agents.context.tokens import estimate_message_tokens

    def tokens(rows: list[dict]) -> int:
        return sum(estimate_message_tokens(AgentMessage.from_dict(r)) for r in rows)

    rows = build_history(total)
    size = tokens(rows)
    tool = sum(estimate_message_tokens(AgentMessage.from_dict(r)) for r in rows
               if r["role"] == "tool")
    scale = max(0.1, (TARGET_HISTORY_TOKENS - (size - tool)) / tool)
    return build_history(total, scale=scale)


def preload(session, rows: list[dict]) -> None:
    from sessions.models import Message, Session

    Message.objects.bulk_create([
        Message(session=session, role=r["role"], content=r["content"],
                tool_calls=r.get("tool_calls", []), tool_call_id=r.get("tool_call_id", ""),
                tool_name=r.get("tool_name", "")) for r in rows], batch_size=200)
    Session.objects.filter(pk=session.pk).update(message_count=len(rows))


def write_workspace(workspace: Path) -> None:
    rng = random.Random(7)
    (workspace / "notes.md").write_text("# Notes\n\n" + _prose(rng, 1500) + "\n")
    module = "\n".join(f"def handle_{i}(request):\n    return {i}\n" for i in range(60))
    (workspace / "module.py").write_text(module)


# --- instrumentation ----------------------------------------------------------------------------
@dataclass
class Recorder:
    """Timestamps of one turn: turn start/end, iteration starts (each ``_prepare``), model
    calls (start, end, callback seconds inside) and per-iteration component seconds."""

    turn_start: float = 0.0
    turn_end: float = 0.0
    iteration_starts: list[float] = field(default_factory=list)
    calls: list[tuple[float, float, float]] = field(default_factory=list)
    in_call: bool = False
    callback_in_call: float = 0.0
    components: dict[int, dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    statements: dict[int, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int)))

    def iteration(self) -> int:
        return max(1, len(self.iteration_starts))


REC = Recorder()


DB_COMPONENT = "database round trips (every statement + COMMIT, wall)"
"""Time spent waiting on the database, every thread: what is left of an iteration beyond it
is Python (ours, Django's, psycopg's) and lock waits."""


def _charge(name: str, elapsed: float, *, callback: bool = True) -> None:
    """Add ``elapsed`` (s) to this iteration's component ``name``; a timed callback inside
    the model call is also added back to the harness (``callback``); nested time is not,
    or it would count twice."""
    REC.components[REC.iteration()][name] += elapsed
    if callback and REC.in_call:
        REC.callback_in_call += elapsed


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _charge(name, time.perf_counter() - start)
    return wrapper


def _gc_timer():
    """A gc callback charging every collection's pause to the current iteration, by
    generation (the components table shows them): pauses are harness time too."""
    started: dict[str, float] = {}

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
        elif "t" in started:
            elapsed = time.perf_counter() - started.pop("t")
            if not REC.in_call:  # in the call: the simulator's or the SDK's allocations
                REC.components[REC.iteration()][
                    f"gc pauses (generation {info['generation']})"] += elapsed
    return callback


def instrument() -> None:
    """Wrap the model call, the iteration boundary and the components (class/module level,
    so the real objects the runner builds are the ones measured)."""
    import sessions.events
    import sessions.runner as runner
    import sessions.sink as sink
    import sessions.transcript
    from agents.request import RequestPipeline
    from agents.transports.anthropic_messages import AnthropicTransport

    complete = AnthropicTransport.complete

    @functools.wraps(complete)
    def timed_complete(self, request, **kwargs):
        REC.in_call, REC.callback_in_call = True, 0.0
        start = time.perf_counter()
        try:
            return complete(self, request, **kwargs)
        finally:
            end = time.perf_counter()
            REC.in_call = False
            REC.calls.append((start, end, REC.callback_in_call))

    AnthropicTransport.complete = timed_complete
    # Rendering the request's wire body is our transport's work, not the model's: it runs
    # inside complete, so it is added back like the sink's callbacks.
    AnthropicTransport.build_payload = _timed("transport build_payload (wire body)",
                                              AnthropicTransport.build_payload)

    prepare_step = runner._prepare

    def boundary(*args, **kwargs):
        REC.iteration_starts.append(time.perf_counter())
        return prepare_step(*args, **kwargs)

    runner._prepare = _timed("runner._prepare (reduce gates, repairs)", boundary)
    RequestPipeline.prepare = _timed("RequestPipeline.prepare", RequestPipeline.prepare)
    sink.DbSink.message_added = _timed("sink.message_added (row + event)",
                                       sink.DbSink.message_added)
    sink.DbSink.usage_recorded = _timed("sink.usage_recorded", sink.DbSink.usage_recorded)
    if hasattr(sink.DbSink, "reply_added"):
        sink.DbSink.reply_added = _timed("sink.reply_added (usage + row + event)",
                                         sink.DbSink.reply_added)
    sink.DbSink.tools_called = _timed("sink.tools_called (a segment's announcement)",
                                      sink.DbSink.tools_called)
    sink.DbSink.turn_started = _timed("sink.turn_started (turn.started + user message)",
                                      sink.DbSink.turn_started)
    sink.DbSink.tool_finished = _timed("sink.tool_finished (ledger)", sink.DbSink.tool_finished)
    sink.DbSink.messages_added = _timed("sink.messages_added (results)",
                                        sink.DbSink.messages_added)
    sink.DbSink.text_delta = _timed("sink.text_delta (in stream)", sink.DbSink.text_delta)
    sink.DbSink.should_stop = _timed("sink.should_stop", sink.DbSink.should_stop)
    events_append = _timed("event_append (all)", sessions.events.event_append)
    for module in (sink, runner):
        module.event_append = events_append
    runner.dispatch_tool_calls = _timed("dispatch_tool_calls (+ tools)",
                                        runner.dispatch_tool_calls)
    runner._observe = _timed("runner._observe (calibrator, breaker)", runner._observe)
    runner.lease_renew = _timed("lease_renew", runner.lease_renew)
    loads = _timed("history_load", sessions.transcript.history_load)
    runner.history_load = loads
    # The turn's edges (first and last iterations): task start and end, the turn's setup.
    import sessions.tasks as tasks
    import sessions.toolbox as toolbox
    from accounts.budgets import BudgetedTransport

    for module, name, label in (
            (tasks, "turn_next", "tasks.turn_next (+ recovery, waits)"),
            (tasks, "lease_acquire_id", "tasks.lease_acquire_id"),
            (tasks, "lease_release", "tasks.lease_release"),
            (tasks, "turn_runnable", "tasks.turn_runnable"),
            (runner, "_begin", "runner._begin (turn.started, user msg, history)"),
            (runner, "_finish", "runner._finish (turn.finished)"),
            (runner, "_history_for", "runner._history_for (kept copy + new rows)"),
            (runner, "_call_tally", "runner._call_tally (the history's call ids)"),
            (runner, "_execute", "runner._execute (ledger, gate, dispatch, spill)"),
            (runner, "ledger_for", "runner ledger_for"),
            (runner, "started_call_ids", "runner started_call_ids"),
            (runner, "_bind", "runner._bind (keep the session)"),
            (runner, "cache_strategy", "runner cache_strategy"),
            (runner, "session_prune", "runner session_prune"),
            (toolbox, "tool_schema_refresh", "toolbox.tool_schema_refresh")):
        if hasattr(module, name):
            setattr(module, name, _timed(label, getattr(module, name)))
    from sessions.hooks import APPROVALS
    from sessions.provider_state import DbCooldowns

    APPROVALS.gate_state = _timed("approvals gate_state", APPROVALS.gate_state)
    DbCooldowns.known = _timed("provider cooldowns (known)", DbCooldowns.known)
    BudgetedTransport.complete = _timed("BudgetedTransport.complete (all wrappers + model; "
                                        "minus the model call = wrappers)",
                                        BudgetedTransport.complete)
    gc.callbacks.append(_gc_timer())
    _count_statements()


def _statement_kind(sql: str) -> str:
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
    if head == "WITH":  # a CTE: name it by what it finally does
        tail = sql.upper()
        head = ("WITH..INSERT" if "INSERT INTO" in tail else
                "WITH..UPDATE" if "UPDATE" in tail else "WITH..SELECT")
    if head == "SELECT" and "FOR UPDATE" in sql.upper():
        head = "SELECT FOR UPDATE"
    return head


SQL_LOG: str | None = None
"""--sql-log FILE: every statement with its iteration and the project frame that sent it."""


def _caller() -> str:
    """The innermost frame of the project's own code (not the benchmark's) on the stack."""
    import traceback

    root = str(Path(__file__).resolve().parents[1])
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith(root) and "/benchmarks/" not in frame.filename \
                and "/.venv/" not in frame.filename:
            return f"{frame.filename[len(root) + 1:]}:{frame.lineno} {frame.name}"
    return "?"


WRITES = {"INSERT", "UPDATE", "DELETE", "WITH..INSERT", "WITH..UPDATE"}


def _count_statements() -> None:
    """Count every statement and COMMIT of every database connection, per iteration."""
    from django.db import connections
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.backends.signals import connection_created

    log = open(SQL_LOG, "w") if SQL_LOG else None  # noqa: SIM115 (open for the run)

    def wrapper(execute, sql, params, many, context):
        kind = _statement_kind(sql)
        counts = REC.statements[REC.iteration()]
        if log is not None:
            log.write(f"{REC.iteration()}\t{_caller()}\t{' '.join(sql.split())[:160]}\n")
        counts[kind] += 1
        if kind in WRITES and not context["connection"].in_atomic_block:
            counts["autocommit write"] += 1  # its own transaction: one commit
        if "synchronous_commit" in sql:
            counts["relaxed commit"] += 1
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            _charge(DB_COMPONENT, time.perf_counter() - start, callback=False)

    def attach(connection, **kwargs):
        if wrapper not in connection.execute_wrappers:
            connection.execute_wrappers.append(wrapper)

    connection_created.connect(attach, weak=False)
    for conn in connections.all(initialized_only=True):
        attach(conn)
    commit = BaseDatabaseWrapper._commit

    def counted_commit(self):
        REC.statements[REC.iteration()]["COMMIT"] += 1
        start = time.perf_counter()
        try:
            return commit(self)
        finally:
            _charge(DB_COMPONENT, time.perf_counter() - start, callback=False)

    BaseDatabaseWrapper._commit = counted_commit


# --- the floor ------------------------------------------------------------------------------------
def floor_writes(*, session_id: int, samples: int) -> list[float]:
    """Milliseconds of each of ``samples`` floor writes (see the module docstring): one
    message row + its event in one INSERT, then COMMIT, on the benchmark's database, with
    psycopg (PostgreSQL) or sqlite3 (SQLite) and no Django in the timed path."""
    from django.db import connection
    from django.utils import timezone

    from sessions.models import Message, RunEvent

    call = {"id": "toolu_floor", "name": "read_file",
            "arguments": json.dumps({"path": "module.py", "limit": 80})}
    content = "Now the module and a search for its callers."
    display = {"id": 0, "role": "assistant", "content": content, "kind": "",
               "tool_calls": [call], "tool_call_id": "", "tool_name": "", "is_error": False,
               "tool_meta": {}, "active": True, "compacted": False, "has_sidecar": False}
    msg, ev = Message._meta, RunEvent._meta
    mcol = {f.name: f.column for f in msg.concrete_fields}
    ecol = {f.name: f.column for f in ev.concrete_fields}
    names = ("session", "role", "content", "tool_calls", "tool_call_id", "tool_name",
             "is_error", "tool_meta", "reasoning", "stable_prefix_chars", "kind", "active",
             "compacted", "created_at")
    columns = ", ".join(f'"{mcol[n]}"' for n in names)
    ecolumns = ", ".join(f'"{ecol[n]}"' for n in ("session", "seq", "type", "payload",
                                                  "created_at"))
    times: list[float] = []
    if connection.vendor == "postgresql":
        import psycopg

        pk = f'"{msg.pk.column}"'

        sql = (f'WITH m AS (INSERT INTO "{msg.db_table}" ({columns}) VALUES '
               f'(%s, %s, %s, %s::jsonb, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s) '
               f'RETURNING "{msg.pk.column}") '
               f'INSERT INTO "{ev.db_table}" ({ecolumns}) SELECT %s, %s, %s, '
               f"jsonb_set(%s::jsonb, '{{message,id}}', to_jsonb(m.{pk})), %s "
               f'FROM m RETURNING "{ev.pk.column}"')
        with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
            for seq in range(1, samples + 1):
                now = timezone.now()
                start = time.perf_counter()
                conn.execute(sql, [session_id, "assistant", content, json.dumps([call]), "",
                                   "", False, "{}", "", 0, "", True, False, now,
                                   session_id, seq, "message.added",
                                   json.dumps({"turn_id": 0, "message": display}), now])
                conn.commit()
                times.append((time.perf_counter() - start) * 1000)
        return times
    import sqlite3

    marks = ", ".join("?" * len(names))
    with sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None) as conn:
        for seq in range(1, samples + 1):
            now = timezone.now().isoformat()
            start = time.perf_counter()
            conn.execute("BEGIN")
            row_id = conn.execute(
                f'INSERT INTO "{msg.db_table}" ({columns}) VALUES ({marks})',
                [session_id, "assistant", content, json.dumps([call]), "", "", False, "{}",
                 "", 0, "", True, False, now]).lastrowid
            conn.execute(f'INSERT INTO "{ev.db_table}" ({ecolumns}) VALUES (?, ?, ?, ?, ?)',
                         [session_id, seq, "message.added",
                          json.dumps({"turn_id": 0, "message": {**display, "id": row_id}}),
                          now])
            conn.execute("COMMIT")
            times.append((time.perf_counter() - start) * 1000)
    return times


def turn_iterations(rec: Recorder) -> list[tuple[str, float, dict[str, float]]]:
    """(kind, overhead ms, components ms) per iteration of the recorded turn."""
    starts = rec.iteration_starts
    if len(starts) != len(rec.calls):
        raise RuntimeError(f"{len(starts)} iterations but {len(rec.calls)} model calls")
    bounds = [rec.turn_start] + starts[1:] + [rec.turn_end]
    out = []
    for i, (call_start, call_end, callbacks) in enumerate(rec.calls):
        model = (call_end - call_start) - callbacks
        overhead = (bounds[i + 1] - bounds[i]) - model
        kind = ("only" if len(rec.calls) == 1 else "first" if i == 0
                else "last" if i == len(rec.calls) - 1 else "middle")
        comps = {k: v * 1000 for k, v in rec.components[i + 1].items()}
        comps.update({f"#{k}": float(n) for k, n in rec.statements[i + 1].items()})
        out.append((kind, overhead * 1000, comps))
    return out


# --- main -----------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--messages", type=int, default=SESSION_MESSAGES)
    parser.add_argument("--floor-samples", type=int, default=FLOOR_SAMPLES)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--sql-log", metavar="FILE",
                        help="write every SQL statement (iteration, calling frame, text)")
    parser.add_argument("--profile", metavar="FILE",
                        help="write a cProfile of the harness loop (pstats) to FILE")
    args = parser.parse_args()
    global SQL_LOG
    SQL_LOG = args.sql_log

    from simulator import SimulatorServer
    import simulator.prefix as sim_prefix

    # The simulator tokenises the whole request on every call; its count is a pure function
    # of the text, so memoising it only shortens model time (which is excluded anyway).
    sim_prefix.count_tokens = functools.lru_cache(maxsize=None)(sim_prefix.count_tokens)
    sim = SimulatorServer(host="127.0.0.1", port=0, script=bench_policy).start()
    sim.state.configure(context_window=CONTEXT_WINDOW)
    bench = prepare_environment("overhead", simulator_url=sim.url, extra={
        "HERMES_CONTEXT_WINDOW": str(CONTEXT_WINDOW), "HERMES_CELERY_EAGER": "0",
        "HERMES_RETRY_BASE_DELAY": "0.05"})
    try:
        return run(args, bench, sim)
    finally:
        sim.stop()
        if not args.keep:
            bench.cleanup()


def run(args, bench, sim) -> int:
    t0 = time.perf_counter()
    django_boot()
    from django.contrib.auth import get_user_model

    from agents.context.tokens import estimate_message_tokens
    from sessions.models import Message, RunEvent, Turn
    from sessions.services import session_create, turn_start, workspace_path
    from sessions.tasks import turn_run_task
    from sessions.transcript import history_load

    user = get_user_model().objects.create_user("bench", password="bench-pw")
    session = session_create(user=user, title="overhead benchmark")
    write_workspace(workspace_path(session))
    preload(session, sized_history(args.messages))
    live = history_load(session=session)
    history_tokens = sum(estimate_message_tokens(m) for m in live)
    live_before = len(live)
    print(f"hermes overhead benchmark: {bench.database}; simulator {sim.url}")
    print(f"  session {session.pk}: {len(live)} live messages "
          f"({sum(1 for m in live if m.role == 'tool')} tool results, "
          f"{max(len(m.content) for m in live)} chars largest), ~{history_tokens} tokens "
          f"estimated; context window {CONTEXT_WINDOW}; setup {time.perf_counter() - t0:.1f} s")

    floor_session = session_create(user=user, title="floor writes")
    floor = floor_writes(session_id=floor_session.pk, samples=args.floor_samples)
    floor_p50, floor_p95 = percentile(floor, 50), percentile(floor, 95)
    print(f"  floor (one INSERT of a message row + its event, COMMIT; psycopg/sqlite3, "
          f"{len(floor)} samples): p50 {floor_p50:.2f} ms, p95 {floor_p95:.2f} ms")

    # The worker's own garbage-collector tuning, as a Celery worker applies it once ready
    # (hermes_web/celery.py): what was loaded so far is frozen out of the collector. The
    # measured session's history is not held here, so it is loaded and collected as in a
    # worker's first turn.
    from hermes_web.celery import worker_gc_tuning

    del live
    worker_gc_tuning()
    instrument()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    global REC
    iterations: list[tuple[str, float, dict[str, float]]] = []
    turns = 0
    turn_walls: list[float] = []
    model_ms: list[float] = []
    started = time.perf_counter()
    while len(iterations) < args.iterations:
        turn_start(session=session, user=user, text=f"Benchmark turn {turns + 1}: check the "
                   "notes and the handlers, then summarise.")
        REC = Recorder()
        REC.turn_start = time.perf_counter()
        turn_run_task.apply(args=[session.pk])
        REC.turn_end = time.perf_counter()
        # The simulator shares this process's heap: its log of every request body (about
        # 600 KB of JSON each here) would make each garbage collection of the harness
        # slower run after run; a worker's heap holds no such thing.
        with sim.state.lock:
            sim.state.requests.clear()
        status = Turn.objects.filter(session=session).order_by("-id").values_list(
            "status", "error").first()
        if status[0] != Turn.Status.COMPLETED:
            print(f"  turn {turns + 1} ended {status[0]}: {status[1][:300]}")
            return 0
        try:
            iterations += turn_iterations(REC)
        except RuntimeError as exc:  # a compaction's summariser call: not a loop iteration
            print(f"  turn {turns + 1} skipped: {exc}")
        turn_walls.append((REC.turn_end - REC.turn_start) * 1000)
        model_ms += [(e - s - cb) * 1000 for s, e, cb in REC.calls]
        turns += 1
    elapsed = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)

    compactions = RunEvent.objects.filter(session=session, type="compaction").count()
    live_after = Message.objects.filter(session=session, active=True).count()
    overhead = [ms for _, ms, _ in iterations]
    rows = []
    for label, kinds in (("all iterations", None), ("first of a turn (+ lease, user msg, "
                                                    "history load)", {"first"}),
                         ("middle (between two model calls)", {"middle"}),
                         ("last of a turn (+ final msg, turn.finished)", {"last"})):
        values = [ms for kind, ms, _ in iterations if kinds is None or kind in kinds]
        rows.append((label, len(values), percentile(values, 50), percentile(values, 95),
                     max(values) if values else float("nan")))
    print_table("Harness overhead per iteration (ms, model time excluded)",
                ("iterations", "n", "p50", "p95", "max"), rows)

    names = sorted({name for _, _, comps in iterations for name in comps
                    if not name.startswith("#")})
    counts = sorted({name for _, _, comps in iterations for name in comps
                     if name.startswith("#")})
    comp_rows = []
    for name in names:
        values = [comps.get(name, 0.0) for _, _, comps in iterations]
        comp_rows.append((name, sum(values) / len(values), percentile(values, 95), max(values)))
    comp_rows.append(("model call (simulator + SDK), for scale", sum(model_ms) / len(model_ms),
                      percentile(model_ms, 95), max(model_ms)))
    print_table("Where the time goes, per iteration (ms; components nest, so they overlap)",
                ("component", "mean", "p95", "max"), comp_rows)
    kinds = ("first", "middle", "last")
    kind_rows = []
    for name in names:
        row: list = [name]
        for kind in kinds:
            values = [comps.get(name, 0.0) for k, _, comps in iterations if k == kind]
            row += [sum(values) / len(values) if values else float("nan"),
                    percentile(values, 95)]
        kind_rows.append(tuple(row))
    print_table("The same by kind of iteration (ms)",
                ("component", *(f"{k} {s}" for k in kinds for s in ("mean", "p95"))),
                kind_rows)
    count_rows = []
    for name in [*(c for c in counts if c not in ("#autocommit write", "#relaxed commit")),
                 "# all"]:
        row = [name[1:].strip() + " statements" if name != "# all" else "all statements"]
        for kind in (*kinds, None):
            values = [sum(v for k, v in comps.items() if k.startswith("#")
                          and k not in ("#autocommit write", "#relaxed commit"))
                      if name == "# all" else comps.get(name, 0.0)
                      for k, _, comps in iterations if kind is None or k == kind]
            row.append(sum(values) / len(values) if values else float("nan"))
        count_rows.append(tuple(row))
    commit_rows = []
    for label, fn in (
            ("commits (COMMIT + autocommit writes)",
             lambda c: c.get("#COMMIT", 0) + c.get("#autocommit write", 0)),
            ("  of which relaxed (no WAL flush wait)", lambda c: c.get("#relaxed commit", 0)),
            ("  waiting for the disk (~ one floor each)",
             lambda c: c.get("#COMMIT", 0) + c.get("#autocommit write", 0)
             - c.get("#relaxed commit", 0))):
        row = [label]
        for kind in (*kinds, None):
            values = [fn(comps) for k, _, comps in iterations if kind is None or k == kind]
            row.append(sum(values) / len(values) if values else float("nan"))
        commit_rows.append(tuple(row))
    print_table("SQL statements per iteration (mean count; COMMIT counted, BEGIN implied)",
                ("statement", *kinds, "all"), count_rows)
    print_table("Commits per iteration (mean)", ("commits", *kinds, "all"), commit_rows)

    p95, p50 = percentile(overhead, 95), percentile(overhead, 50)
    ratio = p95 / floor_p95
    floor_ok = ratio < TARGET_FLOOR_RATIO
    print_table("Floor (same database, right before the harness ran; ms)",
                ("figure", "p50", "p95"), [
                    ("floor: INSERT message + event, COMMIT", floor_p50, floor_p95),
                    ("harness overhead per iteration", p50, p95),
                    ("ratio overhead / floor", p50 / floor_p50, ratio)])
    print_table("Targets (issue 15 target 1)", ("figure", "measured", "target", "verdict"), [
        ("overhead per iteration p95 (ms)", p95, "< 20", verdict(p95 < TARGET_P95_MS)),
        ("overhead p95 / floor p95", ratio, f"< {TARGET_FLOOR_RATIO:g}", verdict(floor_ok)),
    ])
    print(f"\n  {len(iterations)} iterations in {turns} turns ({elapsed:.1f} s); live messages "
          f"{live_before} -> {live_after}; compactions during the run: {compactions}; "
          f"turn wall p50 {percentile(turn_walls, 50):.1f} ms")
    print(f"  OVERHEAD {verdict(p95 < TARGET_P95_MS)}: p95 {p95:.2f} ms "
          f"(p50 {p50:.2f}, max {max(overhead):.2f})")
    print(f"  FLOOR RATIO {verdict(floor_ok)}: overhead p95 {p95:.2f} ms / floor p95 "
          f"{floor_p95:.2f} ms = {ratio:.2f}x (p50/p50 {p50 / floor_p50:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
