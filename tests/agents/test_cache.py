"""Breakpoint planner, TTL rules, stable-prefix registry and cache health (agents/cache.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.cache import (
    REGISTRY, CacheHealth, CacheSettings, StablePrefixRegistry,
    cacheable_indexes, message_split, plan_breakpoints, register_stable_prefix,
    tool_run_ends,
    ttl_order_holds, with_max_breakpoints,
)
from agents.messages import Message, ModelRequest, ToolCall, Usage
from agents.prompt import build_system_prompt, recover_stable_len
from agents.providers import PROFILES
from simulator.prefix import anthropic_blocks
from agents.transports.anthropic_messages import AnthropicTransport


@dataclass(frozen=True)
class Caps:
    supports_caching: bool = True
    supports_1h_ttl: bool = True
    max_breakpoints: int = 4
    drops_markers_on_tool_only_assistant: bool = False
    marks_tool_messages: bool = True


NATIVE = Caps()
ENVELOPE = Caps(drops_markers_on_tool_only_assistant=True)
NO_1H = Caps(supports_1h_ttl=False)
SYSTEM = "You are Hermes.\n\nGuidance.\n\nSession: s1"
STABLE_LEN = len("You are Hermes.\n\nGuidance.")


def user(text: str) -> Message:
    return Message(role="user", content=text)


def tool_group(n: int, start: int, text: str = "calling") -> list[Message]:
    calls = tuple(ToolCall(id=f"c{start + k}", name="read_file") for k in range(n))
    out = [Message(role="assistant", content=text, tool_calls=calls)]
    out += [Message(role="tool", content=f"result {c.id}", tool_call_id=c.id,
                    tool_name=c.name) for c in calls]
    return out


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Valid histories of 1-80 messages: user turns, plain replies, parallel tool groups
    (1-4 calls, tool-only or with text, including empty results and an open final group)."""
    size = draw(st.integers(1, 80))
    out: list[Message] = [user(draw(st.sampled_from(["hi", "do it", "a" * 40])))]
    counter = 0
    while len(out) < size:
        kind = draw(st.sampled_from(["user", "reply", "group", "group"]))
        if kind == "user" and out[-1].role != "user":
            out.append(user(draw(st.sampled_from(["next", "and", "more please"]))))
        elif kind == "reply" and out[-1].role != "assistant":
            out.append(Message(role="assistant", content=draw(st.sampled_from(["ok", ""]))))
        elif out[-1].role != "assistant":
            n = draw(st.integers(1, 4))
            group = tool_group(n, counter, draw(st.sampled_from(["", "let me look"])))
            counter += n
            if draw(st.booleans()):
                group[-1] = Message(role="tool", content="", tool_call_id=group[-1].tool_call_id)
            out += group
        else:
            out.append(user("go on"))
    return out[:size]


def group_interiors(messages: list[Message]) -> set[int]:
    """Independent re-statement of "inside a tool run": every assistant tool-call message and
    every tool result that is followed by another tool result."""
    bad = set()
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_calls:
            bad.add(i)
        if m.role == "tool" and i + 1 < len(messages) and messages[i + 1].role == "tool":
            bad.add(i)
    return bad


@settings(max_examples=150, deadline=None)
@given(history=histories(),
       caps=st.sampled_from([NATIVE, ENVELOPE, NO_1H, Caps(max_breakpoints=2)]),
       stable=st.booleans(), ttl=st.sampled_from(["5m", "1h"]),
       prompt_ttl=st.sampled_from([None, "5m", "1h"]))
