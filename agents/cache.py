"""Cache discipline: the breakpoint planner, TTL rules, the stable-prefix registry, cache health.

A provider reuses work only when the request bytes match from the first byte up to a
breakpoint (seed, "Four breakpoints, and the discipline of not spending one"). This module
decides WHERE the breakpoints go, as ``Breakpoint`` values on a copy of a ``ModelRequest``;
transports render them onto the wire payload. It never builds prompt text (agents/prompt.py),
never touches stored rows, and knows no wire format and no vendor names: route differences
arrive as a profile's capability flags (``ProfileCaps``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from agents.messages import TTL, Breakpoint, Message, ModelRequest, Usage
from agents.stable_prefix import (REGISTRY, REGISTRY_MAX_CHARS,  # noqa: F401 (re-exported)
                                  REGISTRY_MAX_ENTRIES, StablePrefixMemo,
                                  StablePrefixRegistry, find_stable_prefix,
                                  register_stable_prefix, resolve_stable_prefixes)

MAX_BREAKPOINTS = 4
"""Anthropic's per-request limit on cache_control blocks (hermes-facts §3; case B07)."""
HEALTH_STREAK = 3
"""Consecutive write-only calls that raise the cache-health warning (case B09)."""

_TTL_RANK = {"5m": 0, "1h": 1}


class ProfileCaps(Protocol):
    """What the planner needs to know about a route (agents/providers.py ProviderProfile).

    - ``supports_caching``: the route honours cache markers at all.
    - ``supports_1h_ttl``: the route honours the 1h tier (Qwen/Alibaba-family routes do not).
    - ``max_breakpoints``: how many markers the client may spend (4 first-party, fewer behind
      proxies that add their own).
    - ``drops_markers_on_tool_only_assistant``: envelope routes silently drop a marker on an
      assistant message that is nothing but tool calls.
    - ``marks_tool_messages``: a marker on a tool result is honoured (not on envelope
      routes, hermes-facts §3).
    """

    supports_caching: bool
    supports_1h_ttl: bool
    max_breakpoints: int
    drops_markers_on_tool_only_assistant: bool
    marks_tool_messages: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSettings:
    """The configured cache lifetime (hermes-facts §3, ``prompt_caching.cache_ttl``)."""

    ttl: TTL = "5m"
    """TTL for the rolling message breakpoints."""
    prompt_ttl: TTL | None = None
    """TTL for the two system-prompt breakpoints; None (the default, issue 3: "5m by default,
    1h by configuration") means the same as ``ttl``. "1h" (clamped to 5m on routes without
    the 1h tier) suits human-paced sessions, like hermes' "auto": the prompt is written once
    per session and reused after every idle gap, so paying 2x instead of 1.25x for that one
    write is repaid by the first reuse after a gap of more than 5 minutes, while the rolling
    message writes stay at the cheaper 5m rate (benchmarks/bench_cache.py)."""


def effective_ttl(requested: TTL, caps: ProfileCaps) -> TTL:
    """``requested``, clamped to "5m" on routes that do not honour the 1h tier (seed: "It will
    not ship a marker the route does not honour"; hermes-facts §3 ``effective_cache_ttl``)."""
    if requested == "1h" and not caps.supports_1h_ttl:
        return "5m"
    return requested


# ---------------------------------------------------------------------------------------------
# The planner
# ---------------------------------------------------------------------------------------------

def tool_run_ends(messages: tuple[Message, ...] | list[Message]) -> set[int]:
    """Indexes that sit INSIDE a tool run and so are illegal boundaries.

    A tool run is an assistant message with tool calls plus the tool results that follow it;
    only its last result closes the transaction (seed: "It will not put a breakpoint in the
    middle of a tool run"). Returns the set of indexes of the assistant tool-call message and
    every result but the last. A run whose results have not arrived yet is open, so its
    assistant message is inside it as well.
    """
    inside: set[int] = set()
    i = 0
    while i < len(messages):
        if messages[i].role == "assistant" and messages[i].tool_calls:
            inside.add(i)
            j = i + 1
            while j < len(messages) and messages[j].role == "tool":
                j += 1
            inside.update(range(i + 1, j - 1))  # results before the last one
            i = j
        else:
            i += 1
    return inside


