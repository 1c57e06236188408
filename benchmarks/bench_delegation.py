"""Delegation benchmark (issue 12, "Measured, and in your note"): a parent delegating five
children at once against the same five tasks run one after another, and the parent's
context with summaries against carrying the children's transcripts.

Each child does the same scripted work on the provider simulator: two terminal calls (a
``sleep`` standing for real work, then a few hundred lines of output) and a streamed
summary. Real runner, real policy, real Celery worker threads (``--workers``, default 6) on
the configured broker and database (Redis and PostgreSQL when REDIS_URL and DATABASE_URL are
set, else the in-memory broker and SQLite).

- concurrent: the parent makes ONE delegate call with five tasks; wall time from the
  user's message to the parent's final reply.
- sequential: the parent makes five delegate calls of one task each, one after another
  (each child runs alone); same children, same work.
- context: the parent's billed prompt tokens on its final request (it holds five
  summaries) against the same request carrying every child's transcript instead (the
  parent's own messages plus each child's messages, estimated with agents/context/tokens.py, the
  same estimator for both sides, and the billed figure alongside).

Run: ``python benchmarks/bench_delegation.py`` (``--children N --sleep S``). Prints a table;
not a test.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import django_boot, prepare_environment, print_table  # noqa: E402


def _goal(text: str) -> str | None:
    match = re.search(r"Goal:\n(.+?)\n", text)
    return match.group(1) if match else None


def make_policy(children: int, sleep: float):
    from simulator.script import Reply, ScriptRequest, ToolCallSpec

    goals = [f"task-{n}" for n in range(children)]

    def policy(request: ScriptRequest) -> Reply:
        goal = _goal(request.last_user_text)
        if goal is not None:  # a child: two tool calls, then a summary
            if request.iteration == 0:
                return Reply(text=f"Working on {goal}.", tool_calls=(ToolCallSpec(
                    name="terminal", input={"command": f"sleep {sleep}; echo {goal} started"}),))
            if request.iteration == 1:
                return Reply(text="Listing the data.", tool_calls=(ToolCallSpec(
                    name="terminal", input={"command": f"seq -f '{goal} row %g of the data' "
                                                       "1 300"}),))
            return Reply(text=f"{goal}: ran the job and read 300 rows; row 300 is the last. "
                              "Nothing left to do.", token_delay=0.005)
        if "one at a time" in request.last_user_text:
            done = request.iteration
            if done < children:
                return Reply(text="Next.", tool_calls=(ToolCallSpec(
                    name="delegate", input={"goal": goals[done]}),))
            return Reply(text="All tasks done (sequentially).")
        if request.tool_results:
            return Reply(text="All tasks done (concurrently).")
        return Reply(text="Delegating.", tool_calls=(ToolCallSpec(
            name="delegate", input={"tasks": [{"goal": g} for g in goals]}),))

    return policy


def run_parent(user, text: str, timeout: float = 600.0):
    from sessions.models import Turn
    from sessions.services import session_create, turn_start

    session = session_create(user=user, title=text[:40])
    t0 = time.monotonic()
    turn = turn_start(session=session, user=user, text=text)
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        turn.refresh_from_db()
        if turn.status in (Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED):
            break
        time.sleep(0.05)
    wall = time.monotonic() - t0
    if turn.status != Turn.Status.COMPLETED:
        raise SystemExit(f"parent turn ended {turn.status}: {turn.error}")
    return session, wall


def context_figures(session) -> dict:
    from agents.context.tokens import estimate_message_tokens
    from sessions.models import Message, Session, UsageRecord
    from sessions.transcript import message_to_agent

    final = UsageRecord.objects.filter(session=session).order_by("-id").first()
    parent_msgs = [message_to_agent(m) for m in Message.objects.filter(session=session)]
    delegate_results = sum(estimate_message_tokens(m) for m in parent_msgs
                           if m.role == "tool" and m.tool_name == "delegate")
    children = Session.objects.filter(parent=session)
    transcripts = sum(estimate_message_tokens(message_to_agent(m))
                      for m in Message.objects.filter(session__in=children))
    child_calls = UsageRecord.objects.filter(session__in=children).count()
    return {"billed": final.prompt_tokens, "delegate_results": delegate_results,
            "transcripts": transcripts, "carried": final.prompt_tokens - delegate_results
            + transcripts, "child_calls": child_calls}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=2.0,
                        help="seconds of 'work' in each child's first tool call")
    parser.add_argument("--workers", type=int, default=6)
    args = parser.parse_args()

    from simulator import SimulatorServer

    sim = SimulatorServer(host="127.0.0.1", port=0,
                          script=make_policy(args.children, args.sleep)).start()
    bench = prepare_environment("delegation", simulator_url=sim.url, use_redis=True,
                                extra={"HERMES_RETRY_BASE_DELAY": "0.2"})
    try:
        django_boot()
        from celery.contrib.testing.worker import start_worker
        from django.contrib.auth import get_user_model

        from hermes_web.celery import app

        user = get_user_model().objects.create_user("bench", password="bench-pw")
        mode = (f"Redis {bench.redis_url}" if bench.redis_url else "in-memory broker")
        print(f"hermes delegation benchmark: {bench.database}; {mode}; "
              f"{args.workers} worker threads; simulator {sim.url}")
        app.control.purge()
        with start_worker(app, pool="threads", concurrency=args.workers,
                          perform_ping_check=False, shutdown_timeout=30):
            run_parent(user, "warm-up: say hello")  # imports, connections, first prompt
            concurrent, wall_c = run_parent(user, "delegate the tasks")
            sequential, wall_s = run_parent(user, "delegate the tasks one at a time")
        ctx_c = context_figures(concurrent)
        ctx_s = context_figures(sequential)
        print_table(f"{args.children} children, {args.sleep:.1f} s of work each + 3 model "
                    "calls each", ("run", "wall s", "child calls"),
                    [("concurrent (one delegate call, 5 tasks)", wall_c, ctx_c["child_calls"]),
                     ("sequential (5 delegate calls, 1 task each)", wall_s,
                      ctx_s["child_calls"])])
        print(f"\n  sequential / concurrent wall time: {wall_s / wall_c:.2f}x")
        print_table("parent context on its final request (tokens)", ("figure", "tokens"), [
            ("billed prompt, with 5 summaries", ctx_c["billed"]),
            ("  of which the delegate result (estimated)", ctx_c["delegate_results"]),
            ("children's transcripts (estimated)", ctx_c["transcripts"]),
            ("same request carrying the transcripts instead", ctx_c["carried"])])
        print(f"\n  carrying transcripts / summaries: {ctx_c['carried'] / ctx_c['billed']:.2f}x "
              f"the parent's context")
    finally:
        sim.stop()
        bench.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
