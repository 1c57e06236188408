"""People pages without the Django admin (issue 14 item 7): a team's members (its admins),
changing one's password (everyone), creating users and teams (staff). Each POST calls one
service in accounts/membership.py; a refusal is shown next to the form (status 400), never a 500.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_http_methods

from accounts.models import Membership, Team
from accounts.services import team_admin_of, team_get_for_manager
from accounts.membership import (invitation_answer, staff_check, team_create,
                                 team_invitations, team_member_add, team_member_remove,
                                 team_member_role_set, team_members, team_name_taken,
                                 team_sessions, user_create)

ROLE_CHOICES = Membership.Role.choices


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial="member", label="Role")


class UserCreateForm(UserCreationForm):
    """Django's user form (password validators, matching passwords) plus a team and role.
    Only validates: accounts/membership.py user_create writes."""

    team = forms.ModelChoiceField(queryset=Team.objects.order_by("name"), required=False,
                                  label="Team (optional)")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial="member", label="Role in the team")
    is_staff = forms.BooleanField(required=False, label="Staff (may create users and teams)")

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username",)


class TeamCreateForm(forms.Form):
    name = forms.CharField(max_length=100, label="Team name")
    admin_username = forms.CharField(max_length=150, required=False,
                                     label="First admin (username, optional)")

    def clean_name(self):
        """The name, refused when a team's name differs from it only by case."""
        name = self.cleaned_data["name"]
        taken = team_name_taken(name)
        if taken:
            raise forms.ValidationError(
                f"A team called “{taken}” exists already; team names must differ by more "
                "than upper and lower case.")
        return name


def _int(value: str) -> int | None:
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 19 \
        else None


@login_required
@require_http_methods(["GET", "POST"])
def team_members_view(request: HttpRequest, team_id: int) -> HttpResponse:
    """A team's members and sessions, for its admins and staff (404 for anyone else). POST
    ``action``: add (username, role), role (user_id, role) or remove (user_id). Staff
    outside the team manage its members; the sessions and the approval policy stay with its
    admins (those pages 404 for them), so they are not linked."""
    team = team_get_for_manager(user=request.user, team_id=team_id)
    add_form = MemberAddForm(request.POST if request.POST.get("action") == "add" else None)
    error, status = "", 200
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "add":
                if not add_form.is_valid():
                    raise ValidationError("Give a username and a role.")
                member = team_member_add(actor=request.user, team_id=team.pk,
                                         username=add_form.cleaned_data["username"],
                                         role=add_form.cleaned_data["role"])
                done = (f"Added {member.user.username} as {member.role}."
                        if isinstance(member, Membership) else
                        f"Invited {member.user.username} as {member.role}: they join when "
                        "they accept on their Settings page.")
            elif action == "role":
                member = team_member_role_set(actor=request.user, team_id=team.pk,
                                              user_id=_int(request.POST.get("user_id", "")),
                                              role=request.POST.get("role", ""))
                done = f"{member.user.username} is now {member.role}."
            elif action == "remove":
                team_member_remove(actor=request.user, team_id=team.pk,
                                   user_id=_int(request.POST.get("user_id", "")))
                done = "Removed from the team."
            else:
                raise ValidationError("Unknown action.")
        except ValidationError as exc:
            error, status = " ".join(exc.messages), 400
        else:
            messages.success(request, done)
            return redirect("team_members", team_id=team.pk)
    return render(request, "accounts/team_members.html", {
        "team": team, "members": team_members(team=team), "sessions": team_sessions(team=team),
        "invitations": team_invitations(team=team),
        "is_team_admin": team_admin_of(user=request.user, team=team),
        "add_form": add_form, "error": error, "roles": ROLE_CHOICES}, status=status)


@login_required
@require_http_methods(["POST"])
def invitation_answer_view(request: HttpRequest, invitation_id: int) -> HttpResponse:
    """POST ``answer`` accept|decline: the signed-in user answers one of their invitations
    (404 for anyone else's), then back to Settings with what happened."""
    answer = request.POST.get("answer")
    if answer not in ("accept", "decline"):
        messages.error(request, "Answer the invitation with Accept or Decline.")
        return redirect("settings")
    team = invitation_answer(user=request.user, invitation_id=invitation_id,
                             accept=answer == "accept")
    messages.success(request, f"You joined {team.name}." if answer == "accept"
                     else f"You declined the invitation to {team.name}.")
    return redirect("settings")


class PasswordChange(PasswordChangeView):
    """Django's password change (old password, validators, the session kept signed in);
    the user's other sockets are closed by sessions/signals.py on the password change."""

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("settings")

    def form_valid(self, form):
        messages.success(self.request, "Your password was changed.")
        return super().form_valid(form)


password_change_view = PasswordChange.as_view()


@login_required
@require_http_methods(["GET", "POST"])
def people_view(request: HttpRequest) -> HttpResponse:
    """Staff only (404 otherwise): every user and team; create a user or a team."""
    staff_check(user=request.user)
    action = request.POST.get("action")
    user_form = UserCreateForm(request.POST if action == "user" else None)
    team_form = TeamCreateForm(request.POST if action == "team" else None)
    status = 200
    if request.method == "POST":
        form = user_form if action == "user" else team_form
        if form.is_valid():
            data = form.cleaned_data
            try:
                if action == "user":
                    created = user_create(
                        actor=request.user, username=data["username"],
                        password=data["password1"],
                        team_id=data["team"].pk if data.get("team") else None,
                        role=data["role"], is_staff=data["is_staff"])
                    messages.success(request, f"Created user {created.username}.")
                else:
                    created = team_create(actor=request.user, name=data["name"],
                                          admin_username=data["admin_username"])
                    messages.success(request, f"Created team {created.name}.")
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                return redirect("people")
        status = 400
    users = get_user_model().objects.order_by("username").prefetch_related("memberships__team")
    return render(request, "accounts/people.html", {
        "user_form": user_form, "team_form": team_form, "users": users[:500],
        "teams": Team.objects.order_by("name")}, status=status)
