"""HTML for one approval card, shared by the review queue, the chat page and the socket.

The socket renderer (sessions/consumers.py) has no request, so it passes the CSRF token it
has (the csrftoken cookie's secret is accepted by Django's CSRF check) or relies on the
page-wide hx-headers token. Who may decide is approvals/services.py's, not this module's.

A reviewer sees the whole request (``approval_shown``): a headline naming the tool and its
target ("write_file → AGENTS.md", "terminal → rm -rf build", "execute_code → Python code,
12 lines"), then every argument of the call in full, one block each (a file's content, the
code, each edit's old and new text). A card shows up to CARD_ARGUMENT_CHARS characters of
argument text; past that it says how many characters each cut argument has and links to the
full view (approvals/<id>/arguments/, reviewers only). An argument was once shown as JSON
cut at 4,000 characters, so an instruction at character 4,700 of an AGENTS.md write never
reached the reviewer. Everything a reviewer reads goes through sessions/visible.py: hidden
and control characters appear as ⟨U+202E⟩, ⟨CR⟩, ⟨ESC⟩... and the card warns. Display only:
the stored arguments, and so what runs, are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from django.http import Http404, HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString

from agents.wording import plural
from approvals.models import ApprovalRequest
from approvals.selectors import approval_get
from approvals.services import approval_permissions
from sessions.visible import HIDDEN_WARNING, has_hidden, visible_html

CARD_ARGUMENT_CHARS = 100_000
"""Characters of argument text one card shows in all, so a page of cards stays loadable.
Past it each cut argument says "showing the first X of Y characters" and links to the full
view; nothing is cut silently."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownArgument:
    """One leaf of the call's arguments as the card shows it. ``label``: its path
    ("content", "edits[1].new_string"), visible-safe HTML; ``html``: the value (strings as
    they are, anything else as JSON, ``is_json``), visible-safe HTML, cut to ``shown`` of
    its ``length`` characters when ``cut``; ``hidden``: the whole value (or its name) holds
    hidden characters, shown or not."""

    label: SafeString
    html: SafeString
    is_json: bool
    length: int
    shown: int
    cut: bool
    hidden: bool

    @property
    def length_text(self) -> str:
        return plural(self.length, "character")

    @property
    def shown_text(self) -> str:
        return f"{self.shown:,}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalShown:
    """What a reviewer reads on one card: ``headline`` (tool → target), ``arguments`` (every
    leaf, see ShownArgument), ``total_chars`` (of all argument text), ``cut`` (some argument
    is not shown whole: the card links to ``full_url``), ``hidden`` (anything shown holds
    hidden characters: the card warns with ``warning``), and the other free texts a
    reviewer reads (reason, workspace, session title, decision reason, the tool's name, the
    requester's and decider's usernames), each visible-safe HTML. Tool names are limited to
    [A-Za-z0-9_-] (agents/tools/mcp.py) and usernames by Django's validator, and titles are
    stored escaped (sessions/visible.py VisibleCharField); they go through visible_html
    here too, so the card never depends on how a row was written."""

    headline: SafeString
    arguments: tuple[ShownArgument, ...]
    total_chars: int
    cut: bool
    hidden: bool
    full_url: str
    reason: SafeString
    workspace: SafeString
    session_title: SafeString
    decision_reason: SafeString
    tool_name: SafeString
    requester: SafeString
    decider: SafeString
    warning: str = HIDDEN_WARNING

    @property
    def total_text(self) -> str:
        """"9 characters": the argument text of the request, all arguments together."""
        return plural(self.total_chars, "character")

    @property
    def summary_text(self) -> str:
        """The arguments block's heading, "2 arguments, 9 characters" ("Arguments: 2, 9
        characters in all" read as a list of two numbers)."""
        return f"{plural(len(self.arguments), 'argument')}, {self.total_text}"


