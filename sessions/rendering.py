"""How the chat is drawn: Markdown → sanitised HTML, message rows → display items, and
RunEvents → the same template partials the page uses (style.md §2.9).

The page (sessions/views.py), the websocket consumer (sessions/consumers.py) and the polling
fallback (event_list_view) all call ``event_frame`` / ``transcript_context``, so HTTP and the
socket share one rendering path. Every fragment's top-level elements carry a stable DOM id
(``msg-<id>``, ``tool-<call id>``, ``approval-<id>``, ``turn-status``, ``usage-<turn id>``):
static/chat.js replaces an element with the same id or appends a new one, which makes
applying an event twice harmless. Business logic does not belong here; only reads for display.
"""

from __future__ import annotations

import json
import re
from typing import Any

import nh3
from django.db.models import Count, Max, Q, Sum
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from sessions.models import RunEvent, Session, Turn, UsageRecord
from sessions.selectors import event_list_after, message_list_display
from sessions.transcript import message_to_display

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"])
_ALLOWED_TAGS = {"p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote",
                 "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead",
                 "tbody", "tr", "th", "td", "img"}
_ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"},
                       "code": {"class"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}}
SUMMARY_CHARS = 80
"""Length of a tool card's one-line argument summary (chars)."""
OUTPUT_PREVIEW_CHARS = 20_000
"""Tool output shown in a card (chars); the full result stays in the transcript row."""
APPROVAL_EVENTS = frozenset({"approval.requested", "approval.decided"})
"""Event types whose partial depends on the viewer (rendered with a database read)."""
STATUS_EVENTS = frozenset({"turn.queued", "turn.started", "turn.finished", "turn.failed",
                           "turn.cancelled", "turn.awaiting_approval", "budget.exceeded"})
"""Event types whose frame carries the turn-status partial."""
PLAIN_EVENTS = frozenset({"text.delta", "usage", "session.updated"})
"""Event types the client applies without HTML (event_html returns None for them)."""


def markdown_html(text: str) -> SafeString:
    """``text`` rendered as CommonMark (tables, strikethrough) and sanitised by nh3 with an
    allow-list: raw HTML in the source is escaped, scripts, event handlers and javascript:
    URLs never survive, links get rel="noopener noreferrer nofollow"."""
    html = _markdown.render(text or "")
    return mark_safe(nh3.clean(html, tags=_ALLOWED_TAGS, attributes=_ALLOWED_ATTRIBUTES,
                               url_schemes={"http", "https", "mailto"},
                               link_rel="noopener noreferrer nofollow"))


def dom_id(prefix: str, raw: Any) -> str:
    """A DOM id safe for getElementById and CSS: ``prefix-`` + ``raw`` with anything outside
    [A-Za-z0-9_-] replaced by "_"."""
    return f"{prefix}-{re.sub(r'[^A-Za-z0-9_-]', '_', str(raw))}"