def test_b07_planner_properties_over_random_histories(history, caps, stable, ttl, prompt_ttl):
    """B07: at most 4 markers for any history; none inside a tool run; TTL order holds;
    input messages are unchanged and carry no markers."""
    messages = tuple(history)
    before = copy.deepcopy([m.to_dict() for m in messages])
    request = ModelRequest(model="m", system=SYSTEM, messages=messages,
                           stable_len=STABLE_LEN if stable else None)
    planned = plan_breakpoints(request, profile_caps=caps,
                               settings=CacheSettings(ttl=ttl, prompt_ttl=prompt_ttl))
    bps = planned.breakpoints
    assert len(bps) <= min(4, caps.max_breakpoints)
    indexes = [bp.index for bp in bps if bp.target == "message"]
    assert not set(indexes) & group_interiors(history)
    assert all(messages[i].wire_text.strip() for i in indexes)
    assert ttl_order_holds(bps)
    if not caps.supports_1h_ttl:
        assert {bp.ttl for bp in bps} == {"5m"}
    assert [m.to_dict() for m in messages] == before
    assert planned.messages is request.messages and request.breakpoints == ()


def test_b07_system_plus_four_user_turns_gets_four_markers_not_five():
    """B07 input: system + user turns a, b, c, d under "mark every system and user message"
    would be 5 markers; the planner places system + the last three."""
    request = ModelRequest(model="m", system="sys", messages=tuple(
        user(t) for t in "abcd"))
    bps = plan_breakpoints(request, profile_caps=NATIVE).breakpoints
    assert [(b.target, b.index) for b in bps] == [
        ("system", -1), ("message", 1), ("message", 2), ("message", 3)]


def test_stable_split_uses_two_system_markers_and_the_last_two_carriers():
    history = [user("q"), *tool_group(3, 0), Message(role="assistant", content="done"),
               user("again")]
    request = ModelRequest(model="m", system=SYSTEM, messages=tuple(history),
                           stable_len=STABLE_LEN)
    bps = plan_breakpoints(request, profile_caps=NATIVE).breakpoints
    assert [(b.target, b.index) for b in bps] == [
        ("system_stable", -1), ("system", -1), ("message", 5), ("message", 6)]


def test_stable_len_equal_to_system_is_not_a_split():
    request = ModelRequest(model="m", system="abc", messages=(user("x"),), stable_len=3)
    assert [b.target for b in plan_breakpoints(request, profile_caps=NATIVE).breakpoints] == [
        "system", "message"]


def test_only_last_result_of_a_parallel_group_is_a_boundary():
    history = [user("q"), *tool_group(3, 0)]
    assert tool_run_ends(history) == {1, 2, 3}
    assert cacheable_indexes(tuple(history), NATIVE) == [0, 4]


def test_tool_only_assistant_skipped_on_envelope_routes_marker_moves_back():
    """hermes-facts §20 case 5: an empty assistant with only tool calls gets no marker on an
    envelope route, whatever its position."""
    lone = Message(role="assistant", content="", tool_calls=(ToolCall(id="z", name="t"),))
    assert cacheable_indexes((user("a"), lone), ENVELOPE) == [0]


def test_no_caching_route_gets_no_breakpoints():
    request = ModelRequest(model="m", system=SYSTEM, messages=(user("a"),), stable_len=5)
    assert plan_breakpoints(request, profile_caps=PROFILES["openai"]).breakpoints == ()


def test_ttl_1h_clamped_on_routes_that_do_not_honour_it():
    request = ModelRequest(model="m", system="s", messages=(user("a"),))
    planned = plan_breakpoints(request, profile_caps=NO_1H, settings=CacheSettings(ttl="1h"))
    assert {b.ttl for b in planned.breakpoints} == {"5m"}
    native = plan_breakpoints(request, profile_caps=NATIVE, settings=CacheSettings(ttl="1h"))
    assert {b.ttl for b in native.breakpoints} == {"1h"}


