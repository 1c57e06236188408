"""Cache-economics benchmark: an all-day session replayed against the simulator's prompt cache.

Issue 3, "Benchmark". Three bursts of tool-heavy iterations (>= 40 each) separated by idle
gaps longer than the 5-minute TTL, on the simulator's clock. Every request is built the way
the harness builds it: the real three-tier prompt (agents/prompt.py), the real planner
(agents/cache.py) and the Anthropic transport's ``build_payload``; the simulator's byte-exact
cache accounting (simulator/cache.py over simulator/prefix.py) bills it. The same
requests are billed three more ways: (a) no caching, (b) naively marking the last four stored
messages, (c) the lower bound (each distinct prefix block written once with the TTL it needs,
every later use read). Prints per-request usage and cost, a summary table and PASS/FAIL per
target. Run: ``python benchmarks/bench_cache.py`` (``make bench-cache``); ``--quiet`` drops
the per-request lines. Not a test: it measures, and exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import random
import tempfile
import sys
import time
import warnings
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.cache import CacheSettings, plan_breakpoints  # noqa: E402
from agents.cache_strategy import (SessionRhythm, choose_cache_strategy,  # noqa: E402
                                   long_gaps)
from agents.context.compaction import (Skip, build_summary_request, compacted_transcript,  # noqa: E402
                               plan_compaction)
from agents.messages import Breakpoint, Message, ModelRequest, ToolCall, tool_result  # noqa: E402
from agents.pricing import Buckets, call_price, self_hosted_overrides  # noqa: E402
from agents.prompt import build_system_prompt  # noqa: E402
from agents.context.prune import plan_prune  # noqa: E402
from agents.context.tokens import estimate_message_tokens, estimate_text_tokens  # noqa: E402
from agents.providers import PROFILES  # noqa: E402
from simulator.cache import CacheBlock, PromptCache, SimClock  # noqa: E402
from simulator.prefix import anthropic_blocks, openai_blocks  # noqa: E402
from agents.transports.openai_chat import OpenAIChatTransport  # noqa: E402
from simulator.tokenizer import count_tokens  # noqa: E402
from agents.tools.files import Patch, ReadFile, WriteFile  # noqa: E402
from agents.tools.search import SearchFiles  # noqa: E402
from agents.tools.skills import SKILL_VIEW, SKILLS_LIST, Skill, build_skill_invocation  # noqa: E402
from agents.tools.terminal import Terminal  # noqa: E402
from agents.transports.anthropic_messages import AnthropicTransport  # noqa: E402
import simulator.prefix as _prefix  # noqa: E402

# The tokenizer is a pure function of the text and the same tool results are re-counted on
# every request; memoising it in this process (the simulator thread included) only saves time.
_prefix.count_tokens = functools.lru_cache(maxsize=None)(_prefix.count_tokens)

# Rates in USD per million tokens (issue 3, "Benchmark"): Claude Opus 4.5's list prices, which
# is how Hermes Web prices these calls (issue 9: recorded cost vs the simulator's log).
PRICED_AS = ("anthropic", "claude-opus-4-5")
RATE_INPUT = 5.00
RATE_WRITE_5M = 6.25
RATE_WRITE_1H = 10.00
RATE_READ = 0.50
RATE_OUTPUT = 25.00

TTL_5M_S = 300.0
TTL_1H_S = 3600.0
BURSTS = 3
TURNS_PER_BURST = 4
TOOL_ITERATIONS_PER_TURN = 10  # + 1 final text request per turn -> 44 requests per burst
GAPS_S = (25 * 60.0, 50 * 60.0)
"""Idle gaps between bursts: coffee, then lunch; both beyond 5 minutes, within 1 hour."""
MODEL = "claude-sonnet-4-5"
SETTINGS = CacheSettings(ttl="1h")
"""An all-day, human-paced session: the 1h tier (hermes-facts §3, ``auto`` = 1h for
human-paced sessions) so the conversation survives the gaps."""


@dataclass(slots=True)
class Bill:
    """Token buckets and USD for one strategy over a sequence of requests."""

    input: int = 0
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0
    output: int = 0
    per_request: list[float] = field(default_factory=list)
    recorded_usd: Decimal | None = None
    """Over HTTP: what Hermes Web records for these calls (agents/pricing.py call_price on
    the transport's normalised usage, as sessions/sink.py does), USD."""
    simulator_log_usd: float | None = None
    """Over HTTP: the same calls priced independently from the simulator's own usage log
    (its wire usage fields × this file's rates), USD."""

    def add(self, *, input: int, read: int, write_5m: int, write_1h: int, output: int) -> float:
        self.input += input
        self.read += read
        self.write_5m += write_5m
        self.write_1h += write_1h
        self.output += output
        cost = usd(input, read, write_5m, write_1h, output)
        self.per_request.append(cost)
        return cost

    @property
    def cost(self) -> float:
        return usd(self.input, self.read, self.write_5m, self.write_1h, self.output)

    @property
    def input_side(self) -> int:
        return self.input + self.read + self.write_5m + self.write_1h


def usd(input: int, read: int, write_5m: int, write_1h: int, output: int) -> float:
    return (input * RATE_INPUT + read * RATE_READ + write_5m * RATE_WRITE_5M
            + write_1h * RATE_WRITE_1H + output * RATE_OUTPUT) / 1_000_000


# ---------------------------------------------------------------------------------------------
# The scripted session
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One request: send ``history`` at simulated time ``at`` (seconds); the model answers
    with ``reply``. ``burst`` numbers the burst (0-based)."""

    at: float
    burst: int
    history: tuple[Message, ...]
    reply: Message


def _code(rng: random.Random, lines: int) -> str:
    words = ["config", "request", "session", "cache", "value", "result", "token", "handler",
             "message", "prefix", "budget", "worker", "stream", "payload", "index", "limit"]
    out = []
    for n in range(lines):
        a, b, c = rng.sample(words, 3)
        indent = "    " * rng.randint(0, 3)
        out.append(f"{indent}{a}_{b} = self.{c}.get({n}, {rng.randint(0, 999)})  # {b} {c}")
    return "\n".join(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A scripted session shape: idle gaps between bursts (seconds), tool-output size range
    (lines of code per result) and the human's pause between turns within a burst."""

    name: str
    gaps_s: tuple[float, ...]
    output_lines: tuple[int, int] = (8, 70)
    think_s: tuple[float, float] = (45.0, 200.0)


WORKLOADS: tuple[Workload, ...] = (
    Workload(name="all-day (25 and 50 min gaps)", gaps_s=GAPS_S),
    Workload(name="gapless burst (1-2 min gaps)", gaps_s=(70.0, 110.0), think_s=(20.0, 60.0)),
    Workload(name="10-20 min gaps, small outputs", gaps_s=(12 * 60.0, 18 * 60.0, 10 * 60.0,
                                                           15 * 60.0, 20 * 60.0),
             output_lines=(2, 6)),
)
"""Issue 15 item 4: the all-day session, a gapless burst, a session with 10–20-minute gaps
and small tool outputs."""


def script_session(skill: Skill, workload: Workload = WORKLOADS[0]) -> list[Step]:
    """A deterministic (seeded) session: (gaps + 1) bursts x 4 turns x 11 requests; the
    default is the all-day session."""
    rng = random.Random(20250307)
    history: list[Message] = []
    steps: list[Step] = []
    clock = 9 * 3600.0  # 09:00
    call_id = 0
    tools = ["read_file", "search_files", "terminal", "read_file", "patch"]
    for burst in range(len(workload.gaps_s) + 1):
        if burst:
            clock += workload.gaps_s[burst - 1]
        for turn in range(TURNS_PER_BURST):
            if turn:
                clock += rng.uniform(*workload.think_s)  # the human reads and types
            if burst == 1 and turn == 0:
                text = build_skill_invocation(skill, "staging --verbose")
            else:
                text = f"Burst {burst} turn {turn}: please look at module_{rng.randint(1, 90)}"
            history.append(Message(role="user", content=text))
            for iteration in range(TOOL_ITERATIONS_PER_TURN + 1):
                if iteration == TOOL_ITERATIONS_PER_TURN:
                    reply = Message(role="assistant", content="Done. " + _code(rng, 6))
                    steps.append(Step(at=clock, burst=burst, history=tuple(history),
                                      reply=reply))
                    history.append(reply)
                    clock += rng.uniform(3, 8)
                    break
                width = rng.choice([1, 1, 2, 3])
                calls = []
                for _ in range(width):
                    call_id += 1
                    name = rng.choice(tools)
                    calls.append(ToolCall(id=f"toolu_{call_id:05d}", name=name,
                                          arguments=f'{{"path": "src/mod_{call_id}.py"}}'))
                said = rng.choice(["", "", "Checking that next."])
                reply = Message(role="assistant", content=said, tool_calls=tuple(calls))
                steps.append(Step(at=clock, burst=burst, history=tuple(history), reply=reply))
                history.append(reply)
                clock += rng.uniform(4, 12)  # model latency + tool time
                for call in calls:
                    history.append(tool_result(call, _code(rng, rng.randint(
                        *workload.output_lines))))
    return steps


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

def _naive(request: ModelRequest) -> ModelRequest:
    """(b): a marker on each of the last four stored messages, 5m, nothing on the system."""
    n = len(request.messages)
    return ModelRequest(model=request.model, system=request.system, messages=request.messages,
                        tools=request.tools, max_tokens=request.max_tokens, breakpoints=tuple(
                            Breakpoint(target="message", index=i) for i in range(max(0, n - 4), n)))


def bill_with_cache(requests: list[tuple[Step, list[CacheBlock]]], output: list[int],
                    log: Callable[[str], None] | None) -> Bill:
    """Replay ``requests`` (prefix blocks of each payload) through a fresh simulator
    PromptCache on its own clock."""
    clock = SimClock()
    cache = PromptCache(clock)
    bill = Bill()
    for n, ((step, blocks), out) in enumerate(zip(requests, output)):
        clock.advance(step.at - clock.now())
        outcome = cache.process(blocks, namespace=MODEL)
        cost = bill.add(input=outcome.input_tokens, read=outcome.cache_read_input_tokens,
                        write_5m=outcome.cache_write_5m_tokens,
                        write_1h=outcome.cache_write_1h_tokens, output=out)
        if log is not None:
            log(f"{n + 1:4d} {step.burst:5d} {step.at / 3600:6.2f}h {outcome.input_tokens:7d} "
                f"{outcome.cache_read_input_tokens:8d} {outcome.cache_write_5m_tokens:8d} "
                f"{outcome.cache_write_1h_tokens:8d} {out:6d} {cost:9.4f}")
    return bill


def bill_over_http(steps: list[Step], payloads: list[dict[str, Any]], output: list[int],
                   log: Callable[[str], None] | None) -> Bill:
    """Send ``payloads`` to a SimulatorServer over real HTTP with the anthropic SDK, moving the
    simulator's clock to each step's time; bill the usage it reports. The simulator validates
    every request (tool pairing, at most 4 markers, TTL order) as the real API does."""
    import anthropic

    from simulator import Reply, SimulatorServer
    from agents.transports.usage import usage_from_anthropic

    bill = Bill()
    with SimulatorServer(port=0, script=lambda request: Reply(text="ok")) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="sim", max_retries=0)
        clock = server.state.clock
        for n, (step, payload, out) in enumerate(zip(steps, payloads, output)):
            clock.advance(step.at - clock.now())
            body = {k: v for k, v in payload.items() if k != "stream"}
            with warnings.catch_warnings():  # the SDK flags the model name's retirement date
                warnings.simplefilter("ignore", DeprecationWarning)
                response = client.messages.create(**body)
            usage = usage_from_anthropic(response.usage.model_dump())
            priced = call_price(PRICED_AS[0], PRICED_AS[1], Buckets(
                input=usage.input_tokens, output=usage.output_tokens,
                cache_read=usage.cache_read_tokens, cache_write_5m=usage.cache_write_5m_tokens,
                cache_write_1h=usage.cache_write_1h_tokens), overrides=self_hosted_overrides())
            bill.recorded_usd = (bill.recorded_usd or Decimal(0)) + priced.usd
            cost = bill.add(input=usage.input_tokens, read=usage.cache_read_tokens,
                            write_5m=usage.cache_write_5m_tokens,
                            write_1h=usage.cache_write_1h_tokens, output=out)
            if log is not None:
                log(f"{n + 1:4d} {step.burst:5d} {step.at / 3600:6.2f}h {usage.input_tokens:7d} "
                    f"{usage.cache_read_tokens:8d} {usage.cache_write_5m_tokens:8d} "
                    f"{usage.cache_write_1h_tokens:8d} {out:6d} {cost:9.4f}")
        bill.simulator_log_usd = sum(_wire_usd(r.usage) for r in server.state.requests
                                     if r.status == 200 and r.usage)
    return bill


