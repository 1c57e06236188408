"""Acting identity in contextvars, carried explicitly across thread pools
(agents/identity.py; seed "What is not here: a sandbox", the two advisories)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from agents.identity import bind_identity, current_identity, submit_with_identity
from agents.policy import PolicyContext, check_command


def test_bind_sets_and_restores():
    assert current_identity() is None
    with bind_identity("s1", "u1") as outer:
        assert current_identity() == outer
        with bind_identity("s2", "u2"):
            assert current_identity().session_id == "s2"
        assert current_identity() == outer
    assert current_identity() is None


def test_empty_ids_are_refused():
    with pytest.raises(ValueError):
        with bind_identity("", "u1"):
            pass


def test_a_bare_submit_loses_the_identity_and_the_policy_then_denies(tmp_path):
    ctx = PolicyContext(session_id=None, user_id=None, workspace=str(tmp_path))
    with ThreadPoolExecutor(max_workers=1) as pool, bind_identity("s1", "u1"):
        bare = pool.submit(lambda: (current_identity(), check_command("ls", ctx).rule)).result()
        carried = submit_with_identity(
            pool, lambda: (current_identity(), check_command("ls", ctx).rule)).result()
    assert bare == (None, "missing_identity")
    assert carried[0].session_id == "s1" and carried[1] == "default_allow"


def test_two_sessions_interleaved_in_one_worker_pool_never_see_each_other():
    """Two sessions submit alternately into a shared pool; each task blocks on a barrier
    so tasks of both sessions are in flight together on the same threads."""
    barrier = threading.Barrier(4)
    seen: list[tuple[str, str, str]] = []
    lock = threading.Lock()

    def task(expected: str, step: int) -> None:
        before = current_identity()
        barrier.wait(timeout=10)
        after = current_identity()
        with lock:
            seen.append((expected, before.session_id, after.session_id))

    def session(sid: str, pool: ThreadPoolExecutor) -> list:
        with bind_identity(sid, f"user-{sid}"):
            return [submit_with_identity(pool, task, sid, i) for i in range(2)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = []
        for _ in range(3):
            futures += session("A", pool)
            futures += session("B", pool)
        for f in futures:
            f.result(timeout=20)
    assert len(seen) == 12
    assert all(expected == before == after for expected, before, after in seen)
    assert {e for e, _, _ in seen} == {"A", "B"}