def test_mixed_ttls_earlier_markers_take_the_longer_one():
    request = ModelRequest(model="m", system=SYSTEM, messages=(user("a"), user("b")),
                           stable_len=STABLE_LEN)
    bps = plan_breakpoints(request, profile_caps=NATIVE,
                           settings=CacheSettings(ttl="1h", prompt_ttl="5m")).breakpoints
    assert [b.ttl for b in bps] == ["1h"] * 4
    bps = plan_breakpoints(request, profile_caps=NATIVE,
                           settings=CacheSettings(ttl="5m", prompt_ttl="1h")).breakpoints
    assert [b.ttl for b in bps] == ["1h", "1h", "5m", "5m"]


def test_fewer_breakpoints_keep_the_rolling_pair_first():
    request = ModelRequest(model="m", system=SYSTEM, messages=tuple(user(t) for t in "abcd"),
                           stable_len=STABLE_LEN)
    bps = plan_breakpoints(request, profile_caps=Caps(max_breakpoints=3)).breakpoints
    assert [(b.target, b.index) for b in bps] == [("system", -1), ("message", 2), ("message", 3)]


def test_caps_lowered_to_a_learned_limit():
    # Parsing the provider's limit is the classifier's job (error_cases.json, bedrock row).
    lowered = with_max_breakpoints(PROFILES["anthropic"], 2)
    request = ModelRequest(model="m", system="s", messages=tuple(user(t) for t in "abcd"))
    assert len(plan_breakpoints(request, profile_caps=lowered).breakpoints) == 2


def test_planner_sets_split_at_from_registered_scaffold():
    scaffold = "<skill name=\"unique-split-test\">\nsteps\n</skill>\n\n"
    register_stable_prefix(scaffold)
    request = ModelRequest(model="m", system="s", messages=(user(scaffold + "args: 1"),))
    (_, bp) = plan_breakpoints(request, profile_caps=NATIVE).breakpoints
    assert bp.split_at == len(scaffold)


def test_b09_prefix_up_to_earliest_message_breakpoint_is_byte_stable_across_iterations():
    """B09: over a multi-iteration turn with a stored prompt, sha256 of system + every message
    before the earliest message breakpoint never changes bytes for what earlier requests saw,
    and each request's read boundary is the previous request's last breakpoint."""
    history = [user("fix the bug")]

    def digest(messages: list[Message]) -> str:
        body = SYSTEM + "".join(json.dumps(m.to_dict(), sort_keys=True) for m in messages)
        return hashlib.sha256(body.encode()).hexdigest()

    written: str | None = None
    for iteration in range(12):
        request = ModelRequest(model="m", system=SYSTEM, messages=tuple(history),
                               stable_len=STABLE_LEN)
        bps = plan_breakpoints(request, profile_caps=NATIVE).breakpoints
        message_bps = [b.index for b in bps if b.target == "message"]
        if written is not None:
            assert digest(history[:message_bps[0] + 1]) == written
        written = digest(history[:message_bps[-1] + 1])
        history += tool_group(1 + iteration % 3, 10 * iteration)


def test_registry_proper_prefix_and_non_blank_tail():
    reg = StablePrefixRegistry()
    reg.register("ABC")
    assert reg.find("ABC") is None
    assert reg.find("ABC   \n") is None
    assert reg.find("ABCD") == 3
    reg.register("AB")
    assert reg.find("ABCD") == 3
    assert reg.find("ABX") == 2


def test_registry_empty_prefix_ignored_and_entry_bound():
    reg = StablePrefixRegistry()
    reg.register("")
    assert reg.snapshot() == []
    for k in range(33):
        reg.register(f"prefix-{k:02d}")
    snap = reg.snapshot()
    assert len(snap) == 32 and "prefix-00" not in snap and snap[-1] == "prefix-32"


def test_registry_hit_refreshes_recency():
    reg = StablePrefixRegistry(max_entries=2)
    reg.register("A-")
    reg.register("B-")
    assert reg.find("A-tail") == 2
    reg.register("C-")
    assert reg.snapshot() == ["A-", "C-"]


