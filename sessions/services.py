"""Session and turn services: the only writers views, consumers and the CLI call.

Each is ``<entity>_<action>`` with keyword-only arguments (style.md §2.5). Writes that matter
run in one transaction; Celery work is enqueued on commit, so a rolled-back request never
starts a turn.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from agents.errors import ToolError
from agents.tools.workspace import Workspace
from agents.tools.workspace_remove import tree_remove
from agents.wording import plural
from sessions.events import event_append, group_publish, session_group
from sessions.hooks import APPROVALS, DELETION_HOOKS, TEAMS
from sessions.leases import lease_live
from sessions.models import Message, Session, Turn, UsageRecord
from sessions.selectors import session_descendants
from sessions.steer import STEER, turn_running
from sessions.visible import visible_line
from sessions.waits import WAITING_STATUSES, turn_ended, turn_resume_on_commit, waits_cancel

log = logging.getLogger("hermes.sessions")

DEFAULT_TITLE = "New session"
WELCOME_README = """# Welcome to your Hermes workspace

This directory is the session's workspace: the agent's file and terminal tools run here and
cannot reach outside it. Ask the agent to list the files and read this README, to write a
file, to search, or to run a command.
"""


def workspace_path(session: Session) -> Path:
    """The session's workspace directory (created on demand). A child agent's session
    (``parent`` set) works in its top ancestor's workspace: it does part of that session's
    task on that session's files, and the parent can check what a child claims it wrote
    (issue 12: children use the same confined workspace and policy)."""
    pk, parent_id = session.pk, session.parent_id
    for _ in range(16):  # delegation depth is bounded far below this
        if parent_id is None:
            break
        pk = parent_id
        parent_id = Session.objects.filter(pk=pk).values_list("parent_id", flat=True).first()
    path = Path(settings.HERMES["WORKSPACE_ROOT"]) / str(pk)
    path.mkdir(parents=True, exist_ok=True)
    return path


def provider_default() -> tuple[str, str]:
    """(provider name, model) configured for new sessions (HERMES_PROVIDER / HERMES_MODEL)."""
    from agents.providers import resolve_profile

    profile = resolve_profile(settings.HERMES["PROVIDER"], model=settings.HERMES["MODEL"] or None)
    return profile.name, settings.HERMES["MODEL"] or profile.default_model


def provider_model(provider: str) -> str:
    """The model provider_choices() pairs with ``provider`` ("" when not configured)."""
    return next((m for name, m in provider_choices() if name == provider), "")


def session_create(*, user, title: str = "", team=None, provider: str = "",
                   model: str = "") -> Session:
    """Create a session owned by ``user`` in their first team (if any), with a workspace
    holding a welcome README. ``provider``/``model``: one of provider_choices() (default:
    the configured default). Raises ValidationError for a title over 200 chars or an
    unconfigured provider."""
    title = (title or "").strip() or DEFAULT_TITLE
    if len(title) > 200:
        raise ValidationError("A title can be at most 200 characters.")
    if team is None:
        team = TEAMS.team_default(user)
    provider, model = (check_provider(provider, model or provider_model(provider))
                       if provider else provider_default())
    with transaction.atomic():
        session = Session.objects.create(owner=user, team=team, title=title,
                                         provider=provider, model=model)
    readme = workspace_path(session) / "README.md"
    if not readme.exists():
        readme.write_text(WELCOME_README)
    return session


REUSE_CANDIDATES = 5
"""Newest empty sessions looked at (workspace included) before a new one is created."""


def session_create_or_reuse(*, user, provider: str = "") -> tuple[Session, bool]:
    """What "New session" does: the user's newest empty, untouched session of the same team,
    provider and model when there is one (returned with True, its ``last_activity_at``
    bumped so it heads the lists), else a new one (session_create, False).

    Empty and untouched: top level, not archived, not pinned, the default title, no message,
    turn, event or billed call ever (a rename, a model change or a turn appends one), nothing of another
    app pointing at it (a schedule or webhook: DELETION_HOOKS' describe), and a workspace
    holding at most the welcome README as written. The check and the create run under a
    lock of the user's row (on SQLite, the IMMEDIATE transaction), so two concurrent POSTs
    (a double click) give one session. Raises ValidationError for an unconfigured
    provider, before anything is looked at."""
    provider, model = (check_provider(provider, provider_model(provider)) if provider
                       else provider_default())
    team = TEAMS.team_default(user)
    with transaction.atomic():
        list(get_user_model().objects.select_for_update().filter(pk=user.pk)
             .values_list("pk", flat=True))
        candidates = (Session.objects.filter(
            owner=user, team=team, parent__isnull=True, archived=False, pinned=False,
            title=DEFAULT_TITLE, provider=provider, model=model, message_count=0,
            event_seq=0)
            .exclude(Exists(Turn.objects.filter(session=OuterRef("pk"))))
            .exclude(Exists(Message.objects.filter(session=OuterRef("pk"))))
            # a provider call billed to it (a summariser, a cut turn) touched it too
            .exclude(Exists(UsageRecord.objects.filter(session=OuterRef("pk"))))
            .order_by("-pk")[:REUSE_CANDIDATES])
        for session in candidates:
            if _untouched(session):
                Session.objects.filter(pk=session.pk).update(last_activity_at=timezone.now())
                return session, True
        return session_create(user=user, team=team, provider=provider, model=model), False


def _untouched(session: Session) -> bool:
    """No other app's row targets ``session`` and its workspace holds nothing but the
    welcome README as session_create wrote it (read through the confined Workspace)."""
    if any(hook.describe(session) for hook in DELETION_HOOKS):
        return False
    root = Path(settings.HERMES["WORKSPACE_ROOT"]) / str(session.pk)
    if root.is_symlink():  # not what session_create made
        return False
    if not root.exists():
        return True
    workspace = Workspace(root)
    try:
        names = [name for name, _ in workspace.entries(".")]
        if not set(names) <= {"README.md"}:
            return False
        return not names or workspace.read_bytes("README.md") == WELCOME_README.encode()
    except ToolError:  # a link, a directory or a second hard link named README.md
        return False


TITLE_FROM_MESSAGE_CHARS = 60
"""Length of the title a session takes from its first message."""


def title_from_message(text: str) -> str:
    """The title a first message gives its session: its words on one line, hidden and
    control characters as visible escapes (sessions/visible.py: the same text the column
    stores and the live ``session.updated`` event carries), at most
    TITLE_FROM_MESSAGE_CHARS characters."""
    return visible_line(" ".join(text.split()), TITLE_FROM_MESSAGE_CHARS)


def session_rename(*, session: Session, title: str) -> Session:
    """Rename; raises ValidationError for an empty or over-long title."""
    title = (title or "").strip()
    if not title:
        raise ValidationError("A title cannot be empty.")
    if len(title) > 200:
        raise ValidationError("A title can be at most 200 characters.")
    # Escaped here as the column stores it (VisibleCharField), so the live update carries
    # the same visible-safe text the pages show.
    title = visible_line(title, Session._meta.get_field("title").max_length)
    with transaction.atomic():
        Session.objects.filter(pk=session.pk).update(title=title)
        event_append(session_id=session.pk, type="session.updated", payload={"title": title})
    session.title = title
    return session


def session_archive(*, session: Session, archived: bool = True) -> Session:
    """Archive (hide from the list) or restore a session."""
    Session.objects.filter(pk=session.pk).update(archived=archived)
    session.archived = archived
    return session


def check_message_text(text: str) -> str:
    """Validate a chat message: not blank, at most HERMES["MAX_MESSAGE_CHARS"] characters
    (100,000). Returns the text unchanged; raises ValidationError with a readable reason."""
    if text is None or not text.strip():
        raise ValidationError("The message is empty.")
    limit = settings.HERMES["MAX_MESSAGE_CHARS"]
    if len(text) > limit:
        raise ValidationError(
            f"The message is {len(text):,} characters; the limit is {limit:,}. "
            "Attach large content as a file in the workspace instead.")
    return text


def turn_kind(text: str) -> str:
    """'compact', 'prune' or 'skill' for slash commands, '' for a chat message."""
    stripped = text.strip()
    if stripped in ("/compact", "/prune"):
        return stripped[1:]
    if stripped.startswith("/") and len(stripped) > 1 and not stripped.startswith("//"):
        return "skill"
    return ""


def turn_start(*, session: Session, user, text: str, origin: str = "") -> Turn:
    """Queue ``text`` as a turn of ``session`` and enqueue the worker on commit.

    The input is stored durably as a queued Turn; it becomes the user message when its turn
    begins, so a message sent while another turn runs is never lost and never runs
    concurrently. ``origin`` says who started it ('' a person; 'schedule' and 'webhook'
    turns are unattended and machine-built: sessions/inputs.py). Raises ValidationError
    (nothing stored) for bad input.
    """
    check_message_text(text)
    if session.owner_id != user.pk:
        raise ValidationError("Only the session's owner can send messages.")
    if session.parent_id is not None:
        raise ValidationError("A child agent's session is read-only: it works only on the "
                              "task its parent delegated.")
    with transaction.atomic():
        turn = Turn.objects.create(session=session, input_text=text, origin=origin,
                                   kind="" if origin else turn_kind(text))
        updates = {"last_activity_at": timezone.now()}
        if session.title == DEFAULT_TITLE and not turn.kind:
            updates["title"] = title_from_message(text)
        Session.objects.filter(pk=session.pk).update(**updates)
        event_append(session_id=session.pk, type="turn.queued",
                     payload={"turn_id": turn.pk, "text": text[:2000], "origin": origin})
        if "title" in updates:
            event_append(session_id=session.pk, type="session.updated",
                         payload={"title": updates["title"]})
        turn_resume_on_commit(session.pk)  # the worker task, on commit (waits.py)
    return turn


def turn_steer(*, session: Session, user, text: str) -> Turn:
    """Send ``text`` as a correction to the running turn (issue 12 item 4).

    Stored at once as a queued Turn of kind "steer" (a row: a worker kill loses nothing and
    the page shows it); the running turn lands it at its next safe point (agents/steer.py,
    sessions/steer.py). If no turn claims it before the running one ends, it runs as the next
    queued turn, in order. Same validation as turn_start; a slash command is refused (it is
    a command, not a correction). Raises ValidationError (nothing stored)."""
    check_message_text(text)
    if session.owner_id != user.pk:
        raise ValidationError("Only the session's owner can send messages.")
    if turn_kind(text):
        raise ValidationError("A slash command cannot be sent as a correction; send it as "
                              "a message instead.")
    with transaction.atomic():
        turn = Turn.objects.create(session=session, input_text=text, kind=STEER)
        running = turn_running(session=session)
        updates = {"last_activity_at": timezone.now()}
        if session.title == DEFAULT_TITLE:  # sent as the first message: it names the session
            updates["title"] = title_from_message(text)
        Session.objects.filter(pk=session.pk).update(**updates)
        event_append(session_id=session.pk, type="steer.queued",
                     payload={"turn_id": turn.pk, "text": text[:2000], "running": running})
        if "title" in updates:
            event_append(session_id=session.pk, type="session.updated",
                         payload={"title": updates["title"]})
        # Enqueued in any case: if the running turn ends first, this is the next turn.
        turn_resume_on_commit(session.pk)
    return turn


def _lock_lineage(session: Session) -> None:
    """Inside a transaction: lock the lineage root row, the row every transcript writer
    locks when it re-validates the turn lease (sessions/leases.py), so this service and a
    worker's write are serialised."""
    root = session.lineage_root_id or session.pk
    list(Session.objects.select_for_update().filter(pk=root).values_list("pk", flat=True))


WAIT_WORDS = {
    Turn.Status.AWAITING_APPROVAL: "waiting for approval",
    Turn.Status.AWAITING_CHILDREN: "waiting for its child agents",
    Turn.Status.AWAITING_ANSWER: "waiting for your answer",
}


def turn_stop(*, session: Session) -> bool:
    """Stop the session's turn. A running one is asked to stop (checked between stream
    chunks and tools). A waiting turn (approval, children, answer: sessions/waits.py) is
    cancelled here, with its open requests, in ONE transaction (issue 10 defect 2): the
    requests show as cancelled,
    expiry can no longer resume it, and queued messages behind it run next. Returns True if
    a turn was running, queued or waiting."""
    with transaction.atomic():
        _lock_lineage(session)
        waiting = list(Turn.objects.filter(session=session, status__in=WAITING_STATUSES))
        if waiting:
            waits_cancel(session)
            now = timezone.now()
            for turn in waiting:
                what = WAIT_WORDS.get(turn.status, "waiting")
                Turn.objects.filter(pk=turn.pk, status=turn.status).update(
                    status=Turn.Status.CANCELLED, finished_at=now,
                    error=f"stopped by the user while {what}")
                turn_ended(turn.pk)  # a stopped child still reports to its parent
                event_append(session_id=session.pk, type="turn.cancelled", payload={
                    "turn_id": turn.pk,
                    "reason": f"Stopped while {what}; nothing pending was run."})
            if Turn.objects.filter(session=session, status=Turn.Status.QUEUED).exists():
                turn_resume_on_commit(session.pk)  # the worker task, on commit (waits.py)
            return True
        active = Turn.objects.filter(session=session, status__in=[
            Turn.Status.RUNNING, Turn.Status.QUEUED]).exists()
        if active:
            Session.objects.filter(pk=session.pk).update(stop_requested=True)
    return active


BUSY_STATUSES = (Turn.Status.RUNNING, *WAITING_STATUSES, Turn.Status.QUEUED)
"""A turn in one of these holds the transcript: rewind, edit, regenerate and a model
change are refused until it ends (or is stopped)."""


def _refuse_while_busy(session: Session, action: str) -> None:
    """Inside a transaction holding the lineage lock: raise ValidationError("Wait for the
    current turn to finish before <action>.") while a turn runs, waits or is queued, or
    while a worker holds the turn lease."""
    from sessions.leases import lease_live

    if lease_live(session=session) or Turn.objects.filter(
            session=session, status__in=BUSY_STATUSES).exists():
        raise ValidationError(f"Wait for the current turn to finish (or stop it) before "
                              f"{action}.")


MESSAGE_NOT_FOUND = ("That message is not a live message of yours in this session (it may "
                     "have been rewound or summarised). Nothing was changed.")
"""The one answer for a message id that is not a number, does not exist, belongs to another
session or user, or was rewound: the same words for all, so an id never reveals that someone
else's message exists."""


def message_id_parse(raw) -> int:
    """A posted message id (str or int) as a positive int. Raises ValidationError
    (MESSAGE_NOT_FOUND) for anything else: empty, not digits, above a bigint."""
    text = str(raw if raw is not None else "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 18 or int(text) == 0:
        raise ValidationError(MESSAGE_NOT_FOUND)
    return int(text)


def _ineligible_reason(session: Session, message_id: int) -> str:
    """Why a message of ``session`` (a session the caller owns, so saying it exists leaks
    nothing) cannot be edited or rewound from; MESSAGE_NOT_FOUND when it is not a live
    message of this session at all."""
    row = (Message.objects.filter(session=session, pk=message_id, active=True)
           .values("role", "kind").first())
    if row is None:
        return MESSAGE_NOT_FOUND
    if row["kind"] in ("summary", "rolling_summary"):
        return ("A summary of earlier messages cannot be edited or rewound from; choose one "
                "of your messages. Nothing was changed.")
    who = "Hermes' reply" if row["role"] == "assistant" else f"a {row['role']} message"
    return (f"Only your own messages can be edited or rewound from; that one is {who}. "
            "Nothing was changed.")


def session_rewind(*, session: Session, message_id: int | None = None,
                   action: str = "rewinding") -> int:
    """Take back the last exchange: the last live user message and everything after it
    become active=0, compacted=0 (gone from the model's view and from search). With
    ``message_id`` (a live user message of this session, not a summary), rewind from that
    message instead (edit and re-run, issue 14 item 3). Refused (ValidationError, reason
    naming ``action``) while a turn runs, waits or is queued, or while a worker holds the
    turn lease; the check and the write are one transaction holding the lineage row lock
    that every transcript writer takes, so no turn can start between them. Returns the
    number of rows rewound."""
    with transaction.atomic():
        _lock_lineage(session)
        _refuse_while_busy(session, action)
        users = (Message.objects.filter(session=session, active=True, role="user")
                 .exclude(kind="summary"))
        if message_id is not None:
            first = users.filter(pk=message_id).first()
            if first is None:
                raise ValidationError(_ineligible_reason(session, message_id))
        else:
            first = users.order_by("-id").first()
        if first is None:
            raise ValidationError("There is nothing to rewind.")
        count = Message.objects.filter(session=session, active=True, id__gte=first.id).update(
            active=False, compacted=False)
        Session.objects.filter(pk=session.pk).update(
            transcript_version=F("transcript_version") + 1)
        event_append(session_id=session.pk, type="session.updated",
                     payload={"rewound_from": first.id, "count": count})
    return count


def message_edit(*, session: Session, user, message_id: int, text: str) -> Turn:
    """Edit a past user message and re-run from there: that message and everything after
    it are rewound (active=0, compacted=0, kept for the export), and ``text`` is queued as
    a new turn, in one transaction (nothing changes when the text is refused, the message
    is not a live user message, or a turn is busy: ValidationError with the reason)."""
    check_message_text(text)
    if session.owner_id != user.pk:
        raise ValidationError("Only the session's owner can edit messages.")
    with transaction.atomic():
        session_rewind(session=session, message_id=message_id, action="editing a message")
        return turn_start(session=session, user=user, text=text)


def turn_regenerate(*, session: Session, user) -> Turn:
    """Regenerate the last reply: the last live user message and its reply are rewound and
    the same text (as typed: ``content``) is queued again. ValidationError when there is
    no user message yet or a turn is busy."""
    last = (Message.objects.filter(session=session, active=True, role="user")
            .exclude(kind="summary").order_by("-id").first())
    if last is None:
        raise ValidationError("There is no reply to regenerate yet.")
    return message_edit(session=session, user=user, message_id=last.pk, text=last.content)


FORK_FIELDS = ("role", "content", "sent_content", "tool_calls", "tool_call_id", "tool_name",
               "is_error", "tool_meta", "reasoning", "stable_prefix_chars", "kind")
"""The Message fields a fork copies (ids, timestamps and flags are the new row's own)."""


def session_fork(*, session: Session, user, message_id: int) -> Session:
    """Fork ``session`` at one of its live messages into a new session of ``user`` (the
    owner): the live messages up to and including that one are copied (plus the tool
    results answering its tool calls, so the copy never ends on an unanswered call), with
    the same provider, model and team. The system prompt is not copied: it names the
    session, so the fork builds its own on its first turn. The workspace starts fresh.
    ValidationError when the message is not a live message of the session."""
    if session.owner_id != user.pk:
        raise ValidationError("Only the session's owner can fork it.")
    live = Message.objects.filter(session=session, active=True).order_by("id")
    at = live.filter(pk=message_id).first()
    if at is None:
        raise ValidationError(MESSAGE_NOT_FOUND)
    rows = list(live.filter(id__lte=at.id))
    call_ids = {c.get("id") for c in at.tool_calls or [] if isinstance(c, dict)}
    if call_ids:
        rows += [r for r in live.filter(id__gt=at.id, role="tool")
                 if r.tool_call_id in call_ids]
    title = f"Fork of {session.title}"[:200]
    with transaction.atomic():
        fork = session_create(user=user, title=title, team=session.team,
                              provider=session.provider, model=session.model)
        Message.objects.bulk_create([
            Message(session=fork, **{f: getattr(r, f) for f in FORK_FIELDS}) for r in rows])
        Session.objects.filter(pk=fork.pk).update(message_count=len(rows))
        event_append(session_id=fork.pk, type="session.updated", payload={
            "forked_from": session.pk, "at_message": at.pk, "count": len(rows)})
    return fork


def session_pin(*, session: Session, pinned: bool = True) -> Session:
    """Pin (shown first in the sidebar) or unpin a session."""
    Session.objects.filter(pk=session.pk).update(pinned=pinned)
    session.pinned = pinned
    return session


def provider_choices() -> list[tuple[str, str]]:
    """(provider profile name, model) pairs a session may use: the configured default, the
    fallbacks (HERMES_FALLBACK_PROVIDERS), every built-in profile with an API key or key pool
    configured, and both simulator profiles when the default is the simulator. The first is
    the default; no pair repeats."""
    from agents.providers import PROFILES

    hermes = settings.HERMES
    pairs = [provider_default()]
    for name, model in hermes["FALLBACK_PROVIDERS"]:
        if name in PROFILES:
            pairs.append((name, model or PROFILES[name].default_model))
    for profile in PROFILES.values():
        keyed = (profile.key_env and hermes["API_KEYS"].get(profile.key_env)) or \
            hermes["KEY_POOLS"].get(profile.name)
        simulated = profile.name.startswith("simulator") and \
            hermes["PROVIDER"].startswith("simulator")
        if keyed or simulated:
            pairs.append((profile.name, profile.default_model))
    return list(dict.fromkeys(pairs))


def check_provider(provider: str, model: str) -> tuple[str, str]:
    """``(provider, model)`` when it is one of provider_choices() (the model may be any
    non-empty id, at most 200 chars, for a configured provider); ValidationError otherwise."""
    provider, model = (provider or "").strip(), (model or "").strip()
    names = {name for name, _ in provider_choices()}
    if provider not in names:
        raise ValidationError(f"“{provider}” is not a configured provider; choose one of "
                              f"{', '.join(sorted(names))}.")
    if not model or len(model) > 200:
        raise ValidationError("A model id is 1 to 200 characters.")
    return provider, model


def session_model_set(*, session: Session, provider: str, model: str) -> Session:
    """Change the session's provider and model between turns. The system prompt names the
    model, so it is cleared and rebuilt on the next turn (one deliberate cache miss), and
    the calibration anchor (a count of another tokenizer's tokens) is dropped; an event says
    so in the chat. Refused (ValidationError) for an unconfigured provider or while a turn
    is busy. A no-op when nothing changes."""
    provider, model = check_provider(provider, model)
    if (provider, model) == (session.provider, session.model):
        return session
    with transaction.atomic():
        _lock_lineage(session)
        _refuse_while_busy(session, "changing the model")
        Session.objects.filter(pk=session.pk).update(
            provider=provider, model=model, system_prompt="", usage_anchor=None,
            transcript_version=F("transcript_version") + 1)
        event_append(session_id=session.pk, type="session.model_changed", payload={
            "provider": provider, "model": model, "previous": f"{session.provider} · "
            f"{session.model}", "text": f"Model changed from {session.provider} · "
            f"{session.model} to {provider} · {model}. The system prompt is rebuilt for the "
            "new model on the next turn, so that request starts without a warm cache."})
    session.provider, session.model, session.system_prompt = provider, model, ""
    return session


@dataclass(frozen=True)
class DeletionPreview:
    """What deleting a session would do, for the confirmation page: ``busy`` is the
    refusal (empty when it may be deleted now); the counts and ``effects`` (one sentence
    per schedule or webhook that targets it) say what goes and what is changed."""

    busy: str
    messages: int
    children: int
    effects: list[str]


DELETE_BUSY = ("This session has a turn running, queued or waiting (for an approval, an "
               "answer or its child agents). Stop it first, then delete the session.")
DELETE_CHILD = ("A child agent's session belongs to the session that delegated to it; it is "
                "deleted with that session.")
DELETE_GONE = "That session was already deleted."


DELETE_LEASE_WAIT_SECONDS = 5.0
"""How long a delete waits, holding no lock, for a worker that has no open turn left to let
go of the session's lease: it releases right after a turn's end (its re-check of the
queue), and a Delete pressed as the reply appears was refused as "busy" (seen in a
browser test on a loaded host)."""


def _delete_refusal(session: Session, family: list[int], *, lease: bool = True) -> str:
    """Why ``session`` cannot be deleted now ("" when it can): a child agent's session, or
    a turn of it or of one of its child agents running, queued or waiting, or (``lease``) a
    worker holding a turn lease of one of them."""
    if session.parent_id is not None:
        return DELETE_CHILD
    if Turn.objects.filter(session_id__in=family, status__in=BUSY_STATUSES).exists():
        return DELETE_BUSY
    if lease and _lease_held(family):
        return DELETE_BUSY
    return ""


def _lease_held(family: list[int]) -> bool:
    return any(lease_live(session=member) for member in Session.objects.filter(pk__in=family))


def _lease_settle(family: list[int]) -> None:
    """Wait up to DELETE_LEASE_WAIT_SECONDS, outside any transaction (the worker's release
    needs the row this delete will lock), while a worker holds the lease with no turn of the
    family open; the locked check that follows decides either way."""
    deadline = time.monotonic() + DELETE_LEASE_WAIT_SECONDS
    while (time.monotonic() < deadline and _lease_held(family) and not Turn.objects.filter(
            session_id__in=family, status__in=BUSY_STATUSES).exists()):
        time.sleep(0.1)


def session_delete_preview(*, session: Session) -> DeletionPreview:
    """What session_delete would do to ``session`` now (read-only)."""
    family = session_descendants(session.pk)
    return DeletionPreview(
        # A lease with no open turn is a worker finishing up: the delete waits it out.
        busy=_delete_refusal(session, family, lease=False),
        messages=Message.objects.filter(session=session).count(),
        children=len(family) - 1,
        effects=[line for hook in DELETION_HOOKS for line in hook.describe(session)])


def session_delete(*, session: Session, user) -> str:
    """Delete ``session`` (its owner, ``user``, asked): its messages, turns, events, child
    agents' sessions, approval requests (a pending one can no longer be decided), todo list
    and webhooks go; schedules that append to it are paused (DELETION_HOOKS); its usage
    rows stay, with ``session`` NULL, so /spend/ and every spend cap keep counting the
    money (they key on the row's user and team). An AuditEntry records who deleted what.

    Refused with ValidationError, nothing changed, for a child agent's session and while a
    turn of it (or of a child) runs, is queued or waits, or a worker holds its lease. The
    check and the delete are ONE transaction holding the lineage row lock every transcript
    writer takes, so no turn starts in between; a concurrent delete that won finds nothing
    (ValidationError DELETE_GONE). After commit: the workspace directory is removed
    without following links (agents/tools/workspace.py tree_remove) and the session's open
    sockets are told to re-check, so they close with "not available". Returns the title."""
    if session.owner_id != user.pk:
        raise ValidationError("Only the session's owner can delete it.")
    _lease_settle(session_descendants(session.pk))
    with transaction.atomic():
        _lock_lineage(session)
        current = Session.objects.filter(pk=session.pk).first()
        if current is None:
            raise ValidationError(DELETE_GONE)
        family = session_descendants(current.pk)
        refusal = _delete_refusal(current, family)
        if refusal:
            raise ValidationError(refusal)
        effects = [line for hook in DELETION_HOOKS for line in hook.describe(current)]
        for hook in DELETION_HOOKS:
            hook.detach(current)
        APPROVALS.audit(action="session.deleted", session=current, detail={
            "session_id": current.pk, "title": current.title, "owner_id": user.pk,
            "owner": user.get_username(), "deleted_by": user.get_username(),
            "messages": Message.objects.filter(session=current).count(),
            "children": len(family) - 1, "effects": effects})
        Session.objects.filter(pk__in=family).delete()
        root = Path(settings.HERMES["WORKSPACE_ROOT"])
        transaction.on_commit(lambda: _after_delete(root, current.pk, family))
    return current.title


def _after_delete(root: Path, session_id: int, family: list[int]) -> None:
    """After the delete committed: remove the workspace (children share the top session's)
    and make the sockets of every deleted session re-check (sessions/consumers.py
    session_check: the session is gone, so they close with 4404). A workspace that cannot
    be removed is logged; no session can reach it again (ids are never reused)."""
    try:
        if root.is_dir():
            tree_remove(root, str(session_id))
    except OSError:
        log.exception("session %s deleted, but its workspace %s could not be removed",
                      session_id, root / str(session_id))
    for member in family:
        group_publish(session_group(member), {}, kind="session.check")


def session_delete_summary(preview: DeletionPreview) -> str:
    """One line for the confirmation page: what goes with the session."""
    parts = [plural(preview.messages, "message")]
    if preview.children:
        parts.append(f"{plural(preview.children, 'child agent session')}")
    return ", ".join(parts)
