"""What a worker keeps of a session between its turns, how much of it, and when it is stale.

A worker that served a session's last turn keeps the turn's request pipeline (its memos: the
incremental repair, one token estimate per message, one prefix-fingerprint state per message,
the calibrator, the last billed size) and the live transcript as the turn left it, so the next
turn of that session on the same worker loads only the rows appended since and re-estimates
only them. Nothing here touches the database: the runner (sessions/runner.py) reads the
stamps from rows and asks ``BoundSession.usable``; this module decides and bounds.

Bounds (issue 15 item 3), both enforced by one cachetools ``LRUCache`` (least recently kept
session evicted first): ``max_entries`` sessions, and ``max_bytes`` of *estimated* memory
(``entry_bytes``), so a few 2,000-message sessions cannot hold a worker's memory hostage the
way a count bound alone would let them. An entry larger than the whole byte budget is not
kept (its next turn loads from rows, as after a restart).

Stale entries: an entry is used only while (1) the session's ``transcript_version`` is the one
it was kept under (every rewrite of live rows bumps it: compaction, prune, rewind, edit), (2)
no other turn of the session has started since the entry's turn (another worker served the
session, or this one did without keeping an entry: the transcript rows may be the same plus
appended ones, but the calibration anchor, the last billed size and the memos describe a
conversation that moved on elsewhere, so the whole entry is rebuilt from rows), and (3) the
live rows are exactly the entry's plus the rows appended since (checked by the caller).
Turns of a session run one at a time and in id order (sessions/tasks.py: a waiting turn
blocks those behind it), so "a turn with a higher id has started" is a reliable stamp that
needs no write of its own.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from cachetools import LRUCache

from agents.context.history import CallTally
from agents.messages import Message, common_prefix, message_memo

if TYPE_CHECKING:
    from agents.request import RequestPipeline

DEFAULT_MAX_ENTRIES = 128
"""Sessions a worker keeps (HERMES["BOUND_SESSIONS_MAX"]): 100 sessions served in turn stay
cached with room to spare (benchmarks/bench_memory.py)."""
DEFAULT_MAX_BYTES = 384 * 1024 * 1024
"""Estimated bytes a worker's kept sessions may hold (HERMES["BOUND_SESSIONS_BYTES"]); the
benchmark's 100 sessions (a tenth of them 2,000 messages long) need about a third of it."""
MESSAGE_OVERHEAD_BYTES = 2_200
"""Estimated bytes one kept message costs beyond its strings' own size: the Message object and
its slot in the transcript tuple and the pipeline's legal-history list, its ToolCall objects,
the pipeline's token-estimate memo entry and running sum (an int object, ~36 bytes), its
sha256 fingerprint state (an OpenSSL context outside the Python heap), and its own memo
(``message_memo``: the wire blocks the transports reuse, ~700 bytes a message by tracemalloc
on bench_overhead's mix); 1,400 before those two. Calibrated against RSS growth by
benchmarks/bench_memory.py, which prints the ratio of measured to estimated bytes (1.14 at
2,100, so 2,200 leaves the 1.15 bound some room)."""
STRING_OVERHEAD_BYTES = 49
"""CPython's header of an ASCII str (sys.getsizeof("")); what ``entry_bytes`` charges instead of
calling sys.getsizeof on every string of a message."""


@dataclass
class BoundSession:
    """One session as a worker keeps it between turns.

    ``pipeline``: the RequestPipeline of the turn that kept it; ``history``: the live transcript
    as that turn left it (every message stored, ``id`` set); ``version``: the session's
    ``transcript_version`` when kept; ``system_prompt``: the stored prompt the pipeline was
    built for (sessions/runner.py rebuilds the pipeline when the row's differs); ``turn_id``:
    the turn that kept it; ``size``: ``entry_bytes`` of ``history`` (estimated bytes);
    ``rendered``: the transport's last wire rendering on the turn's thread (opaque here:
    agents/transports/anthropic_messages.py), handed to the next turn's thread so its first
    request renders only what was appended; ``rendered_size``: its estimated bytes beyond
    the messages'; ``call_tally``: the tool call ids of ``history`` (None: count them). The
    cache charges ``size + rendered_size``."""

    pipeline: RequestPipeline
    history: tuple[Message, ...]
    version: int
    system_prompt: str
    turn_id: int
    size: int = 0
    rendered: object = None
    rendered_size: int = 0
    call_tally: CallTally | None = None

    @property
    def charged(self) -> int:
        """Estimated bytes the cache charges for this entry (``size + rendered_size``)."""
        return self.size + self.rendered_size

    @cached_property
    def last_id(self) -> int:
        """The highest stored row id in ``history`` (0 when none); computed once per entry
        (``history`` is a tuple of immutable messages)."""
        return max((m.id for m in self.history if m.id is not None), default=0)

    def usable(self, *, version: int | None, served_since: bool) -> bool:
        """True when the stamps read from rows still match: ``version`` is the session's
        ``transcript_version`` now (None: the session is gone), ``served_since`` whether a turn
        other than the current one and this entry's has started since this entry's turn. The
        caller still checks that the live rows are ``history`` plus appended ones."""
        return version is not None and version == self.version and not served_since


