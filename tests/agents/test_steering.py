"""agents/tools/steering.py: what steers a later session is put back exactly as it was,
whatever a command did to it (a property over random changes), and nothing else moves."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.backends import CommandResult
from agents.tools.steering import (MAX_ENTRIES, TooLarge, run_guarded, steering_changes,
                                   steering_snapshot)
from agents.tools.workspace import Workspace

GUARDED = ["AGENTS.md", "hermes.md", ".cursorrules", ".hermes/skills/a/SKILL.md",
           ".hermes/skills/a/notes.txt", ".hermes/skills/b.md", ".git/hooks/pre-commit"]


def seed(root: Path) -> None:
    (root / ".git/hooks").mkdir(parents=True)
    (root / ".git/config").write_text("[core]\n")
    (root / ".hermes/skills/a").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Be careful.\n")
    (root / ".hermes/skills/a/SKILL.md").write_text("---\nname: a\n---\nDo a.\n")
    (root / "src").mkdir()
    (root / "src/main.py").write_text("print(1)\n")


def mutate(root: Path, op: str, path: str) -> None:
    target = root / path
    if op == "write":
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.is_symlink():
            target.unlink()
        target.write_text(f"evil {path}\n")
    elif op == "delete":
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
    elif op == "link":
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        target.symlink_to("/etc/passwd")
    elif op == "chmod" and target.is_file() and not target.is_symlink():
        target.chmod(0o777)
    elif op == "swap-dir":  # the skills dir becomes a link to a tree elsewhere
        skills = root / ".hermes/skills"
        if skills.is_symlink():
            skills.unlink()
        shutil.rmtree(skills, ignore_errors=True)
        (root / "elsewhere").mkdir(exist_ok=True)
        skills.symlink_to(root / "elsewhere")


ops = st.lists(st.tuples(st.sampled_from(["write", "delete", "link", "chmod", "swap-dir"]),
                         st.sampled_from(GUARDED)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=ops)
def test_any_change_to_the_steering_files_is_undone_exactly(tmp_path_factory, changes):
    root = tmp_path_factory.mktemp("ws")
    seed(root)
    ws = Workspace(root)
    before = steering_snapshot(ws)

    def command() -> CommandResult:
        for op, path in changes:
            mutate(root, op, path)
        (root / "src/out.txt").write_text("kept\n")  # ordinary work is not touched
        return CommandResult(exit_code=0, output="")

    run_guarded(ws, command, sanctioned=False)
    assert steering_snapshot(ws) == before
    assert steering_changes(before, steering_snapshot(ws)) == []
    assert (root / "src/out.txt").read_text() == "kept\n"
    assert (root / ".git/config").read_text() == "[core]\n"


def test_a_sanctioned_command_keeps_its_change(tmp_path):
    seed(tmp_path)
    ws = Workspace(tmp_path)
    _, undone = run_guarded(ws, lambda: (tmp_path / "AGENTS.md").write_text("New rules.\n"),
                            sanctioned=True)
    assert undone == [] and (tmp_path / "AGENTS.md").read_text() == "New rules.\n"


def test_a_new_repository_and_a_removed_one_are_not_undone(tmp_path):
    ws = Workspace(tmp_path)

    def git_init() -> None:
        (tmp_path / ".git/hooks").mkdir(parents=True)
        (tmp_path / ".git/hooks/pre-commit.sample").write_text("#!/bin/sh\n")

    assert run_guarded(ws, git_init, sanctioned=False)[1] == []
    assert run_guarded(ws, lambda: shutil.rmtree(tmp_path / ".git"), sanctioned=False)[1] == []
    assert not (tmp_path / ".git").exists()


def test_too_many_skills_to_record_refuses_before_running(tmp_path):
    skills = tmp_path / ".hermes/skills"
    skills.mkdir(parents=True)
    for i in range(MAX_ENTRIES + 1):
        (skills / f"s{i}").write_text("x")
    ran = []
    with pytest.raises(TooLarge, match="could not be guarded"):
        run_guarded(Workspace(tmp_path), lambda: ran.append(1), sanctioned=False)
    assert ran == []


def test_growing_past_the_caps_during_a_command_still_rebuilds_the_tree(tmp_path):
    seed(tmp_path)
    ws = Workspace(tmp_path)
    before = steering_snapshot(ws)

    def flood() -> None:
        for i in range(MAX_ENTRIES + 5):
            (tmp_path / f".hermes/skills/f{i}").write_text("x")

    _, undone = run_guarded(ws, flood, sanctioned=False)
    assert ".hermes/skills" in undone and steering_snapshot(ws) == before
    assert sorted(os.listdir(tmp_path / ".hermes/skills")) == ["a"]
