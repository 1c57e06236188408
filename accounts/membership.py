"""People and teams without the Django admin (issue 14 item 7): services and selectors.

Team admins invite existing users to their team (the user accepts or declines on their
Settings page; staff add directly), set roles and remove members; staff create users and
teams. Every write is one transaction with an AuditEntry ("team.member_add",
"team.member_role", "team.member_remove", "team.member_invite", "team.invite_accept",
"team.invite_decline", "user.create", "team.create"). A team always
keeps at least one admin: demoting or removing the last one is refused. Who may act is
checked here (team_get_for_manager: a team's admins and staff, Http404 for anyone else; staff_check: Http404 for a
non-staff user, so the pages' existence is not revealed).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet, Value
from django.db.models.functions import Lower
from django.http import Http404

from accounts.models import Membership, Team, TeamInvitation
from accounts.services import team_get_for_manager
from approvals.models import AuditEntry
from sessions.models import Session
from sessions.visible import visible_line

ROLES = {Membership.Role.MEMBER.value, Membership.Role.ADMIN.value}


def staff_check(*, user) -> None:
    """Http404 unless ``user`` is signed-in staff."""
    if not (user.is_authenticated and user.is_staff):
        raise Http404("Not found")


def team_members(*, team: Team) -> QuerySet[Membership]:
    """The team's memberships with their users, admins first, then by username."""
    return (Membership.objects.filter(team=team).select_related("user")
            .order_by("role", "user__username"))


def team_sessions(*, team: Team, limit: int = 50) -> QuerySet[Session]:
    """The team's top-level sessions, newest activity first (a team admin reads them)."""
    return (Session.objects.filter(team=team, parent__isnull=True).select_related("owner")
            .order_by("-last_activity_at")[:limit])


def _role(role: str) -> str:
    if role not in ROLES:
        raise ValidationError(f"A role is “member” or “admin”, not “{role}”.")
    return role


def _audit(actor, action: str, **detail) -> None:
    AuditEntry.objects.create(actor=actor, action=action, detail=detail)


def team_member_add(*, actor, team_id: int, username: str, role: str = "member"
                    ) -> Membership | TeamInvitation:
    """Staff: add the existing user ``username`` to the team with ``role`` (a Membership).
    A team admin who is not staff: invite them (a TeamInvitation they accept or decline on
    their Settings page; nothing is granted until then). Http404 unless ``actor`` is an
    admin of the team; ValidationError for an unknown user, a bad role, someone already in
    the team or already invited. Staff may add to any team."""
    team = team_get_for_manager(user=actor, team_id=team_id)
    role = _role(role)
    user = get_user_model().objects.filter(username=(username or "").strip()).first()
    if user is None:
        raise ValidationError(f"No user is called “{(username or '').strip()}”. Staff can "
                              "create users on the People page.")
    if Membership.objects.filter(user=user, team=team).exists():
        raise ValidationError(f"{user.username} is already in {team.name}.")
    try:
        with transaction.atomic():
            if actor.is_staff:
                row = Membership.objects.create(user=user, team=team, role=role)
                TeamInvitation.objects.filter(user=user, team=team).delete()
                _audit(actor, "team.member_add", team_id=team.pk, user=user.username,
                       role=role)
            else:
                row = TeamInvitation.objects.create(user=user, team=team, role=role,
                                                    invited_by=actor)
                _audit(actor, "team.member_invite", team_id=team.pk, user=user.username,
                       role=role)
    except IntegrityError:
        raise ValidationError(f"{user.username} is already in {team.name} or invited to "
                              "it.") from None
    return row


def invitations_for(*, user) -> QuerySet[TeamInvitation]:
    """The invitations waiting for ``user``'s answer, oldest first."""
    return (TeamInvitation.objects.filter(user=user).select_related("team", "invited_by")
            .order_by("id"))


def team_invitations(*, team: Team) -> QuerySet[TeamInvitation]:
    """The team's invitations nobody has answered yet (shown to its admins)."""
    return TeamInvitation.objects.filter(team=team).select_related("user").order_by("id")


def invitation_answer(*, user, invitation_id: int, accept: bool) -> Team:
    """``user`` accepts (a Membership with the invited role) or declines one of their own
    invitations; either way it is gone. Http404 for an invitation that is not theirs or no
    longer exists (another user's ids reveal nothing). Returns the team."""
    with transaction.atomic():
        invitation = (TeamInvitation.objects.select_for_update().select_related("team")
                      .filter(pk=invitation_id, user=user).first())
        if invitation is None:
            raise Http404("No such invitation")
        team = invitation.team
        if accept:
            Membership.objects.get_or_create(user=user, team=team,
                                             defaults={"role": invitation.role})
        invitation.delete()
        _audit(user, "team.invite_accept" if accept else "team.invite_decline",
               team_id=team.pk, user=user.username, role=invitation.role)
    return team