def _wire_usd(wire: dict[str, Any]) -> float:
    """USD of one call from the simulator's wire usage (Anthropic Messages fields), at this
    file's rates: independent of agents/transports/usage.py and agents/pricing.py."""
    creation = wire.get("cache_creation") or {}
    return usd(wire.get("input_tokens", 0), wire.get("cache_read_input_tokens", 0),
               creation.get("ephemeral_5m_input_tokens", 0),
               creation.get("ephemeral_1h_input_tokens", 0), wire.get("output_tokens", 0))


def bill_no_cache(requests: list[tuple[Step, list[CacheBlock]]], output: list[int]) -> Bill:
    """(a): every input token at the input rate."""
    bill = Bill()
    for (_, blocks), out in zip(requests, output):
        total = sum(b.tokens for b in blocks)
        bill.add(input=total, read=0, write_5m=0, write_1h=0, output=out)
    return bill


def bill_lower_bound(requests: list[tuple[Step, list[CacheBlock]]], output: list[int]) -> Bill:
    """(c): per prefix block (chained identity, so a block is "the prefix through it"), the
    first use pays a write at the TTL its reuse needs (1h if any gap between consecutive uses
    exceeds 5 minutes, else 5m) or plain input when never reused; every later use reads. Gaps
    over an hour would need a rewrite; this session has none (asserted)."""
    sequences = []
    uses: dict[bytes, list[float]] = {}
    for step, blocks in requests:
        keys, running = [], b""
        for block in blocks:
            running = _digest(running + block.data)
            keys.append(running)
            uses.setdefault(running, []).append(step.at)
        sequences.append((blocks, keys))
    seen: set[bytes] = set()
    bill = Bill()
    for (blocks, keys), out in zip(sequences, output):
        buckets = {"input": 0, "read": 0, "write_5m": 0, "write_1h": 0}
        for block, key in zip(blocks, keys):
            times = uses[key]
            if key in seen:
                buckets["read"] += block.tokens
                continue
            seen.add(key)
            gaps = [b - a for a, b in zip(times, times[1:])]
            assert all(g <= TTL_1H_S for g in gaps), "lower bound assumes gaps within 1h"
            if not gaps:
                buckets["input"] += block.tokens
            elif max(gaps) > TTL_5M_S:
                buckets["write_1h"] += block.tokens
            else:
                buckets["write_5m"] += block.tokens
        bill.add(output=out, **buckets)
    return bill


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


