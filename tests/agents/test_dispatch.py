"""Dispatch: validation, gating, approvals, the segmented scheduler (seed "Dispatch: not
parallel, not serial, segmented"; hermes-facts §8, §15; failure case B18)."""

from __future__ import annotations

import contextvars
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.backends.local import LocalBackend
from agents.messages import ToolCall, ToolSpec
from agents.policy import Decision
from agents.tools import PathScope, ToolContext, ToolOutput
from agents.tools.dispatch import (
    EMPTY_NAME_ERROR, CallFacts, dispatch_tool_calls, plan_segments)
from agents.tools.registry import default_registry
from agents.tools.workspace import overlaps

ALLOW = Decision(verdict="allow", rule="test")
identity: contextvars.ContextVar[str] = contextvars.ContextVar("identity", default="unset")


def allow(call: ToolCall) -> Decision:
    return ALLOW


def call(id: str, name: str, **args: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=json.dumps(args))


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("old\n")
    return ToolContext(workspace=ws, backend=LocalBackend())


class Probe:
    """A read-only test tool that records where and with which identity it ran, and can
    wait on a barrier to prove it ran concurrently with its neighbours."""

    read_only = True
    interactive = False

    def __init__(self, name: str = "probe", barrier: threading.Barrier | None = None,
                 scope: str | None = "x", fail: Exception | None = None):
        self.spec = ToolSpec(name=name, description="probe", input_schema={"type": "object"})
        self.barrier, self.scope, self.fail = barrier, scope, fail
        self.seen: list[tuple[str, str]] = []

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> PathScope | None:
        return None if self.scope is None else [(ctx.workspace / self.scope, "read")]

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if self.fail is not None:
            raise self.fail
        if self.barrier is not None:
            self.barrier.wait(timeout=5)
        self.seen.append((identity.get(), threading.current_thread().name))
        return ToolOutput(text=f"probe {args.get('n')}")


def test_results_in_emission_order_and_read_after_write_sees_the_write(ctx: ToolContext) -> None:
    calls = [call("c1", "write_file", path="a.txt", content="new\n"),
             call("c2", "read_file", path="a.txt"),
             call("c3", "search_files", pattern="new"),
             call("c4", "terminal", command="cat a.txt")]
    outcome = dispatch_tool_calls(calls, registry=default_registry(), ctx=ctx, gate=allow)
    assert [m.tool_call_id for m in outcome.results] == ["c1", "c2", "c3", "c4"]
    assert outcome.results[1].content == "     1\tnew"
    assert outcome.results[2].content == "a.txt:1: new"
    assert outcome.results[3].content == "new\n[exit code 0]"
    assert outcome.outputs["c4"].metadata["exit_code"] == 0
    assert outcome.pending == () and not outcome.interrupted


def test_empty_name_gets_a_short_error_without_the_catalogue(ctx: ToolContext) -> None:
    outcome = dispatch_tool_calls([call("e1", "", path="x")], registry=default_registry(),
                                  ctx=ctx, gate=allow)
    (result,) = outcome.results
    assert result.tool_call_id == "e1" and result.is_error
    assert result.content == EMPTY_NAME_ERROR
    assert not any(name in result.content for name in default_registry().names())


def test_typo_gets_suggestions_and_unknown_gets_the_catalogue(ctx: ToolContext) -> None:
    outcome = dispatch_tool_calls([call("t1", "reed_file"), call("t2", "launch_rockets")],
                                  registry=default_registry(), ctx=ctx, gate=allow)
    typo, unknown = outcome.results
    assert typo.content.startswith("Tool 'reed_file' does not exist. Did you mean: read_file")
    assert unknown.content == ("Tool 'launch_rockets' does not exist. Available tools: patch, "
                               "read_file, search_files, terminal, write_file.")


def test_repaired_name_runs(ctx: ToolContext) -> None:
    outcome = dispatch_tool_calls([call("r1", "Read-File", path="a.txt")],
                                  registry=default_registry(), ctx=ctx, gate=allow)
    assert outcome.results[0].tool_name == "read_file" and not outcome.results[0].is_error


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"text"', '{"path": 5}',
                                       '{"pth": "a.txt"}'])
def test_bad_arguments_are_error_results_and_never_gated(ctx: ToolContext,
                                                         arguments: str) -> None:
    gated: list[str] = []

    def gate(c: ToolCall) -> Decision:
        gated.append(c.id)
        return ALLOW

    outcome = dispatch_tool_calls([ToolCall(id="b1", name="read_file", arguments=arguments),
                                   call("b2", "read_file", path="a.txt")],
                                  registry=default_registry(), ctx=ctx, gate=gate)
    bad, good = outcome.results
    assert bad.is_error and bad.content.startswith("Invalid tool arguments")
    assert not good.is_error and gated == ["b2"]