def _leaves(value, name: str = "") -> Iterator[tuple[str, str, bool]]:
    """(path, text, is_json) for every leaf of ``value``: strings as they are, numbers,
    booleans, null and empty containers as JSON; nested objects and lists walked."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, f"{name}.{key}" if name else str(key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, f"{name}[{index}]")
    elif isinstance(value, str):
        yield name or "arguments", value, False
    else:
        yield name or "arguments", json.dumps(value, ensure_ascii=False), True


def approval_headline(approval: ApprovalRequest) -> str:
    """"tool → target" (plain text, not escaped): the shell command for a command tool, the
    paths for a file tool (ApprovalRequest.command holds either), "Python code, N lines"
    for execute_code, else a pointer to the arguments (the stored command is then only the
    policy's "tool:name" or the arguments as JSON)."""
    args = approval.arguments if isinstance(approval.arguments, dict) else {}
    command = approval.command or ""
    if isinstance(args.get("command"), str):
        target = args["command"]
    elif isinstance(args.get("code"), str):
        target = f"Python code, {plural(args['code'].count(chr(10)) + 1, 'line')} (below)"
    elif command and not command.startswith("tool:") and not command.startswith("{"):
        target = command
    else:
        target = "see the arguments below"
    return f"{approval.tool_name} → {target}"


def approval_shown(approval: ApprovalRequest, *, limit: int | None = CARD_ARGUMENT_CHARS
                   ) -> ApprovalShown:
    """The reviewer's view of ``approval`` (ApprovalShown); ``limit``: characters of
    argument text shown in all (None: everything, the full view)."""
    budget = limit
    arguments = []
    total = 0
    for name, text, is_json in _leaves(approval.arguments):
        length = len(text)
        total += length
        shown = length if budget is None else min(length, budget)
        if budget is not None:
            budget -= shown
        arguments.append(ShownArgument(
            label=visible_html(name), html=visible_html(text[:shown]), is_json=is_json,
            length=length, shown=shown, cut=shown < length,
            hidden=has_hidden(text) or has_hidden(name)))
    headline = approval_headline(approval)
    title = approval.session.title if approval.session_id else ""
    texts = (headline, approval.reason, approval.workspace, title, approval.decision_reason,
             approval.tool_name)
    return ApprovalShown(
        headline=visible_html(headline), arguments=tuple(arguments), total_chars=total,
        cut=any(a.cut for a in arguments),
        hidden=any(a.hidden for a in arguments) or any(has_hidden(t) for t in texts),
        full_url=reverse("approval_arguments", args=[approval.pk]),
        reason=visible_html(approval.reason), workspace=visible_html(approval.workspace),
        session_title=visible_html(title), decision_reason=visible_html(approval.decision_reason),
        tool_name=visible_html(approval.tool_name),
        requester=visible_html(approval.requester.username if approval.requester_id else ""),
        decider=visible_html(approval.decider.username if approval.decider_id else ""))


def approval_card_context(approval: ApprovalRequest, user, *, error: str = "") -> dict:
    """Template context of approvals/card.html for ``user`` (what they may press, and what
    they read: ``shown``, an ApprovalShown)."""
    perms = approval_permissions(user=user, approval=approval)
    pending = approval.state == ApprovalRequest.State.PENDING
    return {"approval": approval, "perms": perms, "pending": pending,
            "can_decide": pending and (perms.can_approve or perms.can_deny),
            "shown": approval_shown(approval), "error": error}


def approval_card_html(approval: ApprovalRequest, user, *, request: HttpRequest | None = None,
                       csrf_token: str = "", error: str = "") -> str:
    """The rendered card (str). ``approval`` must already be visible to ``user`` (fetched
    through approvals.selectors). Pass ``request`` from a view, or ``csrf_token`` from a
    socket."""
    context = approval_card_context(approval, user, error=error)
    if request is None and csrf_token:
        context["csrf_token"] = csrf_token
    return render_to_string("approvals/card.html", context, request=request)


def approval_event_html(*, user, payload: dict, csrf_token: str = "") -> str:
    """The card for an approval.requested / approval.decided event payload, as ``user``
    sees it; "" when the user may not see that approval."""
    try:
        approval_id = int((payload.get("approval") or {}).get("id"))
        approval = approval_get(user=user, approval_id=approval_id)
    except (Http404, TypeError, ValueError):
        return ""
    return approval_card_html(approval, user, csrf_token=csrf_token)


def session_approval_states(session) -> dict[str, str]:
    """{tool_call_id: state} of every approval request of ``session`` (the latest per call
    wins), for the chat page's tool cards (sessions/hooks.py APPROVALS.states)."""
    return dict(ApprovalRequest.objects.filter(session=session).order_by("id")
                .values_list("tool_call_id", "state"))


def session_cards_html(session, user, request: HttpRequest | None = None) -> list[str]:
    """The pending approval cards of ``session`` as ``user`` sees them (chat page)."""
    return [approval_card_html(a, user, request=request) for a in
            ApprovalRequest.objects.filter(session=session, state=ApprovalRequest.State.PENDING)]
