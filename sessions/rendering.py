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
from collections.abc import Collection
from typing import Any

import nh3
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import SafeString
from markdown_it import MarkdownIt
from markdown_it.token import Token

from sessions.highlight import code_highlight
from sessions.hooks import APPROVALS
from sessions.models import ClarifyQuestion, Message, RunEvent, Session, Turn
from sessions.selectors import event_list_after, message_list_display
from sessions.sink import started_call_ids, turn_usage_totals
from sessions.steer import STEER, STEERED
from sessions.tool_cards import (APPROVAL_STATUSES, AWAITING_ANSWER, DESCRIBERS, call_arguments,
                                 tool_status, tool_summary)
from sessions.transcript import message_to_display
from sessions.visible import visible_html, visible_markup, visible_spec
from sessions.waits import WAITING_STATUSES

def _image_as_link(renderer, tokens, idx, options, env) -> str:
    """Markdown images never load (issue 8, finding 10: a reply could leak data to another
    host in an image URL, fetched the moment it rendered). An image becomes a plain link
    labelled "image: <alt>" that the reader may open deliberately; nh3 then drops any
    scheme but http(s)/mailto and adds rel=noopener noreferrer nofollow."""
    token = tokens[idx]
    alt = renderer.renderInlineAsText(token.children or [], options, env).strip()
    return (f'<a class="image-link" href="{escape(token.attrGet("src") or "")}">'
            f'image: {escape(alt or "(no description)")}</a>')


_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True,
                                     "highlight": code_highlight}).enable(
    ["table", "strikethrough"])
_markdown.add_render_rule("image", _image_as_link)
_TASK = re.compile(r"\[([ xX])\] ")


def _task_lists(state) -> None:
    """GitHub task lists: a list item starting "[ ] " or "[x] " gets a disabled checkbox
    (a core rule after inline parsing; the checkbox is the one <input> the sanitiser keeps,
    and raw HTML in a message is never parsed, so only this rule can produce it)."""
    tokens = state.tokens
    for i in range(2, len(tokens)):
        inline = tokens[i]
        if (inline.type != "inline" or tokens[i - 1].type != "paragraph_open"
                or tokens[i - 2].type != "list_item_open" or not inline.children):
            continue
        first = inline.children[0]
        match = _TASK.match(first.content) if first.type == "text" else None
        if match is None:
            continue
        first.content = first.content[match.end():]
        box = Token("html_inline", "", 0)
        box.content = ('<input type="checkbox" disabled checked aria-label="done"> '
                       if match.group(1) != " "
                       else '<input type="checkbox" disabled aria-label="not done"> ')
        inline.children.insert(0, box)
        tokens[i - 2].attrSet("class", "task-list-item")


_markdown.core.ruler.push("task_lists", _task_lists)
_ALLOWED_TAGS = {"p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote",
                 "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead",
                 "tbody", "tr", "th", "td", "span", "input"}
"""No <img>: images render as links (``_image_as_link``), so none survives sanitising."""
_ALLOWED_ATTRIBUTES = {"a": {"href", "title", "class"}, "code": {"class"},
                       "input": {"type", "checked", "disabled", "aria-label"}, "li": {"class"},
                       "span": {"class"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}}
SUMMARY_CHARS = 80
"""Length of a tool card's one-line argument summary (chars)."""
LONG_MESSAGE_CHARS = 3_000
"""Messages longer than this (chars) are drawn collapsed with "Show more" (issue 14)."""
LONG_OUTPUT_LINES = 20
"""Tool output longer than this (lines) is drawn collapsed with "Show all N lines"."""
OUTPUT_PREVIEW_CHARS = 20_000
"""Tool output shown in a card (chars); the full result stays in the transcript row."""
APPROVAL_EVENTS = frozenset({"approval.requested", "approval.decided"})
"""Event types whose partial depends on the viewer (rendered with a database read)."""
STATUS_EVENTS = frozenset({"turn.queued", "turn.started", "turn.finished", "turn.failed",
                           "turn.cancelled", "turn.awaiting_approval", "budget.exceeded",
                           "turn.awaiting_children",
                           "turn.awaiting_answer"})