def message_bytes(message: Message) -> int:
    """Estimated bytes ``message`` holds while kept: its strings (chars, plus a header each;
    non-ASCII text is charged at its true width) and MESSAGE_OVERHEAD_BYTES. Computed once
    per message (its memo): the value depends only on the message's fields."""
    memo = message_memo(message)
    size = memo.get("session_cache.bytes")
    if size is None:
        size = memo["session_cache.bytes"] = _message_bytes(message)
    return size


def _message_bytes(message: Message) -> int:
    total = MESSAGE_OVERHEAD_BYTES
    for text in (message.content, message.sent_content, message.reasoning):
        if text:
            total += _str_bytes(text)
    for call in message.tool_calls:
        total += _str_bytes(call.id) + _str_bytes(call.name) + _str_bytes(call.arguments)
    return total


def _str_bytes(text: str) -> int:
    # len() is exact for ASCII; sys.getsizeof is exact for any str and costs about as much.
    return sys.getsizeof(text) if not text.isascii() else STRING_OVERHEAD_BYTES + len(text)


def entry_bytes(history: tuple[Message, ...] | list[Message], *, system_prompt: str = "",
                previous: BoundSession | None = None) -> int:
    """Estimated bytes of an entry holding ``history`` (and ``system_prompt``, the one string
    the pipeline holds besides the messages). When ``history`` starts with the messages of
    ``previous.history`` (equal ones: the same objects after a turn that appended), only the
    appended ones are estimated: keeping a 2,000-message session costs its new messages."""
    start, total = 0, _str_bytes(system_prompt)
    if previous is not None and previous.size and len(history) >= len(previous.history) \
            and common_prefix(history, previous.history) == len(previous.history):
        start = len(previous.history)
        total = previous.size
    return total + sum(message_bytes(m) for m in history[start:])


@dataclass(frozen=True)
class CacheStats:
    """What a SessionCache holds: ``entries`` sessions of ``bytes`` estimated bytes, against its
    bounds ``max_entries`` and ``max_bytes``."""

    entries: int
    bytes: int
    max_entries: int
    max_bytes: int


class SessionCache:
    """A worker process's kept sessions: session id -> BoundSession, least recently kept
    evicted first when either bound would be passed. Thread-safe (worker threads share it).

    ``take`` removes the entry (a turn owns it while it runs; a turn that ends without keeping
    one, failed or waiting, leaves none behind). ``keep`` stores one; the bounds are passed on
    every call so a changed setting applies at once (the cache is rebuilt, empty, when they
    change). Raises ValueError for a bound below 1."""

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._lock = threading.Lock()
        self._cache = self._new(max_entries, max_bytes)
        self._max_entries = max_entries

    @staticmethod
    def _new(max_entries: int, max_bytes: int) -> LRUCache[int, BoundSession]:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("the session cache's bounds must be at least 1")
        return LRUCache(maxsize=max_bytes, getsizeof=lambda entry: entry.charged)

    def take(self, session_id: int) -> BoundSession | None:
        """Remove and return the session's entry, or None."""
        with self._lock:
            return self._cache.pop(session_id, None)

    def keep(self, session_id: int, entry: BoundSession, *, max_entries: int | None = None,
             max_bytes: int | None = None) -> bool:
        """Store ``entry`` (its ``size`` must be set); False when it alone is over the byte
        budget and so was not kept. ``max_entries``/``max_bytes``: the bounds in force (None:
        unchanged)."""
        with self._lock:
            self._configure(max_entries, max_bytes)
            if entry.charged > self._cache.maxsize:
                self._cache.pop(session_id, None)
                return False
            self._cache[session_id] = entry  # past the byte budget cachetools drops the LRU
            while len(self._cache) > self._max_entries:
                self._cache.popitem()
            return True

    def _configure(self, max_entries: int | None, max_bytes: int | None) -> None:
        entries = self._max_entries if max_entries is None else max_entries
        size = self._cache.maxsize if max_bytes is None else max_bytes
        if (entries, size) != (self._max_entries, self._cache.maxsize):
            self._cache = self._new(entries, size)
            self._max_entries = entries

    def stats(self) -> CacheStats:
        """The entry count and estimated bytes held now, with the bounds."""
        with self._lock:
            return CacheStats(entries=len(self._cache), bytes=int(self._cache.currsize),
                              max_entries=self._max_entries, max_bytes=int(self._cache.maxsize))

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._cache

    def peek(self, session_id: int) -> BoundSession | None:
        """The session's entry without taking it (tests, benchmarks); a read refreshes it."""
        with self._lock:
            return self._cache.get(session_id)

    def clear(self) -> None:
        """Forget every entry (what a fresh worker process has)."""
        with self._lock:
            self._cache.clear()
