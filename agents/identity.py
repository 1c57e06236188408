"""Who is acting: the session and user behind the current tool call, as context-local state.

Approval decisions depend on identity. hermes first kept it in a process-global environment
variable, so with several sessions sharing a thread pool one session's cleanup could clobber
another's mid-run and drop it onto a branch that auto-approved; the fix (contextvars) then
leaked again wherever work crossed a bare thread boundary (seed "What is not here: a
sandbox"). Here identity lives in a ContextVar, is bound with ``bind_identity``, crosses
executors only through ``submit_with_identity`` (an explicit copy of the context), and its
absence means deny (agents/policy/__init__.py). Nothing here reads the environment or talks to Django;
the Celery task binds the identity it loaded from the database.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """The acting session and user (their database ids, as strings)."""

    session_id: str
    user_id: str


_IDENTITY: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "hermes_acting_identity", default=None)


@contextmanager
def bind_identity(session_id: str, user_id: str) -> Iterator[Identity]:
    """Bind the acting identity for the ``with`` block, restoring the previous one after.

    Raises ValueError for an empty id: binding "nobody" must not look like binding someone.
    """
    if not str(session_id).strip() or not str(user_id).strip():
        raise ValueError("session_id and user_id must be non-empty")
    identity = Identity(session_id=str(session_id), user_id=str(user_id))
    token = _IDENTITY.set(identity)
    try:
        yield identity
    finally:
        _IDENTITY.reset(token)


def current_identity() -> Identity | None:
    """The identity bound in this context, or None (which the policy treats as deny)."""
    return _IDENTITY.get()


def submit_with_identity(executor: Executor, fn: Callable[..., T], *args: Any,
                         **kwargs: Any) -> Future[T]:
    """``executor.submit`` that carries the caller's context (identity included) into the
    worker thread. A bare ``submit`` runs ``fn`` in the worker's own context, where the
    identity is whatever that thread last had, or nothing. Each call gets its own copy, so
    two sessions interleaved on one pool never see each other's identity."""
    context = contextvars.copy_context()
    return executor.submit(context.run, fn, *args, **kwargs)