def test_deny_is_reported_and_not_executed(ctx: ToolContext) -> None:
    def gate(c: ToolCall) -> Decision:
        return Decision(verdict="deny", rule="hardline", reason="rm -rf / is always blocked")

    outcome = dispatch_tool_calls([call("d1", "write_file", path="b.txt", content="x")],
                                  registry=default_registry(), ctx=ctx, gate=gate)
    assert outcome.results[0].content == "not executed: rm -rf / is always blocked"
    assert outcome.results[0].is_error and not (ctx.workspace / "b.txt").exists()


def test_ask_runs_only_the_calls_before_it_and_returns_the_rest_pending(ctx: ToolContext) -> None:
    ask = Decision(verdict="ask", rule="default_ask", reason="writes a file")

    def gate(c: ToolCall) -> Decision:
        return ask if c.id == "p2" else ALLOW

    calls = [call("p1", "read_file", path="a.txt"),
             call("p2", "write_file", path="b.txt", content="b"),
             call("p3", "write_file", path="c.txt", content="c"),
             call("p4", "", path="x")]
    outcome = dispatch_tool_calls(calls, registry=default_registry(), ctx=ctx, gate=gate)
    assert [m.tool_call_id for m in outcome.results] == ["p1"]
    assert [(c.id, d) for c, d in outcome.pending] == [("p2", ask), ("p3", ALLOW), ("p4", None)]
    assert not (ctx.workspace / "b.txt").exists() and not (ctx.workspace / "c.txt").exists()

    resumed = dispatch_tool_calls([c for c, _ in outcome.pending], registry=default_registry(),
                                  ctx=ctx, gate=allow)
    assert [m.tool_call_id for m in resumed.results] == ["p2", "p3", "p4"]
    assert (ctx.workspace / "b.txt").read_text() == "b"
    assert resumed.results[2].content == EMPTY_NAME_ERROR


def test_should_stop_interrupts_the_remaining_calls(ctx: ToolContext) -> None:
    ran: list[str] = []
    checks = iter([False, True, True, True])
    outcome = dispatch_tool_calls(
        [call("s1", "terminal", command="echo one"), call("s2", "terminal", command="echo two"),
         call("s3", "read_file", path="a.txt")],
        registry=default_registry(), ctx=ctx, gate=allow,
        on_call=lambda c: ran.append(c.id), should_stop=lambda: next(checks))
    assert ran == ["s1"] and outcome.interrupted
    assert [m.content for m in outcome.results][1:] == [
        "not executed: interrupted before it ran"] * 2
    assert outcome.results[0].content == "one\n[exit code 0]"


def test_tool_exceptions_become_error_results_without_traceback(ctx: ToolContext) -> None:
    registry = default_registry()
    registry.register(Probe(name="boom", fail=KeyError("missing")))
    outcome = dispatch_tool_calls([call("x1", "boom")], registry=registry, ctx=ctx, gate=allow)
    assert outcome.results[0].content == "KeyError: 'missing'" and outcome.results[0].is_error


def test_concurrent_run_executes_in_parallel_with_contextvars(ctx: ToolContext) -> None:
    barrier = threading.Barrier(3)
    probe = Probe(barrier=barrier)
    registry = default_registry()
    registry.register(probe)
    token = identity.set("user-42")
    try:
        outcome = dispatch_tool_calls([call(f"q{i}", "probe", n=i) for i in range(3)],
                                      registry=registry, ctx=ctx, gate=allow)
    finally:
        identity.reset(token)
    assert [m.content for m in outcome.results] == ["probe 0", "probe 1", "probe 2"]
    assert not barrier.broken
    assert {who for who, _ in probe.seen} == {"user-42"}
    assert all(thread.startswith("hermes-tool") for _, thread in probe.seen)


