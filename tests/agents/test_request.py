"""The request pipeline: its memos (incremental repair, per-message estimates, the
fingerprint chain) never change a result, only its cost."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from agents.messages import Message, ToolCall
from agents.providers import resolve_profile
from agents.request import RequestPipeline
from agents.context.tokens import Calibrator, estimate_payload_tokens, prefix_fingerprint
from agents.tools.registry import default_registry
from agents.transports import get_transport

PROFILE = resolve_profile("simulator")
TRANSPORT = get_transport(PROFILE, api_key="x")
TOOLS = default_registry().specs()


def pipeline() -> RequestPipeline:
    return RequestPipeline(transport=TRANSPORT, model="m", system="Stable part.\n\nRest.",
                           stable_len=12, tools=TOOLS, profile=PROFILE,
                           calibrator=Calibrator(threshold=10**9), context_window=200_000)


step = st.one_of(
    st.tuples(st.just("user"), st.text(min_size=0, max_size=40)),
    st.tuples(st.just("tools"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("text"), st.text(min_size=0, max_size=40)),
    st.tuples(st.just("orphan"), st.just("")),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=25))
def test_incremental_prepare_equals_a_fresh_pipeline_at_every_step(steps):
    warm = pipeline()
    history: list[Message] = []
    for n, (kind, value) in enumerate(steps):
        if kind == "user":
            history.append(Message(role="user", content=value))
        elif kind == "text":
            history.append(Message(role="assistant", content=value))
        elif kind == "orphan":
            history.append(Message(role="tool", content="late", tool_call_id=f"ghost{n}"))
        else:
            calls = tuple(ToolCall(id=f"c{n}_{i}", name="read_file",
                                   arguments=json.dumps({"path": f"f{i}"}))
                          for i in range(value))
            history.append(Message(role="assistant", content="", tool_calls=calls))
            history += [Message(role="tool", content=f"out {c.id}", tool_call_id=c.id,
                                tool_name="read_file") for c in calls]
        got = warm.prepare(history)
        want = pipeline().prepare(history)
        assert got.request.messages == want.request.messages
        assert got.request.breakpoints == want.request.breakpoints
        assert got.rough_tokens == want.rough_tokens
        assert warm.fingerprint(got.history) == prefix_fingerprint(
            system=warm.system, tools=TOOLS, messages=got.history)
        history = list(got.history)


def test_estimate_tracks_the_exact_payload_within_a_few_tokens_per_message():
    history = []
    for i in range(40):
        history.append(Message(role="user", content=f"question {i} " * 20))
        history.append(Message(role="assistant", content=f"answer {i} " * 30))
    p = pipeline()
    prepared = p.prepare(history)
    exact = estimate_payload_tokens(TRANSPORT.build_payload(prepared.request))
    assert abs(prepared.rough_tokens - exact) <= 5 * len(history)
    assert prepared.rough_tokens > 0.95 * exact


def test_output_budget_fits_the_window():
    p = pipeline()
    assert p.output_budget(1_000) == p.max_tokens
    assert p.output_budget(199_000) == 200_000 - 199_000 - 256
    assert p.output_budget(199_900) == 256
    assert p.note_overflow(197000, 200000)  # the classifier's hints, not the message
    assert p.prepare([Message(role="user", content="hi")]).request.max_tokens == 200_000 - 197_000 - 256
