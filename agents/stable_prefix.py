"""The stable-prefix registry: scaffolds whose end is a known cache boundary, and the lookup
that gives a user message built without a declared split its ``stable_prefix_len``.

Split out of agents/cache.py (which re-exports these names) so the planner stays small; the
planner calls ``resolve_stable_prefixes`` or, per pipeline, a ``StablePrefixMemo``.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from cachetools import LRUCache

from agents.messages import Message, common_prefix

REGISTRY_MAX_ENTRIES = 32
"""Stable-prefix registry bound in entries (hermes-facts §3, "Stable-prefix registry")."""
REGISTRY_MAX_CHARS = 4 * 1024 * 1024
"""Stable-prefix registry bound in characters summed over entries (hermes-facts §3)."""


class StablePrefixRegistry:
    """Process-wide LRU of scaffolds whose end is a known cache boundary (seed, "When only the
    builder knows where the prefix ends"; hermes-facts §3).

    Bounded at ``max_entries`` and ``max_chars`` (characters summed over entries); least
    recently used evicted first, the newest entry never, even when it alone is over budget.
    Registering an existing prefix or finding one refreshes it. Thread-safe.

    The recency order and the entry bound are cachetools' ``LRUCache`` (prefix -> its length);
    the character budget is enforced here because cachetools refuses an item larger than its
    whole budget, and this registry keeps the newest entry whatever its size.
    """

    def __init__(self, *, max_entries: int = REGISTRY_MAX_ENTRIES,
                 max_chars: int = REGISTRY_MAX_CHARS) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._entries: LRUCache[str, int] = LRUCache(maxsize=max_entries)
        self._lock = threading.Lock()
        self.version = 0
        """Bumped whenever the set of prefixes changes (a new one, an eviction, clear), never
        by a touch: ``find``'s answer for a text depends only on that set."""

    def _touch(self, prefix: str) -> None:
        # Re-inserted rather than read: the mapping's own order then IS the recency order
        # (cachetools iterates in insertion order), which ``snapshot`` reports.
        self._entries[prefix] = self._entries.pop(prefix)

    def register(self, prefix: str) -> None:
        """Record ``prefix`` as a stable scaffold; the empty string is ignored."""
        if not prefix:
            return
        with self._lock:
            if prefix in self._entries:
                self._touch(prefix)
                return
            self.version += 1
            self._entries[prefix] = len(prefix)  # past max_entries cachetools drops the LRU
            while len(self._entries) > 1 and sum(self._entries.values()) > self.max_chars:
                self._entries.popitem()

    def find(self, text: str) -> int | None:
        """Length in chars of the longest registered PROPER prefix of ``text`` whose remaining
        tail contains non-whitespace, else None. A hit refreshes that entry."""
        found = self.find_prefix(text)
        return None if found is None else len(found)

    def touch(self, prefixes: list[str]) -> None:
        """Refresh ``prefixes`` in order, as ``find`` hits would (gone ones are skipped)."""
        with self._lock:
            for prefix in prefixes:
                if prefix in self._entries:
                    self._touch(prefix)

    def find_prefix(self, text: str) -> str | None:
        """``find``, returning the registered prefix itself."""
        with self._lock:
            best: str | None = None
            for prefix in self._entries:
                if (len(prefix) < len(text) and (best is None or len(prefix) > len(best))
                        and text.startswith(prefix) and text[len(prefix):].strip()):
                    best = prefix
            if best is not None:
                self._touch(best)
            return best

    def snapshot(self) -> list[str]:
        """The registered prefixes, least recently used first (for tests and admin views)."""
        with self._lock:
            return list(self._entries)

    @property
    def total_chars(self) -> int:
        with self._lock:
            return sum(self._entries.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.version += 1


REGISTRY = StablePrefixRegistry()
"""The process-wide registry used by builders and the planner."""


def register_stable_prefix(prefix: str) -> None:
    """Builders of machine-made messages (skill invocations, scheduled prompts, webhooks) call
    this at construction time with the static scaffold their message starts with."""
    REGISTRY.register(prefix)


def find_stable_prefix(text: str) -> int | None:
    """See ``StablePrefixRegistry.find``; uses the process-wide ``REGISTRY``."""
    return REGISTRY.find(text)


# ---------------------------------------------------------------------------------------------


def resolve_stable_prefixes(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """``messages`` with ``stable_prefix_len`` filled in from the process registry for user
    messages built without it (seed, "When only the builder knows where the prefix ends").

    The stored value comes first: it survives restarts and registry eviction. A registry hit
    is applied to EVERY user message, not only the newest or a marked one, so a message's
    block layout does not depend on where this request's markers fall. Returns the same
    tuple object when nothing changed; changed messages are copies (stored rows untouched).
    """
    resolved: list[Message] | None = None
    for i, message in enumerate(messages):
        if message.role != "user" or message.stable_prefix_len is not None:
            continue
        found = find_stable_prefix(message.wire_text)
        if found is None:
            continue
        if resolved is None:
            resolved = list(messages)
        resolved[i] = replace(message, stable_prefix_len=found)
    return messages if resolved is None else tuple(resolved)


class StablePrefixMemo:
    """``resolve_stable_prefixes`` for a history that grows by appending (one per request
    pipeline; not thread-safe). A lookup's answer only changes when the registry's set of
    prefixes does (its ``version``), so while that holds the previous answers for the same
    (equal) messages are reused and only new messages are looked up. The hits are touched
    again in order, so the registry's recency order is what the full scan leaves."""

    def __init__(self) -> None:
        self._messages: tuple[Message, ...] = ()
        self._resolved: tuple[Message, ...] = ()
        self._hits: list[tuple[int, str]] = []  # (index, prefix) of every resolved message
        self._version = -1

    def resolve(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """Equal to ``resolve_stable_prefixes(messages)`` (the same tuple when unchanged)."""
        keep = 0
        if REGISTRY.version == self._version:
            keep = common_prefix(messages, self._messages)
        hits = [(i, prefix) for i, prefix in self._hits if i < keep]
        REGISTRY.touch([prefix for _, prefix in hits])
        self._version = REGISTRY.version
        resolved = list(self._resolved[:keep]) if hits else None
        for i in range(keep, len(messages)):
            message = messages[i]
            found = (REGISTRY.find_prefix(message.wire_text)
                     if message.role == "user" and message.stable_prefix_len is None else None)
            if found is not None:
                if resolved is None:
                    resolved = list(messages[:i])
                hits.append((i, found))
                message = replace(message, stable_prefix_len=len(found))
            if resolved is not None:
                resolved.append(message)
        self._messages, self._hits = messages, hits
        self._resolved = messages if resolved is None else tuple(resolved)
        return self._resolved