def can_carry_marker(message: Message, caps: ProfileCaps) -> bool:
    """True when a marker on ``message`` would be honoured: non-blank wire text, and not an
    assistant message that is only tool calls on a route that drops those markers (hermes-facts
    §3 ``_can_carry_marker``). Position rules are in ``tool_run_ends``."""
    if not message.wire_text.strip():
        return False
    if message.role == "tool" and not caps.marks_tool_messages:
        return False
    only_calls = message.role == "assistant" and bool(message.tool_calls)
    return not (only_calls and caps.drops_markers_on_tool_only_assistant
                and not message.content.strip())


def cacheable_indexes(messages: tuple[Message, ...], caps: ProfileCaps) -> list[int]:
    """Indexes of ``messages`` that are legal breakpoint carriers, oldest first."""
    inside = tool_run_ends(messages)
    return [i for i, m in enumerate(messages) if i not in inside and can_carry_marker(m, caps)]


def last_carriers(messages: tuple[Message, ...], caps: ProfileCaps, count: int) -> list[int]:
    """The last ``count`` of ``cacheable_indexes(messages, caps)``, oldest first, found
    walking back from the end: O(messages back to the count-th carrier), not O(history)."""
    found: list[int] = []
    i = len(messages) - 1
    while i >= 0 and len(found) < count:
        if messages[i].role != "tool":
            # An assistant with calls is always inside its run (see tool_run_ends).
            if not (messages[i].role == "assistant" and messages[i].tool_calls) \
                    and can_carry_marker(messages[i], caps):
                found.append(i)
            i -= 1
            continue
        start = i  # results [start, i]: a run's when an assistant with calls opens them
        while start > 0 and messages[start - 1].role == "tool":
            start -= 1
        opener = messages[start - 1] if start > 0 else None
        opened = opener is not None and opener.role == "assistant" and bool(opener.tool_calls)
        for k in range(i, start - 1, -1):  # all but a run's last result are inside it
            if len(found) < count and (k == i or not opened) \
                    and can_carry_marker(messages[k], caps):
                found.append(k)
        i = start - 1
    return found[::-1]


def plan_breakpoints(request: ModelRequest, *, profile_caps: ProfileCaps,
                     settings: CacheSettings = CacheSettings(),
                     prefixes: StablePrefixMemo | None = None) -> ModelRequest:
    """Return a copy of ``request`` with ``breakpoints`` planned; ``request`` is not changed.

    Layout (seed, "Four breakpoints"; hermes-facts §3): end of the stable tier (only when
    ``request.stable_len`` splits the system text into two non-blank parts), end of the system
    prompt, then the last two cacheable messages; with no stable split, the system prompt plus
    the last three. At most ``min(4, profile_caps.max_breakpoints)``: when the route allows
    fewer, the rolling pair is kept first (it is what reads within a burst), then the system
    end, then the stable end. A breakpoint on a message with a stable prefix (see
    ``resolve_stable_prefixes``) gets ``split_at`` there, so its marker sits on the scaffold
    block. TTLs are clamped by ``effective_ttl`` and then made non-increasing along
    system -> messages (an earlier marker takes the longest TTL of any later one). A route
    without caching gets no breakpoints (and its messages are left as they are). Messages
    are frozen and never marked; ``messages`` of the result is the input tuple itself unless
    a registry lookup resolved a split (then those messages are copies carrying it).
    ``prefixes``: the caller's StablePrefixMemo (same result, lookups only for new messages).
    """
    budget = min(MAX_BREAKPOINTS, profile_caps.max_breakpoints)
    if not profile_caps.supports_caching or budget <= 0:
        return replace(request, breakpoints=())
    resolved = (resolve_stable_prefixes(request.messages) if prefixes is None
                else prefixes.resolve(request.messages))
    request = replace(request, messages=resolved)
    system = request.system
    stable_len = request.stable_len
    split = (stable_len is not None and 0 < stable_len < len(system)
             and bool(system[:stable_len].strip()) and bool(system[stable_len:].strip()))
    tail = last_carriers(request.messages, profile_caps, 2 if split else 3)
    # Priority order: rolling pair, system end, stable end, third message.
    ranked: list[tuple[str, int]] = [("message", i) for i in reversed(tail[-2:])]
    if system.strip():
        ranked.append(("system", -1))
    if split:
        ranked.append(("system_stable", -1))
    ranked += [("message", i) for i in reversed(tail[:-2])]
    chosen = ranked[:budget]
    order = {"system_stable": -2, "system": -1}
    chosen.sort(key=lambda t: order.get(t[0], t[1]))
    message_ttl = effective_ttl(settings.ttl, profile_caps)
    prompt_ttl = effective_ttl(settings.prompt_ttl or settings.ttl, profile_caps)
    planned: list[Breakpoint] = []
    for target, index in chosen:
        if target == "message":
            # The transport renders a message with a stable prefix as [scaffold, tail] on
            # every request, marked or not, so marking the scaffold never moves a block.
            planned.append(Breakpoint(target="message", index=index, ttl=message_ttl,
                                      split_at=message_split(request.messages[index])))
        else:
            planned.append(Breakpoint(target=target, ttl=prompt_ttl))  # type: ignore[arg-type]
    return replace(request, breakpoints=_monotonic_ttls(planned))


