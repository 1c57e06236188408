"""Template context for every page: the session sidebar (lazy, sessions/selectors.py)."""

from __future__ import annotations

from django.http import HttpRequest

from sessions.selectors import Sidebar


def sidebar(request: HttpRequest) -> dict:
    """{"sidebar": Sidebar} for a signed-in user ({} otherwise). A view may pass its own
    ``sidebar`` (a filtered one), which takes precedence."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"sidebar": Sidebar(user=user)}