# ---------------------------------------------------------------------------------------------
# Reductions on a cold resume (issue 4 item 7)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class SideCall:
    """A model call a reduction makes on its own (the summariser): uncached input tokens and
    output tokens, billed at the plain rates."""

    input: int
    output: int


Reducer = Callable[[tuple[Message, ...]], tuple[tuple[Message, ...], SideCall | None]]


def reduce_on_resume(steps: list[Step], *, ttl_s: float,
                     reduce: Reducer) -> tuple[list[Step], list[SideCall], int]:
    """``steps`` with ``reduce`` applied before the first request after every idle gap longer
    than ``ttl_s`` (seconds): the cache has expired, so a rewrite of the history costs no cache
    read that would otherwise have happened. Later steps carry the reduced history plus what
    the session appended since (the scripted histories only ever extend). Returns the new
    steps, the side calls made, and how many resumes were cold."""
    out: list[Step] = []
    calls: list[SideCall] = []
    kept: tuple[Message, ...] = ()
    replaced = 0  # length of the original prefix that ``kept`` stands for
    previous: float | None = None
    cold = 0
    for step in steps:
        history = step.history
        if previous is not None and step.at - previous > ttl_s:
            cold += 1
            kept, call = reduce(kept + history[replaced:])
            replaced = len(history)
            if call is not None:
                calls.append(call)
        out.append(Step(at=step.at, burst=step.burst, history=kept + history[replaced:],
                        reply=step.reply))
        previous = step.at
    return out, calls, cold


