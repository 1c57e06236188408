"""Issue 15 target 1: the per-iteration work that is O(new messages) (memos keyed by message
identity, running sums, per-message wire forms) gives exactly what a from-scratch
computation gives, for random histories that grow, get rewritten, truncated and reloaded."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given, settings, strategies as st

from agents.cache import (REGISTRY, StablePrefixMemo, cacheable_indexes, last_carriers,
                          resolve_stable_prefixes)
from agents.context.prune import ColdReclaimTally, plan_prune
from agents.context.tokens import Calibrator, estimate_message_tokens, prefix_fingerprint
from agents.messages import Breakpoint, Message, ModelRequest, ToolCall, common_prefix
from agents.providers import resolve_profile
from agents.request import RequestPipeline
from agents.session_cache import BoundSession, entry_bytes
from agents.tools.registry import default_registry
from agents.transports import get_transport
from agents.transports.anthropic_wire import (_render_fresh, render_cache_clear,
                                              render_messages)

TOOLS = default_registry().specs()[:3]
SCAFFOLD = "SCAFFOLD:: fixed instructions\n"
PROFILES = [resolve_profile(name) for name in ("simulator", "simulator-envelope",
                                               "simulator-openai")]
TRANSPORTS = {p.name: get_transport(p, api_key="x") for p in PROFILES}

TEXTS = ["", "  ", "short", "x" * 250, "y" * 2_500, "z" * 9_000, "[pruned: old]", "dup " * 80,
         SCAFFOLD + "tail text", SCAFFOLD, "é漢字 text"]
ARGUMENTS = ['{"path": "a"}', "{not json", "[1]", "", json.dumps({"content": "w" * 700}),
             json.dumps({"blob": "v" * 2_100, "n": 1})]

texts = st.sampled_from(TEXTS)
call_ids = st.sampled_from(["c1", "c2", "c3", "c4"])
calls = st.builds(lambda i, a, n: ToolCall(id=i, name=n, arguments=a), call_ids,
                  st.sampled_from(ARGUMENTS), st.sampled_from(["read_file", "terminal", ""]))
messages = st.one_of(
    st.builds(lambda t, s: Message(role="user", content=t, stable_prefix_len=s), texts,
              st.sampled_from([None, None, len(SCAFFOLD), 3])),
    st.builds(lambda t, c, r: Message(role="assistant", content=t, tool_calls=tuple(c),
                                      reasoning=r),
              texts, st.lists(calls, max_size=3), st.sampled_from([None, "thinking"])),
    st.builds(lambda t, i, e, s: Message(role="tool", content=t, tool_call_id=i,
                                         tool_name="read_file", is_error=e, sent_content=s),
              texts, call_ids, st.booleans(), st.sampled_from([None, None, "[pruned: stub]"])),
)
exchange = st.builds(  # a well-formed step: calls and their results, the common case
    lambda t, n: [Message(role="assistant", content=t, tool_calls=tuple(
        ToolCall(id=f"k{k}", name="read_file", arguments='{"path": "f"}') for k in range(n))),
        *[Message(role="tool", content=TEXTS[k % len(TEXTS)], tool_call_id=f"k{k}",
                  tool_name="read_file") for k in range(n)]],
    texts, st.integers(min_value=0, max_value=3))
ops = st.one_of(
    st.tuples(st.just("append"), st.lists(messages, min_size=1, max_size=4)),
    st.tuples(st.just("append"), exchange),
    st.tuples(st.just("rewrite"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("reload"), st.just(0)),
    st.tuples(st.just("register"), st.sampled_from([SCAFFOLD, "SCAF", "short"])),
)


def apply(history: list[Message], op: tuple, ids: list[int], *,
          unique_calls: bool = False) -> list[Message]:
    """One change to a history, as the runner sees them: appended rows (with ids), a row
    rewritten in place (prune), a rewind, a reload from rows (equal values, new objects).
    ``unique_calls``: every appended call id made unique (see the pipeline test)."""
    kind, value = op
    if kind == "append":
        out = list(history)
        for m in value:
            ids[0] += 1
            if unique_calls:
                m = replace(m, tool_calls=tuple(replace(c, id=f"{c.id}_{ids[0]}_{k}")
                                                for k, c in enumerate(m.tool_calls)),
                            tool_call_id=m.tool_call_id and f"{m.tool_call_id}_{ids[0] - 1}_0")
            out.append(replace(m, id=ids[0]))
        return out
    if kind == "rewrite" and history:
        i = value % len(history)
        return [*history[:i], replace(history[i], sent_content="[pruned: edited]"),
                *history[i + 1:]]
    if kind == "truncate" and history:
        return history[:value % (len(history) + 1)]
    if kind == "reload":
        return [replace(m) for m in history]
    if kind == "register":
        REGISTRY.register(value)
    return history


def pipeline(profile) -> RequestPipeline:
    return RequestPipeline(transport=TRANSPORTS[profile.name], model="m",
                           system="Stable part.\n\nRest.", stable_len=12, tools=TOOLS,
                           profile=profile, calibrator=Calibrator(threshold=10**9),
                           context_window=200_000)


def wire(profile, request: ModelRequest) -> str:
    return json.dumps(TRANSPORTS[profile.name].build_payload(request), sort_keys=True)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(PROFILES), st.lists(ops, min_size=1, max_size=14), st.booleans())
def test_pipeline_prepare_equals_a_fresh_pipeline(profile, steps, follow_legal):
    """The warm pipeline (kept across steps, as across a turn's iterations and a session's
    turns) builds the same request bytes, estimate and fingerprint as a new one.

    With ``follow_legal`` the next step extends the legal history handed back (as the loop
    does); call ids are then unique, since re-repairing a legal history whose ``_r2`` wire
    ids collide with stored ones is not idempotent (validate_and_repair, a known gap that a
    fresh pipeline, fed stored rows, never meets)."""
    REGISTRY.clear()
    try:
        warm, history, ids = pipeline(profile), [], [0]
        for op in steps:
            history = apply(history, op, ids, unique_calls=follow_legal)
            got = warm.prepare(history)
            want = pipeline(profile).prepare(history)
            assert got.history == want.history
            assert wire(profile, got.request) == wire(profile, want.request)
            assert got.request == want.request
            assert (got.rough_tokens, got.projected_tokens) == (want.rough_tokens,
                                                                 want.projected_tokens)
            assert warm.calibrator._pending == (got.rough_tokens, prefix_fingerprint(
                system=warm.system, tools=warm.tools, messages=got.history), len(got.history))
            if follow_legal:  # the loop goes on with the legal history it was given back
                history = list(got.history)
    finally:
        REGISTRY.clear()


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=30), st.sampled_from(PROFILES),
       st.integers(min_value=0, max_value=4))
def test_last_carriers_are_the_tail_of_cacheable_indexes(history, caps, count):
    history = tuple(history)
    want = cacheable_indexes(history, caps)
    assert last_carriers(history, caps, count) == (want[-count:] if count else [])


tool_runs = st.lists(st.builds(  # many results, few texts: duplicates and twins
    lambda t, s: Message(role="tool", content=t, tool_call_id="c1", tool_name="read_file",
                         sent_content=s),
    st.sampled_from(["x" * 250, "dup " * 80, "y" * 2_500, "short"]),
    st.sampled_from([None, None, None, "[pruned: stub]"])), min_size=1, max_size=8)
prune_ops = st.one_of(ops, st.tuples(st.just("append"), tool_runs))


@settings(max_examples=150, deadline=None)
@given(st.lists(prune_ops, min_size=1, max_size=30))
def test_cold_reclaim_tally_equals_plan_prune(steps):
    tally, history, ids = ColdReclaimTally(estimate_message_tokens), [], [0]
    for op in steps:
        history = apply(history, op, ids)
        if op[0] == "append" and history and history[-1].reasoning:  # the repair's copy
            history[-1] = replace(history[-1], reasoning=None)
        tally.update(history)
        plan = plan_prune(tuple(history), estimate=estimate_message_tokens, trigger_tokens=0,
                          rearm_level=0, cold=True) if history else None
        assert tally.reclaimed == (0 if plan is None else plan.reclaimed)
        assert tally.tokens == sum(estimate_message_tokens(m) for m in history)


scaffolded = st.lists(st.builds(
    lambda t, s: Message(role="user", content=t, stable_prefix_len=s),
    st.sampled_from([SCAFFOLD + "tail", "SCAF and more", "short and long", SCAFFOLD, "none"]),
    st.sampled_from([None, None, None, 4])), min_size=1, max_size=4)
prefix_ops = st.one_of(
    st.tuples(st.just("append"), scaffolded),
    st.tuples(st.just("register"), st.sampled_from([SCAFFOLD, "SCAF", "short", "other"])),
    st.tuples(st.just("rewrite"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("reload"), st.just(0)))


@settings(max_examples=100, deadline=None)
@given(st.lists(prefix_ops, min_size=1, max_size=16))
def test_stable_prefix_memo_equals_a_full_resolve_and_touches_alike(steps):
    """Same messages out, and the registry left in the same recency order."""
    REGISTRY.clear()
    try:
        memo, history, ids = StablePrefixMemo(), [], [0]
        for op in steps:
            history = apply(history, op, ids)
            before, version = REGISTRY.snapshot(), REGISTRY.version
            got, got_order = memo.resolve(tuple(history)), REGISTRY.snapshot()
            REGISTRY.clear()
            for prefix in before:
                REGISTRY.register(prefix)
            REGISTRY.version = version
            want = resolve_stable_prefixes(tuple(history))
            assert got == want and got_order == REGISTRY.snapshot()
    finally:
        REGISTRY.clear()


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, max_size=20), st.sampled_from(PROFILES))
def test_memoised_wire_form_equals_a_fresh_render(history, profile):
    """Rendering a message a second time (its memo, the thread's last rendering) gives the
    bytes of a first render, marked or not. (A body is read-only, shared with the memos: the
    SDK copies it before sending; see the next test for bodies handed out earlier.)"""
    request = ModelRequest(model="m", system="sys", messages=tuple(history))
    planned = pipeline(profile).prepare(list(history)).request
    for req in (request, planned):
        first = TRANSPORTS[profile.name].build_payload(req)
        fresh = replace(req, messages=tuple(replace(m) for m in req.messages))  # no memos
        for payload in (first, TRANSPORTS[profile.name].build_payload(req)):
            assert json.dumps(payload) == json.dumps(
                TRANSPORTS[profile.name].build_payload(fresh))


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, max_size=20), st.lists(messages, max_size=5))
def test_entry_bytes_of_an_appended_history_equals_a_fresh_count(before, appended):
    kept = tuple(before)
    previous = BoundSession(pipeline=None, history=kept, version=1,  # type: ignore[arg-type]
                            system_prompt="p", turn_id=1,
                            size=entry_bytes(kept, system_prompt="p"))
    grown = [*kept, *appended]
    assert entry_bytes(grown, system_prompt="p", previous=previous) == entry_bytes(
        [replace(m) for m in grown], system_prompt="p")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=12), st.lists(st.sampled_from("abc"),
                                                                max_size=12), st.booleans())
def test_common_prefix_is_the_length_of_the_equal_prefix(left, right, as_tuple):
    made = {t: Message(role="user", content=t) for t in "abc"}
    a = [made[t] if i % 2 else Message(role="user", content=t) for i, t in enumerate(left)]
    b = [made[t] for t in right]
    want = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    assert common_prefix(tuple(a) if as_tuple else a, b) == want


def test_a_copy_starts_without_the_memo():
    from agents.messages import message_memo

    m = Message(role="user", content="x")
    message_memo(m)["k"] = 1
    assert replace(m)._memo is None and replace(m) == m and hash(replace(m)) == hash(m)
    assert "_memo" not in repr(m)


marks_strategy = st.dictionaries(
    st.integers(min_value=0, max_value=60),
    st.builds(lambda t, s: Breakpoint(target="message", index=0, ttl=t, split_at=s),
              st.sampled_from(["5m", "1h"]), st.sampled_from([None, 4])), max_size=4)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(ops, marks_strategy), min_size=1, max_size=14),
       st.integers(min_value=0, max_value=40))
def test_wire_rendering_reused_from_the_last_equals_a_fresh_one(steps, long_after):
    """render_messages extends the thread's last rendering (anthropic_wire._plain_wire):
    for histories that grow, get rewritten, truncated and reloaded, with marks that move,
    the body equals the rendering made without the cache, and a body handed out earlier is
    never edited by a later rendering (it is shared, read-only)."""
    render_cache_clear()
    history, ids, handed = [], [0], []
    filler = [Message(role="user", content=f"old {k}", id=-k - 1) for k in range(long_after)]
    for op, raw_marks in steps:
        history = apply(history, op, ids)
        messages = tuple(filler + history)  # past RENDER_CACHE_MIN as the filler grows
        marks = {i: replace(b, index=i) for i, b in raw_marks.items()}
        got = render_messages(messages, marks)
        assert got == _render_fresh(messages, marks)
        handed.append((json.dumps(got, sort_keys=True), got))
        for text, body in handed:  # no later rendering changed an earlier body
            assert json.dumps(body, sort_keys=True) == text
    render_cache_clear()