def test_registry_char_budget_evicts_oldest_but_never_the_newest():
    reg = StablePrefixRegistry(max_chars=10)
    reg.register("aaaa")
    reg.register("bbbb")
    reg.register("cccc")
    assert reg.snapshot() == ["bbbb", "cccc"] and reg.total_chars == 8
    reg.register("x" * 50)
    assert reg.snapshot() == ["x" * 50] and reg.total_chars == 50
    assert reg.find("x" * 50 + " tail") == 50


def test_registry_default_budget_is_4_mib_of_chars():
    reg = StablePrefixRegistry()
    reg.register("s" * (3 * 1024 * 1024))
    reg.register("t" * (1024 * 1024))
    assert len(reg.snapshot()) == 2
    reg.register("u")
    assert reg.snapshot() == ["t" * (1024 * 1024), "u"]


def test_registry_is_thread_safe_under_concurrent_register_and_find():
    reg = StablePrefixRegistry(max_entries=8)

    def work(n: int) -> None:
        for k in range(300):
            reg.register(f"{n}-{k}:")
            reg.find(f"{n}-{k}:tail")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reg.snapshot()) == 8
    assert reg.total_chars == sum(len(p) for p in reg.snapshot())


def test_process_registry_is_what_register_stable_prefix_feeds():
    register_stable_prefix("process-wide-scaffold::")
    assert REGISTRY.find("process-wide-scaffold::tail") == len("process-wide-scaffold::")


def test_b09_cache_health_warns_on_third_write_only_call_and_survives_restart():
    """B09 usage: writes 2400, reads 0, three calls in a row -> one warning, flag persisted."""
    write_only = Usage(input_tokens=12, output_tokens=80, cache_write_5m_tokens=2400)
    health = CacheHealth()
    assert health.observe(write_only, caching=True) is None
    restored = CacheHealth.from_dict(json.loads(json.dumps(health.to_dict())))
    assert restored.observe(write_only, caching=True) is None
    warning = restored.observe(write_only, caching=True)
    assert warning is not None and "3 consecutive" in warning
    assert restored.to_dict() == {"streak": 3, "flagged": True}
    assert restored.observe(write_only, caching=True) is None


def test_cache_health_read_resets_and_non_caching_routes_are_ignored():
    write_only = Usage(cache_write_1h_tokens=100)
    health = CacheHealth()
    health.observe(write_only, caching=True)
    health.observe(write_only, caching=True)
    health.observe(Usage(cache_read_tokens=50, cache_write_5m_tokens=10), caching=True)
    assert health.streak == 0
    for _ in range(5):
        assert health.observe(write_only, caching=False) is None
    assert health.observe(None, caching=True) is None and health.streak == 0


def test_split_applies_to_every_message_with_a_prefix_not_only_the_newest():
    """The registry split is resolved onto a copy of every user message it matches, and a
    marked one gets ``split_at``; the input messages are untouched."""
    scaffold = "<skill name=\"every-message\">\nbody\n</skill>\n\n"
    register_stable_prefix(scaffold)
    history = (user(scaffold + "Arguments: x"), *tool_group(1, 900))
    request = ModelRequest(model="m", system="s", messages=history)
    planned = plan_breakpoints(request, profile_caps=NATIVE)
    assert [(b.index, b.split_at) for b in planned.breakpoints if b.target == "message"] == [
        (0, len(scaffold)), (2, None)]
    assert planned.messages[0].stable_prefix_len == len(scaffold)
    assert history[0].stable_prefix_len is None and planned.messages[1:] == history[1:]


def test_stored_stable_prefix_wins_over_the_registry_and_needs_no_registration():
    """A message built with ``stable_prefix_len`` (stored in the DB) splits there even in a
    fresh process whose registry never saw the scaffold."""
    text = "UNREGISTERED SCAFFOLD, stored length only.\n\nArguments: 7"
    stored = Message(role="user", content="/x 7", sent_content=text, stable_prefix_len=44)
    planned = plan_breakpoints(ModelRequest(model="m", system="s", messages=(stored,)),
                               profile_caps=NATIVE)
    assert planned.messages[0] is stored
    assert [b.split_at for b in planned.breakpoints if b.target == "message"] == [44]
    blank_tail = Message(role="user", content="SCAFFOLD   ", stable_prefix_len=8)
    assert message_split(blank_tail) is None
    assert message_split(Message(role="tool", content="SCAFFOLD tail", stable_prefix_len=8)) \
        is None


