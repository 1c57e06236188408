"""Wire-history validation and repair, run on the transcript before every send.

Providers reject a whole request for one malformed message (failure cases B01, B02, B05,
B15, B17, B20, B21), and a rejected history is rejected on every later turn too. This module
turns any stored transcript into a legal one, deterministically, and says what it changed.

What does not belong here: storage (the caller stores ``Repair.added``), provider wire shapes
(transports render the repaired ``Message`` list), and retry policy (the loop: repair, retry
once, never resend the same payload).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict, deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from agents.messages import Message, ToolCall

NOT_EXECUTED = "not executed: the turn ended before this tool call ran"
"""Result text for an unanswered call that never started (B01: "denied, never ran" case)."""
INTERRUPTED = ("interrupted while running: this tool call was stopped before it finished and "
               "may have had partial effects")
"""Result text for an unanswered call known to have started (B01)."""
EMPTY = "(empty)"
"""Stand-in for empty or whitespace-only content (B17)."""
CONTINUES = "(conversation continues)"
"""Stand-in user message when a history would otherwise open with an assistant."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Repair:
    """The outcome of ``validate_and_repair``.

    ``messages``: the legal history to send. ``added``: synthetic tool results (already in
    ``messages``) the caller must store so the transcript records that the calls were
    answered; stored at the end of the transcript they are moved back beside their call on
    the next repair, so the next request is identical. ``problems``: one line per fix, for
    logs; empty means the input was already legal.
    """

    messages: tuple[Message, ...]
    added: tuple[Message, ...]
    problems: tuple[str, ...]


def _blank(text: str) -> bool:
    return not text.strip()


def _fill_empty(message: Message) -> Message:
    if message.sent_content is not None:
        return replace(message, sent_content=EMPTY)
    return replace(message, content=EMPTY)


def _legal_call(call: ToolCall, problems: list[str]) -> ToolCall:
    """Half-built or invalid arguments (B21) are replayed as "{}" so the payload parses."""
    try:
        ok = isinstance(json.loads(call.arguments or "{}"), dict)
    except ValueError:
        ok = False
    if ok:
        return call
    problems.append(f"invalid arguments of call {call.id} replaced by {{}}")
    return replace(call, arguments="{}")


def _merge(first: Message, second: Message) -> Message:
    """Two assistants in a row (the first has no calls): one message, first id kept."""
    def join(a: str, b: str) -> str:
        return "\n\n".join(part for part in (a, b) if not _blank(part))

    sent = None
    if first.sent_content is not None or second.sent_content is not None:
        sent = join(first.wire_text, second.wire_text)
    return replace(second, id=first.id, content=join(first.content, second.content),
                   sent_content=sent)