def cold_prune(history: tuple[Message, ...]) -> tuple[tuple[Message, ...], None]:
    """The runner's cold-resume prune (sessions/context.py session_prune with cold=True)."""
    plan = plan_prune(history, estimate=estimate_message_tokens, trigger_tokens=0,
                      rearm_level=0, cold=True)
    return (history if plan is None else plan.messages), None


def idle_compaction(transport: AnthropicTransport) -> Reducer:
    """Batch compaction on resume (hermes' idle compaction): the summariser's request is
    rendered by the real transport and billed as uncached input; its answer is a fixed
    summary of the middle's tool calls (deterministic, about 300 tokens)."""
    state = {"first": True}

    def reduce(history: tuple[Message, ...]) -> tuple[tuple[Message, ...], SideCall | None]:
        plan = plan_compaction(history, window=PROFILES["anthropic"].context_window,
                               estimate=estimate_message_tokens,
                               first_compaction=state["first"])
        if isinstance(plan, Skip):
            return history, None
        state["first"] = False
        request = build_summary_request(plan, model=MODEL,
                                        window=PROFILES["anthropic"].context_window,
                                        model_max_output=PROFILES["anthropic"].max_output_tokens,
                                        estimate_text=estimate_text_tokens)
        sent = sum(b.tokens for b in anthropic_blocks(transport.build_payload(request)))
        calls = [c for m in plan.middle for c in m.tool_calls]
        touched = sorted({c.arguments for c in calls})
        summary = (f"Earlier work: {len(calls)} tool calls over {len(touched)} files "
                   f"({', '.join(touched[:25])}). Findings were reviewed and patches applied "
                   "where the user asked; nothing is pending.")
        return (tuple(compacted_transcript(plan, summary)),
                SideCall(input=sent, output=count_tokens(summary)))

    return reduce