def argument_summary(arguments: Any) -> str:
    """A one-line summary of a tool call's arguments: the values joined by ", " (strings as
    is, others as JSON), whitespace collapsed, cut to SUMMARY_CHARS with an ellipsis."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    if isinstance(arguments, dict):
        parts = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                 for v in arguments.values()]
        text = ", ".join(parts)
    else:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    text = " ".join(str(text).split())
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS - 1] + "…"


_EXIT_CODE = re.compile(r"\[exit code (-?\d+)\]\s*$")
"""The last line of a terminal tool result (agents/tools/terminal.py)."""


def tool_card(call: dict, result: dict | None = None) -> dict:
    """Context for the tool-call partial: ``call`` is {id, name, arguments}; ``result`` the
    tool message dict (None while running)."""
    output = None if result is None else (result.get("content") or "")
    status = "running" if result is None else ("error" if result.get("is_error") else "done")
    label = status
    exit_code = _EXIT_CODE.search(output) if output and call.get("name") == "terminal" else None
    if status == "done" and exit_code and exit_code.group(1) != "0":
        # Read before the preview cut, which would drop the trailing marker.
        status, label = "failed", f"exit {exit_code.group(1)}"
    if output is not None and len(output) > OUTPUT_PREVIEW_CHARS:
        output = output[:OUTPUT_PREVIEW_CHARS] + f"\n… ({len(output):,} chars in all)"
    arguments = call.get("arguments")
    pretty = arguments if isinstance(arguments, str) else json.dumps(arguments, indent=2,
                                                                     ensure_ascii=False)
    return {"dom_id": dom_id("tool", call.get("id", "")), "name": call.get("name") or "?",
            "summary": argument_summary(arguments), "arguments": pretty, "status": status,
            "status_label": label, "output": output}


def message_item(message: dict, results: dict[str, dict] | None = None) -> dict:
    """Context for the message partial: the bubble and, for an assistant message, one tool
    card per tool call (filled from ``results`` keyed by tool_call_id when known)."""
    results = results or {}
    return {"message": message, "dom_id": dom_id("msg", message["id"]),
            "html": markdown_html(message.get("content", "")),
            "cards": [tool_card(c, results.get(c.get("id"))) for c in
                      message.get("tool_calls") or []]}


def usage_item(turn_id: int, totals: dict) -> dict:
    """Context for the usage line of one turn: tokens in the four buckets and the dollars
    (``cost``: USD decimal string or None; ``cost_unknown``: why some call has no price)."""
    return {"dom_id": dom_id("usage", turn_id), "input": totals.get("input_tokens") or 0,
            "output": totals.get("output_tokens") or 0,
            "cache_read": totals.get("cache_read_tokens") or 0,
            "cache_write": totals.get("cache_write_tokens") or 0,
            "cost": totals.get("cost_usd"), "cost_unknown": totals.get("cost_unknown") or ""}


def status_item(type: str, payload: dict) -> dict:
    """Context for the turn-status partial after an event of ``type``: state is one of
    idle, queued, running, awaiting_approval, failed, cancelled."""
    state = {"turn.queued": "queued", "turn.started": "running", "turn.finished": "idle",
             "turn.failed": "failed", "turn.cancelled": "cancelled",
             "turn.awaiting_approval": "awaiting_approval",
             "budget.exceeded": "budget_blocked"}.get(type, "idle")
    return {"state": state, "reason": payload.get("reason", ""),
            "turn_id": payload.get("turn_id")}


def _partial(name: str, context: dict) -> str:
    return render_to_string(f"sessions/detail.html#{name}", context)


def event_html(event: dict, *, user=None) -> str | None:
    """The rendered partial(s) for one event dict (event_to_dict shape), or None for events
    the client applies without HTML (text.delta, usage, session.updated).

    Approval cards depend on who looks (approve/deny rights), so approval events need
    ``user`` and read the database (approvals/rendering.py); every other event renders from
    its payload alone and may be rendered inside an event loop."""
    type, payload = event["type"], event.get("payload") or {}
    if type == "message.added":
        message = payload.get("message") or {}
        if message.get("role") == "tool":
            return _partial("tool-result", {"card": _orphan_result(message)})
        return _partial("message", {"item": message_item(message)})
    if type == "tool.called":
        return _partial("tool-call", {"card": tool_card(payload.get("tool_call") or {})})
    if type == "tool.result":
        return _partial("tool-result", {"card": _orphan_result(payload.get("message") or {})})
    if type in APPROVAL_EVENTS:
        from approvals.rendering import approval_event_html

        approval_id = (payload.get("approval") or {}).get("id", payload.get("approval_id"))
        if user is None or approval_id is None:
            return None
        return approval_event_html(user=user, payload={"approval": {"id": approval_id}}) or None
    if type in STATUS_EVENTS:
        html = _partial("turn-status", {"status": status_item(type, payload),
                                        "session_id": event.get("session_id")})
        if type == "turn.queued":
            html += _partial("queued-input", {"turn_id": payload.get("turn_id"),
                                              "text": payload.get("text", "")})
        if type in ("turn.finished", "budget.exceeded"):
            html += _partial("usage-line", {"usage": usage_item(payload.get("turn_id"),
                                                                payload.get("usage") or payload)})
        if type == "turn.failed":
            html += _partial("notice", {
                "level": "error", "dom_id": dom_id("turn-error", payload.get("turn_id")),
                "text": f"The turn failed: {payload.get('reason', '')}"})
        return html
    if type == "compaction":
        return _partial("compaction-divider", {
            "dom_id": dom_id("event", event["seq"]), "text": notice_text(type, payload),
            "summary_html": markdown_html(str(payload.get("summary") or ""))})
    if type in ("error", "cache.warning", "prune", "budget.warning"):
        return _partial("notice", {"level": "error" if type == "error" else "info",
                                   "dom_id": dom_id("event", event["seq"]),
                                   "text": notice_text(type, payload)})
    return None


def notice_text(type: str, payload: dict) -> str:
    """A one-line human description of a notice event."""
    if type == "compaction":
        return (f"Older messages were summarised: {payload.get('tokens_before', '?')} → "
                f"{payload.get('tokens_after', '?')} tokens.")
    if type == "prune":
        return "Old tool output was pruned to save context."
    if type == "cache.warning":
        return "Prompt-cache warning: " + str(payload.get("reason") or payload.get("detail")
                                              or "cache reads dropped.")
    return str(payload.get("reason") or "Something went wrong.")


def _orphan_result(message: dict) -> dict:
    """A finished card for a tool result arriving on its own (name from the row)."""
    card = tool_card({"id": message.get("tool_call_id", ""), "name": message.get("tool_name"),
                      "arguments": {}}, message)
    card["summary"] = ""
    return card


def event_frame(event: dict, *, user=None) -> dict:
    """The websocket / polling frame for one event: the event dict plus "html" when the
    event has a partial (docs/protocol.md). ``user``: see event_html."""
    html = event_html(event, user=user)
    return {**event, "html": html} if html is not None else dict(event)


def streaming_text(events: list[RunEvent]) -> tuple[str, int | None]:
    """Text streamed for the assistant message not stored yet: the text.delta texts after
    the last stored message of the running turn. Returns (text, message_index)."""
    text, index = "", None
    for event in events:
        if event.type == "text.delta":
            if event.payload.get("message_index") != index:
                text, index = "", event.payload.get("message_index")
            text += event.payload.get("text", "")
        elif event.type in ("message.added", "turn.finished", "turn.failed", "turn.cancelled"):
            text, index = "", None
    return text, index


def transcript_context(*, session: Session, user, request=None) -> dict:
    """Everything the chat page draws, read so that nothing is lost or shown twice on a
    reload mid-stream: ``last_seq`` is read FIRST, so every event after it is replayed by
    the socket; anything already drawn is replaced by DOM id, never appended twice.

    Returns {"last_seq", "items", "status", "streaming", "streaming_index", "queued",
    "approval_cards"}.
    """
    from approvals.models import ApprovalRequest
    from approvals.rendering import approval_card_html

    last_seq = Session.objects.values_list("event_seq", flat=True).get(pk=session.pk)
    rows = [message_to_display(m) for m in message_list_display(session=session)]
    turns = list(Turn.objects.filter(session=session).order_by("id"))
    results = {m["tool_call_id"]: m for m in rows if m["role"] == "tool"}
    footers = _turn_footers(turns)
    items: list[dict] = []
    shown_results: set[str] = set()
    for m in rows:
        if m["id"] in footers:
            items.extend(footers.pop(m["id"]))
        if m["role"] == "tool":
            if m["tool_call_id"] not in shown_results:
                items.append({"kind": "tool", "card": _orphan_result(m)})
            continue
        item = message_item(m, results)
        shown_results.update(c.get("id") for c in m.get("tool_calls") or [])
        items.append({"kind": "message", "item": item})
    for rest in footers.values():
        items.extend(rest)
    running = next((t for t in reversed(turns) if t.status in (
        Turn.Status.RUNNING, Turn.Status.QUEUED, Turn.Status.AWAITING_APPROVAL)), None)
    streaming, index = "", None
    if running is not None and running.status == Turn.Status.RUNNING:
        started = (RunEvent.objects.filter(session=session, type="turn.started",
                                           seq__lte=last_seq).order_by("-seq").first())
        if started is not None:
            events = [e for e in event_list_after(session_id=session.pk, after_seq=started.seq)
                      if e.seq <= last_seq]
            streaming, index = streaming_text(events)
    state = {None: "idle", "queued": "queued", "running": "running",
             "awaiting_approval": "awaiting_approval"}[running.status if running else None]
    reason = ""
    if running is None and turns and turns[-1].status == Turn.Status.BUDGET_BLOCKED:
        state, reason = "budget_blocked", turns[-1].error  # resumable once the cap is raised
    approval_cards = [approval_card_html(a, user, request=request) for a in
                      ApprovalRequest.objects.filter(session=session,
                                                     state=ApprovalRequest.State.PENDING)]
    queued = [{"turn_id": t.pk, "text": t.input_text[:2000]} for t in turns
              if t.user_message_id is None and t.status in (Turn.Status.QUEUED,
                                                            Turn.Status.RUNNING)]
    return {"last_seq": last_seq, "items": items, "streaming": streaming,
            "streaming_index": index, "queued": queued, "approval_cards": approval_cards,
            "status": {"state": state, "reason": reason,
                       "turn_id": running.pk if running else None}}


def _turn_footers(turns: list[Turn]) -> dict[int | None, list[dict]]:
    """Per finished turn, the usage line (and failure notice), keyed by the id of the next
    turn's user message (None: the end of the transcript)."""
    usage = {row["turn_id"]: row for row in UsageRecord.objects.filter(
        turn__in=[t.pk for t in turns]).values("turn_id").annotate(
        input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
        cache_read_tokens=Sum("cache_read_tokens"), w5=Sum("cache_write_5m_tokens"),
        w1=Sum("cache_write_1h_tokens"), usd=Sum("cost_usd"),
        unknown=Count("id", filter=Q(cost_usd__isnull=True)),
        cost_unknown=Max("cost_unknown_reason"))}
    footers: dict[int | None, list[dict]] = {}
    started = [t for t in turns if t.user_message_id is not None]
    for turn, after in zip(started, [*[t.user_message_id for t in started[1:]], None]):
        parts = []
        if turn.pk in usage:
            row = usage[turn.pk]
            parts.append({"kind": "usage", "usage": usage_item(turn.pk, {
                **row, "cache_write_tokens": (row["w5"] or 0) + (row["w1"] or 0),
                "cost_usd": row["usd"],
                "cost_unknown": row["cost_unknown"] if row["unknown"] else ""})})
        if turn.status == Turn.Status.FAILED and turn.error:
            parts.append({"kind": "notice", "level": "error", "dom_id": dom_id("turn-error",
                                                                               turn.pk),
                          "text": f"The turn failed: {turn.error}"})
        if parts:
            footers.setdefault(after, []).extend(parts)
    return footers