def validate_and_repair(messages: Sequence[Message], *,
                        started_call_ids: Collection[str] = ()) -> Repair:
    """Return a legal, canonical copy of ``messages`` (ordered by row id, as loaded).

    Rules, in order (B01, B02, B05, B15, B17, B20, B21):
    - ``reasoning`` is removed from every message (never replayed); not reported.
    - Every tool call is answered exactly once, by results placed right after its assistant
      message in the calls' emission order. A stored result elsewhere (a clock-stepped load, a
      late result, a previously added repair) is moved there. A missing one gets an
      ``is_error`` result: ``INTERRUPTED`` if its id is in ``started_call_ids`` (the caller's
      ledger of calls that began running), else ``NOT_EXECUTED``; these are ``Repair.added``.
    - A second result for the same call id is dropped.
    - A result whose call id appears in no assistant message (B02 orphan) is converted, at
      its position, into a user note carrying its text, so output the model never saw is not
      lost (B06) and no provider sees a dangling ``tool_use_id``.
    - Tool-call arguments that are not a JSON object become "{}" (B21).
    - A call id repeated in a later call (some providers reuse "call_0" every turn) is sent as
      ``<id>_r<n>``; stored results are claimed by calls in order. ``added`` rows keep the
      stored id, so storing them reproduces the same request.
    - An assistant message with no text and no tool calls is dropped (B17: never replayed as
      invented text); other empty or whitespace-only content becomes ``EMPTY`` (assistants
      that carry tool calls may be empty); two assistants in a row are merged; a history that opens with an assistant
      gets a ``CONTINUES`` user message first.
    Deterministic and idempotent: repairing the output changes nothing and reports nothing.
    A message that needs no change is passed through as the same object (its memo,
    agents.messages.message_memo, then survives a repair, and prefix checks stay cheap).
    """
    problems: list[str] = []
    started = frozenset(started_call_ids)
    msgs = [replace(m, reasoning=None) if m.reasoning else m for m in messages]

    calls_left = Counter(c.id for m in msgs if m.role == "assistant" for c in m.tool_calls)
    call_ids = set(calls_left)
    pending: dict[str, deque[int]] = defaultdict(deque)  # call id -> indexes of its results
    for index, m in enumerate(msgs):
        if m.role == "tool" and m.tool_call_id in call_ids:
            pending[m.tool_call_id].append(index)

    out: list[Message] = []
    added: list[Message] = []
    seen: Counter[str] = Counter()
    # Every id the history already uses: a repeat is never renamed onto one of them (a
    # history carried in memory holds the renamed ids of earlier repairs, and a provider
    # that reuses "call_0" every turn would otherwise get "call_0_r2" twice).
    taken = set(call_ids) | {m.tool_call_id for m in msgs if m.role == "tool"}
    for index, m in enumerate(msgs):
        if m.role == "tool":
            if m.tool_call_id not in call_ids:
                problems.append(f"orphan result for unknown call {m.tool_call_id}: "
                                "converted to a note")
                out.append(_orphan_note(m))
            # Results of known calls are emitted beside their call; skip them here.
            continue
        stored_ids = [c.id for c in m.tool_calls]
        wire_ids = []
        for cid in stored_ids:
            seen[cid] += 1
            wire_ids.append(cid if seen[cid] == 1 else _unused_id(cid, seen[cid], taken))
        if m.tool_calls:
            calls = tuple(_legal_call(c, problems) for c in m.tool_calls)
            if wire_ids != stored_ids:
                problems.append("repeated tool call ids made unique on the wire")
                calls = tuple(replace(c, id=w) for c, w in zip(calls, wire_ids))
            if calls != m.tool_calls:  # unchanged: the same object, so per-message memos hold
                m = replace(m, tool_calls=calls)
        out.append(m)
        for k, (call, cid) in enumerate(zip(m.tool_calls, stored_ids)):
            queue = pending.get(cid)
            if queue:
                source = queue.popleft()
                if source != index + 1 + k:
                    problems.append(f"moved result for call {call.id} next to its call")
                result = msgs[source]
                out.append(result if result.tool_call_id == call.id
                           else replace(result, tool_call_id=call.id))
                continue
            text = INTERRUPTED if cid in started else NOT_EXECUTED
            synthetic = Message(role="tool", content=text, tool_call_id=cid,
                                tool_name=call.name, is_error=True)
            problems.append(f"unanswered call {call.id} ({call.name}) given an error result")
            out.append(replace(synthetic, tool_call_id=call.id))
            added.append(synthetic)
        for cid in stored_ids:
            calls_left[cid] -= 1
            while calls_left[cid] == 0 and pending.get(cid):
                pending[cid].popleft()
                problems.append(f"dropped duplicate result for call {cid}")

    legal = _legal_roles(out, problems)
    return Repair(messages=tuple(legal), added=tuple(added), problems=tuple(problems))


def _unused_id(cid: str, n: int, taken: set[str]) -> str:
    """``{cid}_r{n}`` for the n-th occurrence of ``cid``, or the next free suffix when that
    id is taken (the same answer from stored rows and from a history repaired before);
    the id returned is added to ``taken``."""
    while f"{cid}_r{n}" in taken:
        n += 1
    taken.add(f"{cid}_r{n}")
    return f"{cid}_r{n}"


def _orphan_note(m: Message) -> Message:
    name = m.tool_name or "a tool"
    text = m.wire_text if not _blank(m.wire_text) else EMPTY
    return Message(role="user", id=m.id,
                   content=f"[output of {name} (call {m.tool_call_id}), whose call is no "
                           f"longer in the history]\n{text}")