def add_side_calls(bill: Bill, calls: list[SideCall]) -> Bill:
    for call in calls:
        bill.add(input=call.input, read=0, write_5m=0, write_1h=0, output=call.output)
    return bill


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

LAYOUTS: tuple[tuple[str, CacheSettings], ...] = (
    ("5m, prompt 1h (HERMES_CACHE_PROMPT_TTL=1h)", CacheSettings(prompt_ttl="1h")),
    ("default: all 5m", CacheSettings()),
    ("all 1h", CacheSettings(ttl="1h")),
)
"""Planner layouts billed: the default (rolling message breakpoints 5m, the two system
breakpoints 1h), everything at 5m (the old default), everything at 1h (``SETTINGS``)."""


def session_inputs(tmp: Path, workload: Workload = WORKLOADS[0]
                   ) -> tuple[list[Step], str, int | None, tuple]:
    """The scripted steps, the system prompt text and stable length, and the tool specs."""
    skill = Skill(name="deploy", description="Ship the app to an environment",
                  body=_code(random.Random(7), 60), path=tmp / "deploy" / "SKILL.md")
    steps = script_session(skill, workload)
    tools = tuple(t.spec for t in (ReadFile, WriteFile, Patch, SearchFiles, Terminal,
                                   SKILLS_LIST, SKILL_VIEW))
    prompt = build_system_prompt(
        home=None, tool_names=[t.name for t in tools], model=MODEL,
        provider="anthropic", workspace=tmp, caller_context="You are helping in a web chat.",
        skills_index="# Skills\n\n- deploy: Ship the app to an environment",
        memory="The user prefers small, reviewed patches.", user_profile="Name: Ada",
        session_id="bench-1", started_at=date(2025, 3, 7))
    return steps, prompt.text, prompt.stable_len, tools


def planner_payloads(steps: list[Step], *, system: str, stable_len: int | None, tools: tuple,
                     settings: CacheSettings) -> list[dict[str, Any]]:
    """Each step's wire payload as the harness builds it under ``settings``."""
    transport = AnthropicTransport(PROFILES["anthropic"], api_key=None)
    return [transport.build_payload(plan_breakpoints(
        ModelRequest(model=MODEL, system=system, messages=step.history, tools=tools,
                     stable_len=stable_len),
        profile_caps=PROFILES["anthropic"], settings=settings)) for step in steps]


def output_tokens(steps: list[Step]) -> list[int]:
    return [count_tokens(s.reply.content) + sum(
        count_tokens(c.name) + count_tokens(c.arguments) + 3 for c in s.reply.tool_calls)
        for s in steps]


def build_requests(tmp: Path) -> tuple[list[Step], list[dict[str, Any]],
                                       list[dict[str, Any]], list[int]]:
    """The scripted steps and, per step, the wire payloads under the planner with ``SETTINGS``
    and the naive marking, and the output tokens."""
    steps, system, stable_len, tools = session_inputs(tmp)
    planned = planner_payloads(steps, system=system, stable_len=stable_len, tools=tools,
                               settings=SETTINGS)
    transport = AnthropicTransport(PROFILES["anthropic"], api_key=None)
    naive = [transport.build_payload(_naive(ModelRequest(
        model=MODEL, system=system, messages=s.history, tools=tools))) for s in steps]
    return steps, planned, naive, output_tokens(steps)