"""Event types whose frame carries the turn-status partial."""
# Turn.kind of the turns a typed /compact or /prune queues (sessions/runner.py _reduce_by_hand).
COMMAND_KINDS = frozenset({"compact", "prune"})
PLAIN_EVENTS = frozenset({"text.delta", "usage", "session.updated", "turn.steered"})
"""Event types the client applies without HTML (event_html returns None for them)."""


def markdown_html(text: str) -> SafeString:
    """``text`` rendered as CommonMark (tables, strikethrough) and sanitised by nh3 with an
    allow-list: raw HTML in the source is escaped, scripts, event handlers and javascript:
    URLs never survive, links get rel="noopener noreferrer nofollow", images become links
    (never an <img> that loads by itself). Hidden and control characters (bidi overrides,
    zero-width...) are shown as marked escapes (sessions/visible.py visible_markup), so a
    reply cannot read differently from what it is; right-to-left letters stay as they are."""
    html = _markdown.render(text or "")
    return visible_markup(nh3.clean(html, tags=_ALLOWED_TAGS, attributes=_ALLOWED_ATTRIBUTES,
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


def tool_card(call: dict, result: dict | None = None, *,
              approval_state: str | None = None, started: bool = True) -> dict:
    """Context for the tool-call partial: ``call`` is {id, name, arguments}; ``result`` the
    tool message dict (None while running); ``approval_state`` the state of the call's
    approval request when it has one; ``started``: announced by ``tool.called`` (else a
    call without result is "queued"). Summary and status come from the arguments and the
    result's metadata (sessions/tool_cards.py); the arguments and the output are
    visible-safe HTML (sessions/visible.py: hidden and control characters as marked
    ⟨U+202E⟩, ⟨CR⟩... spans), so a file name or command cannot display reversed."""
    output = None if result is None else (result.get("content") or "")
    status, label = tool_status(result=result, approval_state=approval_state,
                                started=started)
    if output is not None and len(output) > OUTPUT_PREVIEW_CHARS:
        output = output[:OUTPUT_PREVIEW_CHARS] + f"\n… ({len(output):,} chars in all)"
    arguments = call.get("arguments")
    pretty = visible_html(arguments if isinstance(arguments, str) else json.dumps(
        arguments, indent=2, ensure_ascii=False))
    name = call.get("name") or "?"
    lines = output.count("\n") + 1 if output else 0
    output = None if output is None else visible_html(output)
    return {"long_output": lines > LONG_OUTPUT_LINES, "output_lines": lines,"dom_id": dom_id("tool", call.get("id", "")), "name": name,
            "call_id": call.get("id", ""),
            "summary": tool_summary(name, arguments, (result or {}).get("tool_meta")),
            "described": name in DESCRIBERS, "arguments": pretty, "status": status,
            "status_label": label, "output": output, "has_arguments": bool(
                call_arguments(arguments)) or arguments not in (None, "", {})}


def message_item(message: dict, results: dict[str, dict] | None = None, *,
                 user_label: str = "You", approvals: dict[str, str] | None = None,
                 started: Collection[str] = ()) -> dict:
    """Context for the message partial: the bubble and, for an assistant message, one tool
    card per tool call (filled from ``results`` keyed by tool_call_id when known, from
    ``approvals``: approval state by tool_call_id, and ``started``: the ids of calls
    without a result announced as started; the others are "queued"). ``user_label`` names
    the author of user messages: "You" for the owner, the owner's name for a team admin
    (viewer_label). ``html`` (Markdown) and ``plain_html`` (a user's text as typed) are
    visible-safe (sessions/visible.py)."""
    results, approvals = results or {}, approvals or {}
    length = len(message.get("content") or "")
    return {"message": message, "dom_id": dom_id("msg", message["id"]),
            "html": markdown_html(message.get("content", "")), "user_label": user_label,
            # A user's message is drawn as typed, not as Markdown: visible-safe plain text.
            "plain_html": visible_html(message.get("content") or ""),
            "long": length > LONG_MESSAGE_CHARS, "length": length,
            "cards": [tool_card(c, results.get(c.get("id")),
                                approval_state=approvals.get(c.get("id")),
                                started=c.get("id") in started) for c in
                      message.get("tool_calls") or []]}


def usage_item(turn_id: int, totals: dict) -> dict:
    """Context for the usage line of one turn: tokens in the four buckets and the dollars
    (``cost``: USD decimal string or None; ``cost_unknown``: why some call has no price).
    ``empty``: the turn made no model call (a /compact with nothing to reduce): no line is
    drawn, as "0 tokens in … 0 out" says nothing and reads like a fault."""
    item = {"dom_id": dom_id("usage", turn_id), "input": totals.get("input_tokens") or 0,
            "output": totals.get("output_tokens") or 0,
            "cache_read": totals.get("cache_read_tokens") or 0,
            "cache_write": totals.get("cache_write_tokens") or 0,
            "served_by": ", ".join(totals.get("served_by") or ()),
            "cost": totals.get("cost_usd"), "cost_unknown": totals.get("cost_unknown") or ""}
    item["empty"] = not (item["input"] or item["output"] or item["cache_read"]
                         or item["cache_write"] or item["cost_unknown"])
    return item


def outcome_item(turn_id: int, command: str, text: str) -> dict:
    """Context for the notice saying how a /compact or /prune turn ended ("done", "nothing
    to reduce", the summariser's fallback): the turn has no reply, so without it the user
    cannot tell whether anything happened."""
    return {"kind": "notice", "level": "info", "dom_id": dom_id("turn-outcome", turn_id),
            "text": visible_html(text or f"/{command} finished.")}


def status_item(type: str, payload: dict) -> dict:
    """Context for the turn-status partial after an event of ``type``: state is one of
    idle, queued, running, awaiting_approval, failed, cancelled."""
    state = {"turn.queued": "queued", "turn.started": "running", "turn.finished": "idle",
             "turn.failed": "failed", "turn.cancelled": "cancelled",
             "turn.awaiting_approval": "awaiting_approval",
             "turn.awaiting_children": "awaiting_children",
             "turn.awaiting_answer": "awaiting_answer",
             "budget.exceeded": "budget_blocked"}.get(type, "idle")
    return {"state": state, "reason": visible_html(str(payload.get("reason") or "")),
            "turn_id": payload.get("turn_id")}


def _partial(name: str, context: dict) -> str:
    return render_to_string(f"sessions/detail.html#{name}", context)


def viewer_label(*, session: Session, user) -> str:
    """How user messages of ``session`` are labelled for ``user``: "You" for the owner,
    else the owner's username (a team admin reading a member's session)."""
    if user is not None and session.owner_id == user.pk:
        return "You"
    return session.owner.get_username()


def event_html(event: dict, *, user=None, user_label: str = "You") -> str | None:
    """The rendered partial(s) for one event dict (event_to_dict shape), or None for events
    the client applies without HTML (text.delta, usage, session.updated).

    Approval cards depend on who looks (approve/deny rights), so approval events need
    ``user`` and read the database (approvals/rendering.py); every other event renders from
    its payload alone and may be rendered inside an event loop. ``user_label``: see
    message_item."""
    type, payload = event["type"], event.get("payload") or {}
    if type == "message.added":
        message = payload.get("message") or {}
        if message.get("role") == "tool":
            return _partial("tool-result", {"card": _orphan_result(message)})
        return _partial("message", {"item": message_item(message, user_label=user_label)})
    if type == "tool.called":
        return _partial("tool-call", {"card": tool_card(payload.get("tool_call") or {})})
    if type == "tool.ended":  # the card's status only; the output comes with tool.result
        card = tool_card({"id": payload.get("tool_call_id", ""), "name": payload.get("name"),
                          "arguments": {}}, {"is_error": bool(payload.get("is_error")),
                                             "tool_meta": payload.get("tool_meta") or {}})
        # Merged into the live card: its summary stays (no arguments here), and its output
        # says where the text is until the batch's results are stored.
        card.update(summary="", output=None, ended=True)
        return _partial("tool-card", {"card": card})
    if type == "tool.result":
        message, call = payload.get("message") or {}, payload.get("tool_call")
        card = tool_card(call, message) if call else _orphan_result(message)
        return _partial("tool-result", {"card": card})
    if type in APPROVAL_EVENTS:
        approval = payload.get("approval") or {}
        approval_id = approval.get("id", payload.get("approval_id"))
        if user is None or approval_id is None:
            return None
        html = APPROVALS.event_html(user=user, payload={"approval": {"id": approval_id}})
        state = approval.get("state")
        if html and approval.get("tool_call_id") and (
                state in APPROVAL_STATUSES or state == "pending"):
            html += _partial("tool-card", {"card": _approval_card_status(approval)})
        return html or None
    if type in STATUS_EVENTS:
        html = _partial("turn-status", {"status": status_item(type, payload),
                                        "session_id": event.get("session_id")})
        # A resumed turn (a budget stop's Resume) already shows its message: no bubble, or
        # an empty one would wait for a user message that is never stored again.
        if type == "turn.queued" and not payload.get("resumed"):
            html += _partial("queued-input", {"turn_id": payload.get("turn_id"),
                                              "text": visible_html(payload.get("text", ""))})
        if type == "turn.finished" and payload.get("command"):
            outcome = outcome_item(payload.get("turn_id"), payload["command"],
                                   str(payload.get("text") or ""))
            html += _partial("notice", outcome)
        if type in ("turn.finished", "turn.cancelled", "turn.failed", "budget.exceeded"):
            usage = usage_item(payload.get("turn_id"), payload.get("usage") or payload)
            if not usage["empty"]:
                html += _partial("usage-line", {"usage": usage})
        if type == "turn.failed":
            html += _partial("notice", {
                "level": "error", "dom_id": dom_id("turn-error", payload.get("turn_id")),
                "text": visible_html(f"The turn failed: {payload.get('reason', '')}")})
        return html
    if type == "clarify.requested":  # the question's call waits for the user, not runs
        question = payload.get("question") or {}
        if question.get("state") != "pending" or not question.get("tool_call_id"):
            return None
        return _partial("tool-card", {"card": _waiting_card_status(question["tool_call_id"])})
    if type == "steer.queued":  # not a status event: the running turn is still running
        return _partial("queued-input", {"turn_id": payload.get("turn_id"), "steer": True,
                                          "text": visible_html(payload.get("text", "")),
                                          "user_label": user_label})
    if type == "compaction":
        return _partial("compaction-divider", {
            "dom_id": dom_id("event", event["seq"]),
            "text": visible_html(notice_text(type, payload)),
            "summary_html": markdown_html(str(payload.get("summary") or ""))})
    if type == "tools.rebuilt" and (payload.get("reason") == "new session"
                                    or not (payload.get("added") or payload.get("removed"))):
        return None  # a new session's first snapshot is not news
    if type in ("error", "cache.warning", "prune", "history.repaired", "tools.rebuilt",
                "compaction.breaker_tripped", "provider.failover", "budget.warning",
                "session.model_changed"):
        return _partial("notice", {"level": "error" if type == "error" else "info",
                                   "dom_id": dom_id("event", event["seq"]),
                                   "text": visible_html(notice_text(type, payload))})
    return None


def notice_text(type: str, payload: dict) -> str:
    """A one-line human description of a notice event."""
    if type == "compaction":
        sizes = f"{payload.get('tokens_before', '?')} → {payload.get('tokens_after', '?')} tokens"
        if payload.get("kind") == "fallback":  # say what happened, not what was hoped (defect 7)
            return (f"The summariser failed ({payload.get('error') or 'unavailable'}); older "
                    f"messages were replaced by a deterministic note without a model summary: "
                    f"{sizes}.")
        if payload.get("kind") == "skip_small_middle":
            return f"Older messages were too few to summarise and were dropped: {sizes}."
        return f"Older messages were summarised: {sizes}."
    if type == "history.repaired":
        return ("The provider rejected the conversation's shape; it was repaired and the "
                "request retried once.")
    if type in ("compaction.breaker_tripped", "provider.failover", "session.model_changed"):
        return str(payload.get("text") or "")
    if type == "prune":
        return "Old tool output was pruned to save context."
    if type == "tools.rebuilt":
        parts = [f"{label}: {', '.join(payload.get(key) or [])}"
                 for key, label in (("added", "added"), ("removed", "removed"))
                 if payload.get(key)]
        return (f"The tools offered changed before this turn ({payload.get('reason')}): "
                + "; ".join(parts) + ".")
    if type == "cache.warning":
        return "Prompt-cache warning: " + str(payload.get("reason") or payload.get("detail")
                                              or "cache reads dropped.")
    return str(payload.get("reason") or "Something went wrong.")


def _approval_card_status(approval: dict) -> dict:
    """The tool card of a call whose approval is pending ("awaiting approval"), or was
    cancelled, denied or expired: it never ran, and the card says why (merged into the live
    card by static/chat.js)."""
    card = tool_card({"id": approval["tool_call_id"], "name": approval.get("tool_name"),
                      "arguments": {}}, None, approval_state=approval["state"])
    card["summary"] = ""  # keep the summary the live card already has
    return card


def _waiting_card_status(call_id: str) -> dict:
    """The tool card of a clarify call whose question is pending: "waiting for your answer"
    (merged into the live card by static/chat.js, which keeps its summary and arguments)."""
    card = tool_card({"id": call_id, "name": "clarify", "arguments": {}}, None,
                     approval_state=AWAITING_ANSWER)
    card["summary"] = ""
    return card


def _orphan_result(message: dict) -> dict:
    """A finished card for a tool result arriving on its own (name from the row)."""
    card = tool_card({"id": message.get("tool_call_id", ""), "name": message.get("tool_name"),
                      "arguments": {}}, message)
    card["summary"] = ""
    return card


def event_frame(event: dict, *, user=None, user_label: str = "You") -> dict:
    """The websocket / polling frame for one event: the event dict plus "html" when the
    event has a partial (docs/protocol.md). ``user``, ``user_label``: see event_html."""
    html = event_html(event, user=user, user_label=user_label)
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
    "approval_cards", "user_label", "visible_spec"}. Every free text is visible-safe HTML
    (sessions/visible.py); ``visible_spec`` lets static/chat.js escape streamed text alike.
    """
    last_seq = Session.objects.values_list("event_seq", flat=True).get(pk=session.pk)
    rows = [message_to_display(m) for m in message_list_display(session=session)]
    turns = list(Turn.objects.filter(session=session).order_by("id"))
    results = {m["tool_call_id"]: m for m in rows if m["role"] == "tool"}
    user_label = viewer_label(session=session, user=user)
    waiting = ClarifyQuestion.objects.filter(session=session,
                                             state=ClarifyQuestion.State.PENDING)
    approvals = {**APPROVALS.states(session),  # approvals/ answers (sessions/hooks.py)
                 **dict.fromkeys(waiting.values_list("tool_call_id", flat=True),
                                 AWAITING_ANSWER)}  # questions waiting for the user
    footers = _turn_footers(turns)
    # Calls without a result: which of them started (a reply's segments run one after
    # another). Only a turn in progress has any, so this is usually no query.
    unanswered = {c.get("id") for m in rows if m["role"] == "assistant"
                  for c in m.get("tool_calls") or [] if c.get("id") not in results}
    started = started_call_ids(session=session, ledgered=True, among=unanswered)
    notices = _budget_notices(session=session, last_seq=last_seq)
    decided = _decided_approval_cards(session=session, user=user, last_seq=last_seq,
                                      states=approvals)
    items: list[dict] = []
    shown_results: set[str] = set()
    for m in rows:
        if m["id"] in footers:
            items.extend(footers.pop(m["id"]))
        if m["role"] == "tool":
            if m["tool_call_id"] not in shown_results:
                items.append({"kind": "tool", "card": _orphan_result(m)})
        else:
            item = message_item(m, results, user_label=user_label, approvals=approvals,
                                started=started)
            shown_results.update(c.get("id") for c in m.get("tool_calls") or [])
            items.append({"kind": "message", "item": item})
            for call in m.get("tool_calls") or []:
                items.extend(decided.pop(call.get("id"), ()))
        items.extend(notices.pop(m["id"], ()))
    for rest in footers.values():
        items.extend(rest)
    running = next((t for t in reversed(turns) if t.status in (
        Turn.Status.RUNNING, Turn.Status.QUEUED, *WAITING_STATUSES)), None)
    streaming, index = "", None
    if running is not None and running.status == Turn.Status.RUNNING:
        started = (RunEvent.objects.filter(session=session, type="turn.started",
                                           seq__lte=last_seq).order_by("-seq").first())
        if started is not None:
            events = [e for e in event_list_after(session_id=session.pk, after_seq=started.seq)
                      if e.seq <= last_seq]
            streaming, index = streaming_text(events)
    state = {None: "idle", "queued": "queued", "running": "running",
             "awaiting_approval": "awaiting_approval", "awaiting_children": "awaiting_children",
             "awaiting_answer": "awaiting_answer",
             }.get(running.status if running else None, "running")
    reason = ""
    if running is None and turns and turns[-1].status == Turn.Status.BUDGET_BLOCKED:
        state, reason = "budget_blocked", turns[-1].error  # resumable once the cap is raised
    approval_cards = APPROVALS.cards_html(session, user, request)
    queued = [{"turn_id": t.pk, "text": visible_html(t.input_text[:2000]),
               "steer": t.kind == STEER}
              for t in turns
              if t.user_message_id is None and t.status in (Turn.Status.QUEUED,
                                                            Turn.Status.RUNNING)]
    return {"last_seq": last_seq, "items": items, "streaming": visible_html(streaming),
            "user_label": user_label, "visible_spec": visible_spec(),
            "streaming_index": index, "queued": queued, "approval_cards": approval_cards,
            "status": {"state": state, "reason": visible_html(reason),
                       "turn_id": running.pk if running else None}}


def _decided_approval_cards(*, session: Session, user, last_seq: int,
                            states: dict[str, str]) -> dict[str, list[dict]]:
    """The cards of decided approvals, as ``user`` sees them, keyed by tool call id, in the
    order they were requested; each {"kind": "approval", "html"}.

    The live page appends a card when approval.requested arrives (right after the reply
    that made the call) and replaces it in place when approval.decided arrives, so the
    decided card stays there; a reload drew pending cards only, and the decided card was
    gone. Which approvals the page showed comes from those events up to ``last_seq`` (the
    socket replays the rest); their current state comes from approvals/ (``states``: the
    latest state per call), and a call's pending request is left to the pending cards at
    the end of the transcript, as before."""
    requested: dict[int, str] = {}
    for payload in (RunEvent.objects.filter(session=session, type__in=APPROVAL_EVENTS,
                                            seq__lte=last_seq)
                    .order_by("seq").values_list("payload", flat=True)):
        approval = (payload or {}).get("approval") or {}
        if approval.get("id") is not None and approval.get("tool_call_id"):
            requested.setdefault(approval["id"], approval["tool_call_id"])
    latest = {call: approval_id for approval_id, call in sorted(requested.items())}
    cards: dict[str, list[dict]] = {}
    for approval_id, call in requested.items():
        if latest[call] == approval_id and states.get(call) == "pending":
            continue  # still waiting: drawn with the pending cards
        html = APPROVALS.event_html(user=user, payload={"approval": {"id": approval_id}})
        if html:
            cards.setdefault(call, []).append({"kind": "approval", "html": SafeString(html)})
    return cards


NOTICES_KEPT = ("budget.warning",)
"""Notice events a reload draws where the live page drew them: a budget warning is the only
sign that a turn ran close to its cap, and a Resume after the stop must not erase it."""


def _budget_notices(*, session: Session, last_seq: int) -> dict[int, list[dict]]:
    """The notices of NOTICES_KEPT events up to ``last_seq``, keyed by the id of the message
    stored last before each (the live page appended the notice after it), with the live
    page's DOM id (``event-<seq>``), so a replayed event replaces it. Budget notices are
    few: one anchor query each."""
    notices: dict[int, list[dict]] = {}
    for event in RunEvent.objects.filter(session=session, type__in=NOTICES_KEPT,
                                         seq__lte=last_seq).order_by("seq"):
        anchor = (RunEvent.objects.filter(session=session, type="message.added",
                                          seq__lt=event.seq).order_by("-seq")
                  .values_list("payload__message__id", flat=True).first())
        if anchor is None:
            continue
        notices.setdefault(anchor, []).append({
            "kind": "notice", "level": "info", "dom_id": dom_id("event", event.seq),
            "text": notice_text(event.type, event.payload)})
    return notices


UNFINISHED = (Turn.Status.QUEUED, Turn.Status.RUNNING, *WAITING_STATUSES)
"""A turn in these has no cost line yet: drawn on a reload mid-turn it sat above the reply
that arrived after it (the live line replaced it in place, still above)."""


def _turn_footers(turns: list[Turn]) -> dict[int | None, list[dict]]:
    """Per finished turn, the usage line (and failure notice), keyed by the id of the next
    turn's user message (None: the end of the transcript)."""
    usage = turn_usage_totals([t.pk for t in turns])  # as turn.finished carried them
    footers: dict[int | None, list[dict]] = {}
    # A correction that landed inside another turn is part of that turn, not a turn; a
    # rewound exchange (rewind, edit, regenerate) is not shown, nor is its usage line.
    rewound = set(Message.objects.filter(
        pk__in=[t.user_message_id for t in turns if t.user_message_id is not None],
        active=False, compacted=False).values_list("pk", flat=True))
    started = [t for t in turns if t.user_message_id is not None and t.kind != STEERED
               and t.user_message_id not in rewound]
    # A /compact or /prune turn has no message of its own: its outcome is shown where it
    # ran, before the next turn's user message.
    commands = [t for t in turns if t.kind in COMMAND_KINDS and t.status in (
        Turn.Status.COMPLETED, Turn.Status.FAILED)]
    outcomes = {e.payload.get("turn_id"): str(e.payload.get("text") or "")
                for e in RunEvent.objects.filter(
                    session_id=turns[0].session_id, type="turn.finished",
                    payload__turn_id__in=[t.pk for t in commands])} if commands else {}
    shown = sorted([*started, *commands], key=lambda t: t.pk)
    afters, after = [], None
    for turn in reversed(shown):  # each turn's footer goes before the next started turn
        afters.append(after)
        if turn.user_message_id is not None:
            after = turn.user_message_id
    for turn, after in zip(shown, reversed(afters)):
        if turn.status in UNFINISHED:  # its line comes with turn.finished, after its reply
            continue
        parts = []
        if turn.kind in COMMAND_KINDS and turn.status == Turn.Status.COMPLETED:
            parts.append(outcome_item(turn.pk, turn.kind, outcomes.get(turn.pk, "")))
        if turn.pk in usage:
            item = usage_item(turn.pk, usage[turn.pk])
            if not item["empty"]:
                parts.append({"kind": "usage", "usage": item})
        if turn.status == Turn.Status.FAILED and turn.error:
            parts.append({"kind": "notice", "level": "error", "dom_id": dom_id("turn-error",
                                                                               turn.pk),
                          "text": visible_html(f"The turn failed: {turn.error}")})
        if parts:
            footers.setdefault(after, []).extend(parts)
    return footers
