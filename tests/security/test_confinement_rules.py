"""The pure part of the local backend's Landlock confinement (agents/backends/confine.py):
which paths get read rules so that a protected path under a system directory stays
unreadable (Landlock allows by hierarchy only)."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from agents.backends.confine import landlock_abi, process_entries, read_rule_paths

TREE = {"/": ["etc", "usr", "opt"], "/etc": ["passwd", "shadow", "ssl"],
        "/etc/ssl": ["certs", "private"], "/usr": ["bin", "lib"], "/opt": ["app", "tools"],
        "/opt/app": ["code", "data"]}
ALL = sorted({os.path.join(d, n) for d, names in TREE.items() for n in names})


def listdir(path: str) -> list[str]:
    return list(TREE.get(path, []))


def covered(path: str, rules: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in rules)


@given(roots=st.lists(st.sampled_from(["/etc", "/usr", "/opt", "/"]), min_size=1),
       excluded=st.lists(st.sampled_from(ALL), max_size=4))
def test_every_path_under_a_root_is_readable_unless_excluded(roots, excluded):
    rules = read_rule_paths(roots, excluded, listdir=listdir)
    for path in ALL:
        under_root = any(covered(path, [r]) for r in roots)
        banned = any(covered(path, [e]) for e in excluded)
        if banned:
            assert not covered(path, rules), (path, rules)
        elif under_root and not any(covered(e, [path]) for e in excluded):
            assert covered(path, rules), (path, rules)
    assert rules == sorted(set(rules))


def test_a_protected_app_under_opt_splits_opt():
    rules = read_rule_paths(["/opt", "/etc"], ["/opt/app/data", "/etc/shadow"],
                            listdir=listdir)
    assert rules == ["/etc/passwd", "/etc/ssl", "/opt/app/code", "/opt/tools"]


def test_process_entries_cover_every_pid_and_self():
    entries = process_entries()
    assert f"/proc/{os.getpid()}" in entries and "/proc/self" in entries
    assert "/proc/cpuinfo" not in entries


def test_landlock_detection_is_an_abi_number():
    abi = landlock_abi()
    assert isinstance(abi, int) and abi >= 0
