"""Session and turn services: the only writers views, consumers and the CLI call.

Each is ``<entity>_<action>`` with keyword-only arguments (style.md §2.5). Writes that matter
run in one transaction; Celery work is enqueued on commit, so a rolled-back request never
starts a turn.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Membership
from sessions.events import event_append
from sessions.models import Message, Session, Turn
from sessions.steer import STEER, turn_running
from sessions.waits import WAITING_STATUSES, turn_ended, waits_cancel

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


def session_create(*, user, title: str = "", team=None) -> Session:
    """Create a session owned by ``user`` in their first team (if any), with a workspace
    holding a welcome README. Raises ValidationError for a title over 200 chars."""
    title = (title or "").strip() or DEFAULT_TITLE
    if len(title) > 200:
        raise ValidationError("A title can be at most 200 characters.")
    if team is None:
        membership = Membership.objects.filter(user=user).select_related("team").first()
        team = membership.team if membership else None
    provider, model = provider_default()
    with transaction.atomic():
        session = Session.objects.create(owner=user, team=team, title=title,
                                         provider=provider, model=model)
    readme = workspace_path(session) / "README.md"
    if not readme.exists():
        readme.write_text(WELCOME_README)
    return session


def session_rename(*, session: Session, title: str) -> Session:
    """Rename; raises ValidationError for an empty or over-long title."""
    title = (title or "").strip()
    if not title:
        raise ValidationError("A title cannot be empty.")
    if len(title) > 200:
        raise ValidationError("A title can be at most 200 characters.")
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
    from sessions.tasks import turn_run_task

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
            updates["title"] = " ".join(text.split())[:60]
        Session.objects.filter(pk=session.pk).update(**updates)
        event_append(session_id=session.pk, type="turn.queued",
                     payload={"turn_id": turn.pk, "text": text[:2000], "origin": origin})
        if "title" in updates:
            event_append(session_id=session.pk, type="session.updated",
                         payload={"title": updates["title"]})
        turn_run_task.delay_on_commit(session.pk)
    return turn


def turn_steer(*, session: Session, user, text: str) -> Turn:
    """Send ``text`` as a correction to the running turn (issue 12 item 4).

    Stored at once as a queued Turn of kind "steer" (a row: a worker kill loses nothing and
    the page shows it); the running turn lands it at its next safe point (agents/steer.py,
    sessions/steer.py). If no turn claims it before the running one ends, it runs as the next
    queued turn, in order. Same validation as turn_start; a slash command is refused (it is
    a command, not a correction). Raises ValidationError (nothing stored)."""
    from sessions.tasks import turn_run_task

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
            updates["title"] = " ".join(text.split())[:60]
        Session.objects.filter(pk=session.pk).update(**updates)
        event_append(session_id=session.pk, type="steer.queued",
                     payload={"turn_id": turn.pk, "text": text[:2000], "running": running})
        if "title" in updates:
            event_append(session_id=session.pk, type="session.updated",
                         payload={"title": updates["title"]})
        # Enqueued in any case: if the running turn ends first, this is the next turn.
        turn_run_task.delay_on_commit(session.pk)
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
    from sessions.tasks import turn_run_task

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
                turn_run_task.delay_on_commit(session.pk)
            return True
        active = Turn.objects.filter(session=session, status__in=[
            Turn.Status.RUNNING, Turn.Status.QUEUED]).exists()
        if active:
            Session.objects.filter(pk=session.pk).update(stop_requested=True)
    return active


def session_rewind(*, session: Session) -> int:
    """Take back the last exchange: the last live user message and everything after it
    become active=0, compacted=0 (gone from the model's view and from search). Refused
    (ValidationError) while a turn runs, waits or is queued, or while a worker holds the
    turn lease; the check and the write are one transaction holding the lineage row lock
    that every transcript writer takes, so no turn can start between them. Returns the
    number of rows rewound."""
    from sessions.leases import lease_live

    with transaction.atomic():
        _lock_lineage(session)
        if lease_live(session=session) or Turn.objects.filter(session=session, status__in=[
                Turn.Status.RUNNING, *WAITING_STATUSES, Turn.Status.QUEUED]).exists():
            raise ValidationError("Wait for the current turn to finish before rewinding.")
        last_user = (Message.objects.filter(session=session, active=True, role="user")
                     .exclude(kind="summary").order_by("-id").first())
        if last_user is None:
            raise ValidationError("There is nothing to rewind.")
        count = Message.objects.filter(session=session, active=True, id__gte=last_user.id).update(
            active=False, compacted=False)
        Session.objects.filter(pk=session.pk).update(
            transcript_version=F("transcript_version") + 1)
        event_append(session_id=session.pk, type="session.updated",
                     payload={"rewound_from": last_user.id, "count": count})
    return count
