"""Byte-exact prompt-cache accounting, as a plain class a benchmark can drive without HTTP.

The rules follow Anthropic's prompt-caching documentation (sdk-notes.md, "Anthropic prompt
caching"): a request is a sequence of blocks in the order tools → system → messages; a
breakpoint caches the prefix through its block; a lookup checks each breakpoint's prefix and
up to 20 block boundaries before it; an entry lives 5 minutes (or 1 hour on request) and a
hit refreshes it; a prefix shorter than the minimum cacheable length is never cached. A
prefix is identified by a hash chained over the blocks' canonical bytes, so any byte change
anywhere earlier misses. Turning a request body into blocks is ``simulator.prefix``;
the clock is ``SimClock`` here because TTL is the only thing that needs it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

TTL = Literal["5m", "1h"]
TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_BLOCKS = 20
"""Block boundaries checked before each breakpoint (Anthropic docs: "about 20 blocks")."""


class SimClock:
    """The simulator's clock in seconds. Frozen unless ``follow_wall`` is set (then it also
    advances with real time, for a long-running demo server); ``advance`` always adds."""

    def __init__(self, *, start: float = 0.0, follow_wall: bool = False) -> None:
        self._offset = start
        self._follow_wall = follow_wall
        self._origin = time.monotonic()
        self._lock = threading.Lock()

    def now(self) -> float:
        """Current simulated time, seconds."""
        with self._lock:
            wall = time.monotonic() - self._origin if self._follow_wall else 0.0
            return self._offset + wall

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` (>= 0); returns the new time.
        Raises ValueError for a negative step."""
        if seconds < 0:
            raise ValueError("the simulator clock only moves forward")
        with self._lock:
            self._offset += seconds
        return self.now()

    def reset(self, start: float = 0.0) -> None:
        with self._lock:
            self._offset = start
            self._origin = time.monotonic()


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheBlock:
    """One unit of the prefix: ``data`` is its canonical bytes (cache markers stripped),
    ``tokens`` its billed size, ``ttl`` the breakpoint's TTL when the block carries a
    ``cache_control`` marker, else None."""

    data: bytes
    tokens: int
    ttl: TTL | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheOutcome:
    """Usage of one request, Anthropic semantics, all in tokens: ``input_tokens`` is the
    uncached part only (after the last read or written prefix); the write is split by TTL."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def anthropic_usage(self, output_tokens: int) -> dict[str, object]:
        """The real Messages API usage object for this outcome."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {"ephemeral_5m_input_tokens": self.cache_write_5m_tokens,
                               "ephemeral_1h_input_tokens": self.cache_write_1h_tokens},
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


@dataclass(slots=True)
class _Entry:
    ttl: TTL
    expires_at: float
    tokens: int


@dataclass(slots=True)
class PromptCache:
    """The cache store of one simulated provider.

    ``min_cacheable_tokens``: a breakpoint whose prefix is shorter is ignored (Anthropic:
    1,024 for most models). ``lookback``: boundaries checked before each breakpoint.
    Thread-safe; every call takes the clock reading once.
    """

    clock: SimClock
    min_cacheable_tokens: int = 1024
    lookback: int = LOOKBACK_BLOCKS
    _entries: dict[bytes, _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        now = self.clock.now()
        with self._lock:
            return sum(1 for e in self._entries.values() if e.expires_at > now)

    def process(self, blocks: list[CacheBlock], *, namespace: str = "",
                lookback: int | None = None) -> CacheOutcome:
        """Account one request: look up, refresh hits, write new prefixes, return usage.

        ``namespace`` separates caches (the model name: caches are per model).
        ``lookback`` overrides the instance's (OpenAI-style automatic caching passes the
        block count, so every boundary is checked).
        """
        depth = self.lookback if lookback is None else lookback
        keys, cumulative = _chain(blocks, namespace)
        breakpoints = [i for i, b in enumerate(blocks) if b.ttl is not None]
        now = self.clock.now()
        with self._lock:
            read_end = -1  # index of the last block of the longest prefix found
            for bp in breakpoints:
                for pos in range(bp, max(-1, bp - depth - 1), -1):
                    entry = self._entries.get(keys[pos])
                    if entry is not None and entry.expires_at > now:
                        if pos > read_end:
                            read_end = pos
                        break
            if read_end >= 0:
                hit = self._entries[keys[read_end]]
                hit.expires_at = now + TTL_SECONDS[hit.ttl]
            writes = {"5m": 0, "1h": 0}
            written_end = read_end
            for bp in breakpoints:
                ttl = blocks[bp].ttl
                assert ttl is not None
                if cumulative[bp] < self.min_cacheable_tokens:
                    continue
                entry = self._entries.get(keys[bp])
                if bp <= read_end:
                    # Already paid for as a read; keep the entry alive at its position.
                    if entry is None or entry.expires_at <= now:
                        self._entries[keys[bp]] = _Entry(ttl, now + TTL_SECONDS[ttl],
                                                         cumulative[bp])
                    else:
                        entry.expires_at = max(entry.expires_at, now + TTL_SECONDS[ttl])
                    continue
                start_tokens = cumulative[written_end] if written_end >= 0 else 0
                writes[ttl] += cumulative[bp] - start_tokens
                self._entries[keys[bp]] = _Entry(ttl, now + TTL_SECONDS[ttl], cumulative[bp])
                written_end = bp
            self._expire(now)
        total = cumulative[-1] if cumulative else 0
        read = cumulative[read_end] if read_end >= 0 else 0
        covered = cumulative[written_end] if written_end >= 0 else 0
        return CacheOutcome(input_tokens=total - covered, cache_read_input_tokens=read,
                            cache_write_5m_tokens=writes["5m"], cache_write_1h_tokens=writes["1h"])

    def _expire(self, now: float) -> None:
        if len(self._entries) > 4096:
            for key in [k for k, e in self._entries.items() if e.expires_at <= now]:
                del self._entries[key]


def _chain(blocks: list[CacheBlock], namespace: str) -> tuple[list[bytes], list[int]]:
    """Chained prefix digests and cumulative token counts, one per block."""
    keys: list[bytes] = []
    cumulative: list[int] = []
    digest = hashlib.sha256(namespace.encode()).digest()
    running = 0
    for block in blocks:
        digest = hashlib.sha256(digest + hashlib.sha256(block.data).digest()).digest()
        running += block.tokens
        keys.append(digest)
        cumulative.append(running)
    return keys, cumulative