def _skill_turn(first: Message, iterations: int) -> list[list[Message]]:
    """The histories of a turn that opens with ``first`` and runs ``iterations`` tool
    iterations of one or two calls each, then a follow-up turn."""
    history = [first]
    out = []
    for k in range(iterations):
        out.append(list(history))
        history += tool_group(1 + k % 2, 500 + 10 * k, "")
    history += [Message(role="assistant", content="Deployed."), user("thanks, now check it")]
    out.append(list(history))
    return out


def _without_markers(blocks: list[dict]) -> list[dict]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def test_skill_message_keeps_its_two_blocks_after_the_marker_moves_off_and_cache_hits():
    """Wire level: a skill invocation carries a marker on its scaffold block while it is
    among the last carriers and none later, and its blocks are byte-identical throughout;
    the simulator's prompt cache reads every request after the first, and each read covers
    at least the previous request's whole prefix up to its last marker."""
    from simulator.cache import PromptCache, SimClock

    scaffold = ("<skill name=\"deploy-wire\">\n" + "Step: check the release notes.\n" * 120
                + "</skill>\n\n")
    first = Message(role="user", content="/deploy-wire v2",
                    sent_content=scaffold + "Arguments: v2", stable_prefix_len=len(scaffold))
    transport = AnthropicTransport(PROFILES["anthropic"], api_key=None)
    cache = PromptCache(SimClock())
    layouts, marked, previous_last = [], [], 0
    for n, history in enumerate(_skill_turn(first, 7)):
        request = ModelRequest(model="m", system=SYSTEM * 40, messages=tuple(history),
                               stable_len=STABLE_LEN)
        payload = transport.build_payload(plan_breakpoints(request, profile_caps=NATIVE))
        content = payload["messages"][0]["content"]
        layouts.append(_without_markers(content))
        marked.append(["cache_control" in b for b in content])
        blocks = anthropic_blocks(payload)
        outcome = cache.process(blocks, namespace="m")
        if n:
            assert outcome.cache_read_input_tokens >= previous_last > 0
        marks = [i for i, b in enumerate(blocks) if b.ttl is not None]
        previous_last = sum(b.tokens for b in blocks[:marks[-1] + 1])
    assert all(layout == layouts[0] for layout in layouts)
    assert [b["text"] for b in layouts[0]] == [scaffold, "Arguments: v2"]
    assert marked[0] == [True, False] and marked[-1] == [False, False]


def _readable_prefix_keys(payload: dict) -> tuple[set[bytes], int]:
    """Chained sha256 of the simulator's canonical blocks at every position a provider checks
    for a hit: each marked block and the 20 block boundaries before it (Anthropic docs, cache
    lookback). Also returns the number of markers."""
    keys, running, marked = [], b"", []
    for i, block in enumerate(anthropic_blocks(payload)):
        running = hashlib.sha256(running + block.data).digest()
        keys.append(running)
        if block.ttl is not None:
            marked.append(i)
    readable = {keys[j] for i in marked for j in range(max(0, i - 20), i + 1)}
    return readable, len(marked)


def _last_marked_key(payload: dict) -> bytes:
    running, last = b"", b""
    for block in anthropic_blocks(payload):
        running = hashlib.sha256(running + block.data).digest()
        if block.ttl is not None:
            last = running
    return last


