"""Close a user's open chat sockets when the login they were opened with ends (issue 8,
finding 11): the websocket's user is fixed at connect, so every way a login ends must reach
the sockets. Each socket also re-validates its login on every frame that acts
(sessions/consumers.py), which covers what no signal sees (a session row removed with raw
SQL, expiry between frames): these receivers make the close prompt, the re-check makes it
certain.

- logout by any path (our logout view, the admin's, a test client): ``user_logged_out`` →
  "force.close" to the sockets of that login (its session key), not to the user's other
  browsers;
- the session row deleted (clearsessions, the admin, ``Session.objects.filter().delete()``,
  ``cycle_key`` after a password change): ``post_delete`` → "force.close" to that login;
- the user row saved (password changed, so the session auth hash no longer matches; the
  account deactivated): "session.check" to all the user's sockets, each re-validating its
  own login and closing if it no longer authenticates;
- a team membership saved or deleted (an admin removed or demoted, a team deleted):
  "session.check" too, each socket re-checking that its user may still read its session.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.contrib.sessions.models import Session as LoginSession
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from sessions.events import group_publish, user_group


def login_group(session_key: str) -> str:
    """The channel-layer group of every socket opened with one Django session (a hash of
    the key: the key itself is a credential and must not appear in Redis key names)."""
    return "login_" + hashlib.sha256(session_key.encode()).hexdigest()[:40]


@receiver(user_logged_out, dispatch_uid="hermes-close-sockets-on-logout")
def sockets_close_on_logout(sender, request, user, **kwargs) -> None:
    """Any logout: close the sockets of the login that ended (sent before the flush)."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        group_publish(login_group(key), {}, kind="force.close")


@receiver(post_delete, sender=LoginSession, dispatch_uid="hermes-close-sockets-on-delete")
def sockets_close_on_session_delete(sender, instance, **kwargs) -> None:
    """A deleted session row (expired ones removed by clearsessions included)."""
    key = instance.session_key
    transaction.on_commit(lambda: group_publish(login_group(key), {}, kind="force.close"))


@receiver(post_save, sender=settings.AUTH_USER_MODEL,
          dispatch_uid="hermes-check-sockets-on-user-save")
def sockets_check_on_user_save(sender, instance, update_fields=None, **kwargs) -> None:
    """A saved user (a new password, is_active off): every socket of theirs re-checks its
    login after commit. A login's own ``last_login`` update is skipped (it changes nothing
    a socket depends on, and happens on every login)."""
    if kwargs.get("created") or (update_fields and set(update_fields) == {"last_login"}):
        return
    user_id = instance.pk
    transaction.on_commit(lambda: group_publish(user_group(user_id), {}, kind="session.check"))


# By label, not by import: accounts/ sits above sessions/ (docs/architecture.md).
@receiver(post_save, sender="accounts.Membership",
          dispatch_uid="hermes-check-sockets-on-membership-save")
@receiver(post_delete, sender="accounts.Membership",
          dispatch_uid="hermes-check-sockets-on-membership-delete")
def sockets_check_on_membership_change(sender, instance, **kwargs) -> None:
    """A membership changed: what its user may read changed; their sockets re-check."""
    user_id = instance.user_id
    transaction.on_commit(lambda: group_publish(user_group(user_id), {}, kind="session.check"))