def resume_rows(tmp: Path) -> list[tuple[str, Bill, int]]:
    """Every layout, as is and with each reduction on a cold resume, billed in-process by the
    simulator's PromptCache: (label, bill, cold resumes). A resume is cold when the gap is
    longer than the message TTL (the runner's rule, sessions/context.py cold_resume)."""
    steps, system, stable_len, tools = session_inputs(tmp)
    transport = AnthropicTransport(PROFILES["anthropic"], api_key=None)
    rows = []
    for name, settings in LAYOUTS:
        ttl_s = TTL_1H_S if settings.ttl == "1h" else TTL_5M_S
        variants = [("", steps, [], 0)]
        for label, reducer in (("+ prune hard on cold resume", cold_prune),
                               ("+ idle compaction on resume", idle_compaction(transport))):
            variants.append((label, *reduce_on_resume(steps, ttl_s=ttl_s, reduce=reducer)))
        for label, variant, calls, cold in variants:
            payloads = planner_payloads(variant, system=system, stable_len=stable_len,
                                        tools=tools, settings=settings)
            bill = bill_with_cache([(s, anthropic_blocks(p)) for s, p in zip(variant, payloads)],
                                   output_tokens(variant), None)
            rows.append((f"{name} {label}".strip(), add_side_calls(bill, calls), cold))
    return rows


FIXED: tuple[tuple[str, CacheSettings, bool], ...] = tuple(
    (f"fixed: prompt {p}, messages {m}{', prune on cold resume' if prune else ''}",
     CacheSettings(ttl=m, prompt_ttl=p), prune)
    for p, m in (("5m", "5m"), ("1h", "5m"), ("1h", "1h")) for prune in (False, True)
    if not (m == "1h" and prune))
"""Every fixed configuration billed beside the default (a 1h message tier never goes cold
within these workloads' gaps, so its prune variant equals it and is not listed)."""