def test_each_call_on_a_worker_thread_is_followed_by_after_worker_call_there(
        ctx: ToolContext) -> None:
    """The runner closes a worker thread's database connection this way (the thread ends
    with the batch); a failing call is followed too, and the calling thread never is."""
    probe = Probe(barrier=threading.Barrier(2))
    failing = Probe(name="failing", scope="y", fail=RuntimeError("no"))
    plain = Probe(name="plain", scope="z")
    registry = default_registry()
    for tool in (probe, failing, plain):
        registry.register(tool)
    after: list[str] = []
    dispatch_tool_calls([call("p1", "probe"), call("p2", "probe")], registry=registry,
                        ctx=ctx, gate=allow,
                        after_worker_call=lambda: after.append(threading.current_thread().name))
    assert len(after) == 2 and all(name.startswith("hermes-tool") for name in after)
    assert sorted(after) == sorted(thread for _, thread in probe.seen)
    after.clear()
    dispatch_tool_calls([call("f1", "failing"), call("f2", "plain")], registry=registry,
                        ctx=ctx, gate=allow,
                        after_worker_call=lambda: after.append(threading.current_thread().name))
    assert len(after) == 2
    dispatch_tool_calls([call("one", "plain")], registry=registry, ctx=ctx, gate=allow,
                        after_worker_call=lambda: after.append("calling thread"))
    assert "calling thread" not in after


def test_single_call_runs_on_the_calling_thread(ctx: ToolContext) -> None:
    probe = Probe()
    registry = default_registry()
    registry.register(probe)
    dispatch_tool_calls([call("one", "probe")], registry=registry, ctx=ctx, gate=allow)
    assert probe.seen == [("unset", threading.current_thread().name)]


def test_undeterminable_scope_is_a_barrier(ctx: ToolContext) -> None:
    vague = Probe(name="vague", scope=None)
    clear = Probe(name="clear", scope="x")
    registry = default_registry()
    registry.register(vague)
    registry.register(clear)
    dispatch_tool_calls([call("v1", "vague"), call("v2", "vague")], registry=registry,
                        ctx=ctx, gate=allow)
    dispatch_tool_calls([call("c1", "clear"), call("c2", "clear")], registry=registry,
                        ctx=ctx, gate=allow)
    main = threading.current_thread().name
    assert [thread for _, thread in vague.seen] == [main, main]
    assert all(thread.startswith("hermes-tool") for _, thread in clear.seen)


# --- the scheduler as a pure function -------------------------------------------------

PATHS = [Path("/w"), Path("/w/a"), Path("/w/a/x"), Path("/w/b"), Path("/w/b/y")]
scope_item = st.tuples(st.sampled_from(PATHS), st.sampled_from(["read", "write"]))
fact_kind = st.one_of(
    st.just(("barrier", None)), st.just(("unscoped-ro", ())), st.just(("unscoped-rw", ())),
    st.just(("unknown", None)),
    st.lists(scope_item, min_size=1, max_size=3).map(lambda s: ("scoped", tuple(s))))


def build(kinds: list[tuple[str, Any]]) -> list[CallFacts]:
    return [CallFacts(index=i, barrier=kind == "barrier",
                      read_only=kind in ("unscoped-ro", "scoped"), scope=scope)
            for i, (kind, scope) in enumerate(kinds)]


def conflicts(a: CallFacts, b: CallFacts) -> bool:
    return any(overlaps(p, q) and "write" in (m, n)
               for p, m in a.scope or () for q, n in b.scope or ())


def is_barrier(f: CallFacts) -> bool:
    return f.barrier or f.scope is None or (not f.scope and not f.read_only)


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(fact_kind, max_size=12))
def test_segments_keep_order_separate_conflicts_and_isolate_barriers(
        kinds: list[tuple[str, Any]]) -> None:
    facts = build(kinds)
    segments = plan_segments(facts)
    assert [i for seg in segments for i in seg] == list(range(len(facts)))
    for seg in segments:
        members = [facts[i] for i in seg]
        if any(is_barrier(f) for f in members):
            assert len(seg) == 1
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                assert not conflicts(members[x], members[y])
    for before, after in zip(segments, segments[1:]):
        first = facts[after[0]]
        if not is_barrier(first) and not any(is_barrier(facts[i]) for i in before):
            assert any(conflicts(first, facts[i]) for i in before)


@settings(max_examples=100, deadline=None)
@given(count=st.integers(min_value=2, max_value=10), path=st.sampled_from(PATHS))
def test_readers_of_the_same_path_share_one_run(count: int, path: Path) -> None:
    facts = build([("scoped", ((path, "read"),))] * count)
    assert plan_segments(facts) == [list(range(count))]


def test_writer_then_reader_of_a_child_path_are_split() -> None:
    facts = build([("scoped", ((Path("/w/a"), "write"),)),
                   ("scoped", ((Path("/w/a/x"), "read"),)),
                   ("scoped", ((Path("/w/b"), "read"),))])
    assert plan_segments(facts) == [[0], [1, 2]]