def message_split(message: Message) -> int | None:
    """Where ``message``'s wire text splits into [scaffold, tail]: its ``stable_prefix_len``
    when that leaves two non-blank parts of a user message (the API rejects blank blocks;
    tool results and assistant messages are never split), else None. Transports render the
    split the same way on every request (agents/transports/anthropic_messages.py)."""
    split = message.stable_prefix_len
    text = message.wire_text
    if message.role != "user" or split is None or not 0 < split < len(text):
        return None
    return split if text[:split].strip() and text[split:].strip() else None


def _monotonic_ttls(breakpoints: list[Breakpoint]) -> tuple[Breakpoint, ...]:
    """Raise earlier TTLs so none is shorter than a later one (a 1h after a 5m is rejected by
    the API; hermes-facts §3)."""
    out: list[Breakpoint] = []
    longest = "5m"
    for bp in reversed(breakpoints):
        if _TTL_RANK[bp.ttl] > _TTL_RANK[longest]:
            longest = bp.ttl
        out.append(bp if bp.ttl == longest else replace(bp, ttl=longest))  # type: ignore[arg-type]
    return tuple(reversed(out))


def ttl_order_holds(breakpoints: tuple[Breakpoint, ...]) -> bool:
    """True when TTLs never increase from the first breakpoint to the last."""
    ranks = [_TTL_RANK[bp.ttl] for bp in breakpoints]
    return all(a >= b for a, b in zip(ranks, ranks[1:]))


@dataclass(frozen=True, slots=True, kw_only=True)
class CapsOverride:
    """A route's caps with ``max_breakpoints`` lowered after the provider refused a count."""

    supports_caching: bool
    supports_1h_ttl: bool
    max_breakpoints: int
    drops_markers_on_tool_only_assistant: bool
    marks_tool_messages: bool = True


def with_max_breakpoints(caps: ProfileCaps, limit: int) -> CapsOverride:
    """``caps`` with ``max_breakpoints`` = min(current, ``limit``), floored at 0."""
    return CapsOverride(
        supports_caching=caps.supports_caching, supports_1h_ttl=caps.supports_1h_ttl,
        max_breakpoints=max(0, min(caps.max_breakpoints, limit)),
        drops_markers_on_tool_only_assistant=caps.drops_markers_on_tool_only_assistant,
        marks_tool_messages=caps.marks_tool_messages)


# Cache health
# ---------------------------------------------------------------------------------------------

class CacheHealth:
    """Watches usage for the B09 symptom: writes every call, reads never.

    ``observe`` returns a warning string on the call that completes a streak of
    ``HEALTH_STREAK`` consecutive caching-route calls with cache writes > 0 and cache reads
    == 0 (the caller raises a session event and sets the admin flag); else None. A call that
    reads resets the streak; so does one that neither writes nor reads. Calls on routes
    without caching, or without usage, leave the streak alone. ``to_dict``/``from_dict``
    carry the state on the Session row so a restart cannot reset it.
    """

    def __init__(self, *, streak: int = 0, flagged: bool = False) -> None:
        self.streak = streak
        self.flagged = flagged

    def observe(self, usage: Usage | None, *, caching: bool) -> str | None:
        if usage is None or not caching:
            return None
        if usage.cache_write_tokens > 0 and usage.cache_read_tokens == 0:
            self.streak += 1
        else:
            self.streak = 0
            return None
        if self.streak == HEALTH_STREAK:
            self.flagged = True
            return (f"Prompt cache is not hitting: {self.streak} consecutive calls wrote to the "
                    "cache and read nothing; the prefix is probably not byte-stable.")
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"streak": self.streak, "flagged": self.flagged}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CacheHealth:
        data = data or {}
        return cls(streak=int(data.get("streak", 0)), flagged=bool(data.get("flagged", False)))