def _legal_roles(out: list[Message], problems: list[str]) -> list[Message]:
    legal: list[Message] = []
    for m in out:
        if m.role == "assistant" and not m.tool_calls and _blank(m.wire_text):
            # An empty reply (a refusal, an interrupt before the first token) is never
            # replayed and never invented as "(empty)" (B17); its row stays for display.
            problems.append("empty assistant message dropped")
            continue
        if m.role == "assistant" and legal and legal[-1].role == "assistant":
            problems.append("two assistant messages in a row merged")
            legal[-1] = _merge(legal[-1], m)
        else:
            legal.append(m)
    for i, m in enumerate(legal):
        if _blank(m.wire_text) and not (m.role == "assistant" and m.tool_calls):
            problems.append(f"empty {m.role} content replaced by {EMPTY}")
            legal[i] = _fill_empty(m)
    if legal and legal[0].role != "user":
        problems.append("history opened with an assistant: user stand-in inserted")
        legal.insert(0, Message(role="user", content=CONTINUES))
    return legal


def flatten_tool_exchanges(messages: Sequence[Message]) -> list[Message]:
    """The strict repair after a provider rejected a history's shape (B01): every tool
    exchange BEFORE the newest user message is sent as plain text (the assistant's calls as
    lines of its text, each result as a user note), which is legal on every provider; the
    newest turn's exchanges stay structured. Same-role neighbours then merge on the wire.
    Deterministic; never stored (the rows keep their structure)."""
    last_user = next((i for i in range(len(messages) - 1, -1, -1)
                      if messages[i].role == "user"), 0)
    out: list[Message] = []
    for index, m in enumerate(messages):
        if index >= last_user:
            out.append(m)
        elif m.role == "assistant" and m.tool_calls:
            lines = [f"[called {c.name} (call {c.id}) with {c.arguments}]" for c in m.tool_calls]
            text = "\n".join(part for part in (m.wire_text.strip(), *lines) if part)
            out.append(replace(m, content=text, sent_content=None, tool_calls=()))
        elif m.role == "tool":
            label = "error from" if m.is_error else "result of"
            out.append(Message(role="user", id=m.id, content=f"[{label} {m.tool_name or 'a tool'}"
                               f" (call {m.tool_call_id})]\n{m.wire_text or EMPTY}"))
        else:
            out.append(m)
    merged: list[Message] = []
    for m in out:  # flattened results sit between a user turn and the next: join them
        if merged and merged[-1].role == m.role == "user" and index_is_note(merged[-1], m):
            merged[-1] = replace(merged[-1], content=f"{merged[-1].wire_text}\n\n{m.wire_text}",
                                 sent_content=None)
        else:
            merged.append(m)
    return _legal_roles(merged, [])


def index_is_note(first: Message, second: Message) -> bool:
    """True when ``second`` is a flattened tool-result note that may join ``first``."""
    return second.content.startswith(("[result of ", "[error from "))


@dataclass(frozen=True, slots=True)
class CallTally:
    """The tool call ids of a history: ``seen`` every id that occurs as a call or as a
    result; ``balance`` per id, calls minus results (positive: unanswered). Built once over
    a history and then ``extended`` by what is appended, so a worker that kept a session's
    history between turns tallies only the new rows (issue 15 target 1: a full count over a
    2,000-message history was 2.5 ms of every turn's first iteration)."""

    seen: frozenset[str]
    balance: dict[str, int]

    @classmethod
    def of(cls, messages: Sequence[Message]) -> "CallTally":
        """The tally of ``messages``."""
        return cls(frozenset(), {}).extended(messages)

    def extended(self, messages: Sequence[Message]) -> "CallTally":
        """The tally of this one's history followed by ``messages`` (a new object: a kept
        tally may be read by the turn that kept it while the next one extends it)."""
        if not messages:
            return self
        calls = Counter(c.id for m in messages if m.role == "assistant" for c in m.tool_calls)
        results = Counter(m.tool_call_id for m in messages
                          if m.role == "tool" and m.tool_call_id)
        balance = dict(self.balance)
        calls.subtract(results)
        for cid, n in calls.items():
            left = balance.get(cid, 0) + n
            if left:
                balance[cid] = left
            else:
                balance.pop(cid, None)
        return CallTally(self.seen.union(calls), balance)  # subtract added the result ids

    @property
    def unanswered(self) -> set[str]:
        """The ids that occur more often as calls than as results."""
        return {cid for cid, left in self.balance.items() if left > 0}