def rhythm_at(steps: list[Step], k: int, *, system_tokens: int) -> SessionRhythm:
    """What the runner knows before request ``k`` (sessions/context.py session_rhythm does
    the same from stored rows): inter-turn gaps up to it, history and prunable tokens, per
    burst growth and requests. A turn starts at a step whose history ends with a user
    message."""
    gaps = tuple(steps[i].at - steps[i - 1].at for i in range(1, k + 1)
                 if steps[i].history[-1].role == "user")
    history = steps[k].history
    tokens = sum(estimate_message_tokens(m) for m in history)
    plan = plan_prune(history, estimate=estimate_message_tokens, trigger_tokens=0,
                      rearm_level=0, cold=True)
    bursts = 1 + len(long_gaps(gaps)) + sum(1 for g in gaps if g > TTL_1H_S)
    return SessionRhythm(gaps_s=gaps, prompt_tokens=system_tokens, history_tokens=tokens,
                         prunable_tokens=0 if plan is None else plan.reclaimed,
                         burst_growth_tokens=tokens // bursts, burst_requests=(k + 1) / bursts)


def auto_bill(steps: list[Step], *, system: str, stable_len: int | None,
              tools: tuple) -> tuple[Bill, int, list[str]]:
    """The default: before every request, ``choose_cache_strategy`` on the rhythm so far sets
    the TTLs, and a resume past the chosen message TTL is pruned when the strategy says so.
    Returns the bill, the cold resumes and the distinct reasons chosen, in order."""
    transport = AnthropicTransport(PROFILES["anthropic"], api_key=None)
    system_tokens = estimate_text_tokens(system)
    kept: tuple[Message, ...] = ()
    replaced = 0
    variant: list[Step] = []
    payloads = []
    reasons: list[str] = []
    cold = 0
    previous_ttl_s = TTL_5M_S  # what the previous request's message breakpoints carried
    for k, step in enumerate(steps):
        strategy = choose_cache_strategy(rhythm_at(steps, k, system_tokens=system_tokens))
        if not reasons or reasons[-1] != strategy.reason:
            reasons.append(strategy.reason)
        history = kept + step.history[replaced:]
        cold_now = k and step.at - steps[k - 1].at > previous_ttl_s
        previous_ttl_s = strategy.message_ttl_seconds
        if cold_now and strategy.prune_on_cold_resume:
            cold += 1
            kept, _ = cold_prune(history)
            replaced = len(step.history)
            history = kept
        current = Step(at=step.at, burst=step.burst, history=history, reply=step.reply)
        variant.append(current)
        payloads.append(transport.build_payload(plan_breakpoints(
            ModelRequest(model=MODEL, system=system, messages=history, tools=tools,
                         stable_len=stable_len), profile_caps=PROFILES["anthropic"],
            settings=CacheSettings(ttl=strategy.message_ttl, prompt_ttl=strategy.prompt_ttl))))
    bill = bill_with_cache([(s, anthropic_blocks(p)) for s, p in zip(variant, payloads)],
                           output_tokens(variant), None)
    return bill, cold, reasons


def strategy_rows(tmp: Path, workload: Workload) -> tuple[list[tuple[str, Bill, int]],
                                                          tuple[Bill, int, list[str]]]:
    """Every fixed configuration and the default on one workload (in-process billing)."""
    steps, system, stable_len, tools = session_inputs(tmp, workload)
    rows = []
    for name, settings, prune in FIXED:
        ttl_s = TTL_1H_S if settings.ttl == "1h" else TTL_5M_S
        variant, calls, cold = (reduce_on_resume(steps, ttl_s=ttl_s, reduce=cold_prune)
                                if prune else (steps, [], 0))
        payloads = planner_payloads(variant, system=system, stable_len=stable_len,
                                    tools=tools, settings=settings)
        bill = bill_with_cache([(s, anthropic_blocks(p)) for s, p in zip(variant, payloads)],
                               output_tokens(variant), None)
        rows.append((name, add_side_calls(bill, calls), cold))
    return rows, auto_bill(steps, system=system, stable_len=stable_len, tools=tools)


def strategy_report(tmp: Path, header: str, line) -> list[tuple[str, bool]]:
    """Print each workload's fixed configurations beside the default; the targets: the
    default costs at most 1.02x the cheapest fixed configuration, with the same replies."""
    targets = []
    for workload in WORKLOADS:
        rows, (auto, cold, reasons) = strategy_rows(tmp, workload)
        print(f"\nworkload: {workload.name}")
        print(header)
        for name, bill, cold_fixed in rows:
            print(line(name, bill, f"  cold resumes: {cold_fixed}" if cold_fixed else ""))
        print(line("default (chooses per session)", auto,
                   f"  cold resumes: {cold}" if cold else ""))
        for reason in reasons:
            print(f"    chose: {reason}")
        cheapest = min(rows, key=lambda r: r[1].cost)
        ratio = auto.cost / cheapest[1].cost
        targets.append((f"{workload.name}: default {auto.cost:.4f} = {ratio:.3f}x the cheapest "
                        f"fixed ({cheapest[0]}, {cheapest[1].cost:.4f}) <= 1.02x",
                        ratio <= 1.02))
    return targets


def envelope_rows(tmp: Path) -> tuple[Bill, Bill]:
    """Issue 15 item 5: the all-day session through an envelope gateway (the openrouter
    profile: chat completions with cache_control parts, 5m only) — the planner's markers
    against the same requests without markers (such a gateway in front of Anthropic then
    caches nothing). Billed by the simulator's PromptCache on the envelope's blocks."""
    steps, system, stable_len, tools = session_inputs(tmp)
    profile = PROFILES["openrouter"]
    transport = OpenAIChatTransport(profile, api_key=None)
    marked, bare = [], []
    for step in steps:
        request = ModelRequest(model=MODEL, system=system, messages=step.history, tools=tools,
                               stable_len=stable_len)
        marked.append(openai_blocks(transport.build_payload(plan_breakpoints(
            request, profile_caps=profile, settings=CacheSettings()))))
        bare.append([CacheBlock(data=b.data, tokens=b.tokens) for b in marked[-1]])
    out = output_tokens(steps)
    return (bill_with_cache(list(zip(steps, marked)), out, None),
            bill_no_cache(list(zip(steps, bare)), out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="omit per-request lines")
    parser.add_argument("--direct", action="store_true",
                        help="bill the planner with the simulator's PromptCache in-process "
                             "instead of over HTTP")
    parser.add_argument("--no-resume", action="store_true",
                        help="skip the layout / cold-resume table (faster)")
    parser.add_argument("--no-strategy", action="store_true",
                        help="skip the per-workload strategy tables (faster)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        steps, planned, naive, output = build_requests(Path(tmp))
        resume = [] if args.no_resume else resume_rows(Path(tmp))
    log = None if args.quiet else print
    if log:
        print("   # burst   time   input     read  write5m  write1h output   cost$  (planner)")
    planned_blocks = [(s, anthropic_blocks(p)) for s, p in zip(steps, planned)]
    naive_blocks = [(s, anthropic_blocks(p)) for s, p in zip(steps, naive)]
    if args.direct:
        ours = bill_with_cache(planned_blocks, output, log)
    else:
        ours = bill_over_http(steps, planned, output, log)
    naive_bill = bill_with_cache(naive_blocks, output, None)
    none_bill = bill_no_cache(planned_blocks, output)
    bound = bill_lower_bound(planned_blocks, output)
    elapsed = time.monotonic() - started

    per_burst = [sum(1 for s in steps if s.burst == b) for b in range(BURSTS)]
    read_share = ours.read / ours.input_side
    print()
    print(f"requests: {len(steps)} (per burst {per_burst}); gaps {[g / 60 for g in GAPS_S]} min;"
          f" planner TTL {SETTINGS.ttl}")
    header = (f"{'strategy':<50}{'input':>9}{'read':>11}{'write5m':>9}{'write1h':>9}"
              f"{'output':>8}{'cost $':>9}{'vs (b)':>8}")
    print(header)
    rows = [("planner (ours, 1h)", ours), ("(a) no caching", none_bill),
            ("(b) naive last-4 messages", naive_bill), ("(c) lower bound", bound)]

    def line(name: str, bill: Bill, note: str = "") -> str:
        return (f"{name:<50}{bill.input:>9}{bill.read:>11}{bill.write_5m:>9}{bill.write_1h:>9}"
                f"{bill.output:>8}{bill.cost:>9.4f}{bill.cost / naive_bill.cost:>7.3f}x{note}")

    for name, bill in rows:
        print(line(name, bill))
    if resume:
        print()
        print("layouts and reductions on a cold resume (in-process PromptCache billing;"
              " summariser calls billed as uncached input + output)")
        print(header)
        for name, bill, cold in resume:
            print(line(name, bill, f"  cold resumes: {cold}" if "resume" in name else ""))
    default_bill = resume[0][1] if resume else None
    strategy_targets = []
    if not args.no_strategy:
        with tempfile.TemporaryDirectory() as tmp:
            strategy_targets = strategy_report(Path(tmp), header, line)
    targets = [
        (f"read share within bursts {read_share:.1%} >= 85%", read_share >= 0.85),
        (f"cost {ours.cost:.4f} <= 0.3 x (a) = {0.3 * none_bill.cost:.4f}",
         ours.cost <= 0.3 * none_bill.cost),
        (f"cost {ours.cost:.4f} < (b) {naive_bill.cost:.4f}", ours.cost < naive_bill.cost),
        (f"cost {ours.cost:.4f} <= 1.25 x (c) = {1.25 * bound.cost:.4f}",
         ours.cost <= 1.25 * bound.cost),
        (f"runtime {elapsed:.1f} s < 60 s", elapsed < 60),
    ]
    if ours.recorded_usd is not None:
        recorded, logged = float(ours.recorded_usd), ours.simulator_log_usd
        gap = abs(recorded - logged) / logged
        print(f"\nrecorded by Hermes Web (agents/pricing.py, genai-prices {PRICED_AS[1]}): "
              f"${recorded:.6f}; simulator usage log at the same rates: ${logged:.6f}; "
              f"difference {gap:.4%}")
        targets.append((f"recorded cost within 0.5% of the simulator's log ({gap:.4%})",
                        gap <= 0.005))
    if default_bill is not None:
        targets.append((f"default layout {default_bill.cost:.4f} < (b) {naive_bill.cost:.4f}",
                        default_bill.cost < naive_bill.cost))
    targets += strategy_targets
    with tempfile.TemporaryDirectory() as tmp:
        envelope, envelope_bare = envelope_rows(Path(tmp))
    print("\nenvelope route (openrouter profile: cache_control on content parts, 5m)")
    print(header)
    print(line("planner markers on parts", envelope))
    print(line("no markers (before issue 15 item 5)", envelope_bare))
    targets.append((f"envelope route: markers {envelope.cost:.4f} < no markers "
                    f"{envelope_bare.cost:.4f} ({envelope.cost / envelope_bare.cost:.3f}x)",
                    envelope.cost < envelope_bare.cost))
    print()
    for label, ok in targets:
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    return 0 if all(ok for _, ok in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