def test_b09_wire_prefix_reproduced_across_iterations_restart_and_resume(tmp_path):
    """B09 at the wire: every request reproduces, where the provider looks for a hit (a marker
    or up to 20 blocks before one), the exact prefix the previous request wrote at its last
    marker: iteration to iteration, after a worker
    restart (messages reloaded from their stored dicts, stable boundary recovered from the
    stored prompt) and on resume with a new user message. Nothing here compacts."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "SOUL.md").write_text("You are the benchmark soul.")
    tools = ("read_file", "terminal")
    prompt = build_system_prompt(
        home=home, tool_names=tools, model="claude-sonnet-4-5", provider="anthropic",
        workspace=tmp_path, caller_context="", skills_index="", memory="m", user_profile="",
        session_id="s", started_at=date(2025, 1, 1))
    transport = AnthropicTransport(PROFILES["anthropic"], api_key=None)
    stored = [user("start")]
    previous: bytes | None = None
    stable_len: int | None = prompt.stable_len
    for iteration in range(9):
        if iteration in (3, 6):  # worker restart: reload rows, recover the boundary
            stored = [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in stored]
            stable_len = recover_stable_len(prompt.text, home=home, tool_names=tools,
                                            model="claude-sonnet-4-5", provider="anthropic")
            assert stable_len == prompt.stable_len
        if iteration == 6:  # resume: the user comes back with a new message
            stored.append(Message(role="assistant", content="Paused here."))
            stored.append(user("carry on"))
        request = ModelRequest(model="claude-sonnet-4-5", system=prompt.text,
                               messages=tuple(stored), stable_len=stable_len)
        payload = transport.build_payload(plan_breakpoints(request, profile_caps=NATIVE))
        readable, markers = _readable_prefix_keys(payload)
        assert markers <= 4
        if previous is not None:
            assert previous in readable
        previous = _last_marked_key(payload)
        stored += tool_group(1 + iteration % 3, 100 * iteration)


def test_b09_soul_edit_between_restarts_loses_the_discount_but_keeps_the_bytes(tmp_path):
    """After SOUL.md changed, recovery fails: the stored prompt is sent byte-exact as one
    marked system block and the message prefix is still reproduced from the stored rows."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "SOUL.md").write_text("Original soul.")
    prompt = build_system_prompt(
        home=home, tool_names=("terminal",), model="m", provider="anthropic",
        workspace=tmp_path, caller_context="", skills_index="", memory="", user_profile="",
        session_id="s", started_at=date(2025, 1, 1))
    (home / "SOUL.md").write_text("Edited soul, a different length.")
    stable_len = recover_stable_len(prompt.text, home=home, tool_names=("terminal",),
                                    model="m", provider="anthropic")
    assert stable_len is None
    request = ModelRequest(model="m", system=prompt.text, messages=(user("hi"),),
                           stable_len=stable_len)
    payload = AnthropicTransport(PROFILES["anthropic"], api_key=None).build_payload(
        plan_breakpoints(request, profile_caps=NATIVE))
    assert [b["text"] for b in payload["system"]] == [prompt.text]
    assert payload["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_transport_renders_a_stored_split_with_or_without_a_marker():
    """Unmarked: [scaffold, tail] with no marker; marked without split_at: the tail carries
    it; marked with split_at: the scaffold does. The two texts never change."""
    from agents.messages import Breakpoint

    message = Message(role="user", content="/x", sent_content="SCAFFOLD tail",
                      stable_prefix_len=8)
    transport = AnthropicTransport(PROFILES["anthropic"], api_key=None)

    def content(*points: Breakpoint) -> list[dict]:
        return transport.build_payload(ModelRequest(
            model="m", system="s", messages=(message,), breakpoints=points))["messages"][0][
                "content"]

    assert content() == [{"type": "text", "text": "SCAFFOLD"}, {"type": "text", "text": " tail"}]
    assert ["cache_control" in b for b in content(Breakpoint(target="message", index=0))] == [
        False, True]
    assert ["cache_control" in b for b in content(
        Breakpoint(target="message", index=0, split_at=8))] == [True, False]
