"""The Workspace never lets a bare OSError out (agents/tools/workspace.py): a path the kernel
refuses (a name over 255 bytes, a loop of links, a file used as a directory) is a ToolError
naming the path as given, for every method and for the agent's file tools that share it
(run through dispatch's execute_call, as a turn runs them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.errors import ToolError
from agents.tools import ToolContext
from agents.tools.dispatch import execute_call
from agents.tools.files import ReadFile, WriteFile
from agents.tools.search import SearchFiles
from agents.tools.workspace import Workspace

LONG = "a" * 300
PATHS = {LONG: "too long", f"d/{LONG}": "too long", f"{LONG}/x": "too long",
         f"loop/{LONG}": "symbolic link", "f/x": "is a file, not a directory"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "f").write_text("x")
    os.symlink("loop", ws / "loop")
    return ws


def _calls(ws: Workspace, path: str):
    return {"lstat": lambda: ws.lstat(path), "read_bytes": lambda: ws.read_bytes(path),
            "open_file": lambda: os.close(ws.open_file(path)),
            "entries": lambda: ws.entries(path), "open_dir": lambda: os.close(ws.open_dir(path)),
            "write_bytes": lambda: ws.write_bytes(path, b"x"),
            "create_exclusive": lambda: ws.create_exclusive(path, "n", b"x"),
            "create_exclusive name": lambda: ws.create_exclusive("d", LONG, b"x")}


@pytest.mark.parametrize("path", PATHS)
def test_every_method_refuses_with_a_tool_error(root: Path, path: str) -> None:
    ws = Workspace(root)
    before = sorted(p.name for p in root.rglob("*"))
    for method, call in _calls(ws, path).items():
        try:
            call()
        except ToolError as exc:
            assert "Errno" not in str(exc), (method, str(exc))
        except OSError as exc:  # the defect: a bare OSError (a 500 in the files panel)
            pytest.fail(f"{method}({path[:20]}…) raised {exc!r}")
    assert sorted(p.name for p in root.rglob("*")) == before  # nothing written anywhere


def test_a_too_long_name_is_named_shortened(root: Path) -> None:
    with pytest.raises(ToolError) as info:
        Workspace(root).lstat(LONG)
    assert str(info.value) == (f"path '{'a' * 40}… (300 characters)' is too long: each name "
                               "in a path can be at most 255 bytes.")


@pytest.mark.parametrize("tool, args", [
    (ReadFile(), {"path": LONG}), (WriteFile(), {"path": f"d/{LONG}", "content": "x"}),
    (SearchFiles(), {"pattern": "x", "path": LONG}),
])
def test_file_tools_answer_the_reason(root: Path, tool, args) -> None:
    ctx = ToolContext(workspace=root, session_id="s1", user_id="u1")
    out = execute_call(tool, args, ctx)
    assert out.is_error and "too long" in out.text and "OSError" not in out.text, out.text