def _membership_locked(team: Team, user_id: int) -> Membership:
    membership = (Membership.objects.select_for_update().filter(team=team, user_id=user_id)
                  .select_related("user").first())
    if membership is None:
        raise ValidationError("That person is not in this team.")
    return membership


def _keep_an_admin(team: Team, membership: Membership, action: str) -> None:
    admins = list(Membership.objects.select_for_update().filter(
        team=team, role=Membership.Role.ADMIN).values_list("pk", flat=True))
    if admins == [membership.pk]:
        raise ValidationError(f"{membership.user.username} is the team's only admin; make "
                              f"someone else an admin before {action}.")


def team_member_role_set(*, actor, team_id: int, user_id: int, role: str) -> Membership:
    """Set a member's role. Http404 unless ``actor`` administers the team or is staff;
    ValidationError for a bad role, a non-member, or demoting the last admin."""
    team = team_get_for_manager(user=actor, team_id=team_id)
    role = _role(role)
    with transaction.atomic():
        membership = _membership_locked(team, user_id)
        if membership.role == role:
            return membership
        if role == Membership.Role.MEMBER:
            _keep_an_admin(team, membership, "changing this role")
        membership.role = role
        membership.save(update_fields=["role"])
        _audit(actor, "team.member_role", team_id=team.pk, user=membership.user.username,
               role=role)
    return membership


def team_member_remove(*, actor, team_id: int, user_id: int) -> None:
    """Remove a member from the team (their sessions stay theirs). Http404 unless ``actor``
    administers the team or is staff; ValidationError for a non-member or the last admin."""
    team = team_get_for_manager(user=actor, team_id=team_id)
    with transaction.atomic():
        membership = _membership_locked(team, user_id)
        if membership.role == Membership.Role.ADMIN:
            _keep_an_admin(team, membership, "removing them")
        membership.delete()
        _audit(actor, "team.member_remove", team_id=team.pk, user=membership.user.username)


def user_create(*, actor, username: str, password: str, team_id: int | None = None,
                role: str = "member", is_staff: bool = False):
    """Create a user (staff only: Http404 otherwise), optionally in a team with ``role``.
    The caller validated the username and password (Django's UserCreationForm runs the
    password validators); ValidationError for a taken username or an unknown team."""
    staff_check(user=actor)
    role = _role(role)
    User = get_user_model()
    with transaction.atomic():
        if User.objects.filter(username=username).exists():
            raise ValidationError(f"The username “{username}” is taken.")
        team = None
        if team_id is not None:
            team = Team.objects.filter(pk=team_id).first()
            if team is None:
                raise ValidationError("No such team.")
        user = User.objects.create_user(username=username, password=password,
                                        is_staff=is_staff)
        if team is not None:
            Membership.objects.create(user=user, team=team, role=role)
        _audit(actor, "user.create", user=username, team_id=team_id, role=role,
               is_staff=is_staff)
    return user


def team_name_taken(name: str) -> str:
    """The name of an existing team that ``name`` matches regardless of case, as stored
    ("" when none). ``name`` is compared as it would be stored (sessions/visible.py
    visible_line), with the database's lower(), as the constraint in Team.Meta is; a rename
    in the Django admin is held by that constraint's own message."""
    stored = visible_line(name.strip(), Team._meta.get_field("name").max_length)
    rows = Team.objects.annotate(lower_name=Lower("name")).filter(
        lower_name=Lower(Value(stored)))
    return rows.values_list("name", flat=True).first() or ""


def team_create(*, actor, name: str, admin_username: str = "") -> Team:
    """Create a team (staff only: Http404 otherwise) with an optional first admin.
    ValidationError for an empty, over-long (100) or taken name, or an unknown user."""
    staff_check(user=actor)
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise ValidationError("A team name is 1 to 100 characters.")
    admin = None
    if admin_username.strip():
        admin = get_user_model().objects.filter(username=admin_username.strip()).first()
        if admin is None:
            raise ValidationError(f"No user is called “{admin_username.strip()}”.")
    taken = team_name_taken(name)
    if taken:
        raise ValidationError(f"A team called “{taken}” exists already; team names must "
                              "differ by more than upper and lower case.")
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name)
            if admin is not None:
                Membership.objects.create(user=admin, team=team, role=Membership.Role.ADMIN)
            _audit(actor, "team.create", team_id=team.pk, team=name,
                   admin=admin.username if admin else None)
    except IntegrityError:
        raise ValidationError(f"A team called “{name}” exists already.") from None
    return team
