"""search_files over a real workspace (issue 2 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.errors import ToolError
from agents.tools import ToolContext
from agents.tools.search import MAX_HITS, SearchFiles


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("import os\ndef handler():\n    return os.sep\n")
    (ws / "src" / "main.py").write_text("from pkg.mod import handler\nhandler()\n")
    (ws / "README.md").write_text("# Demo\nCall handler() to start.\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("handler in git\n")
    (ws / "logo.png").write_bytes(b"\x89PNG\x00handler\x00")
    return ToolContext(workspace=ws)


def test_hits_are_path_line_text_in_sorted_order(ctx: ToolContext) -> None:
    out = SearchFiles().run({"pattern": r"handler\("}, ctx)
    assert out.text.splitlines() == [
        "README.md:2: Call handler() to start.",
        "src/main.py:2: handler()",
        "src/pkg/mod.py:2: def handler():",
    ]


def test_skips_git_and_binary_files(ctx: ToolContext) -> None:
    text = SearchFiles().run({"pattern": "handler"}, ctx).text
    assert ".git" not in text and "logo.png" not in text


def test_path_and_glob_narrow_the_search(ctx: ToolContext) -> None:
    assert SearchFiles().run({"pattern": "handler", "path": "src/pkg"}, ctx).text == \
        "src/pkg/mod.py:2: def handler():"
    text = SearchFiles().run({"pattern": "handler", "glob": "*.md"}, ctx).text
    assert text == "README.md:2: Call handler() to start."
    one_file = SearchFiles().run({"pattern": "os", "path": "src/pkg/mod.py"}, ctx).text
    assert one_file.splitlines()[0] == "src/pkg/mod.py:1: import os"


def test_no_match_says_so(ctx: ToolContext) -> None:
    out = SearchFiles().run({"pattern": "zebra"}, ctx)
    assert out.text.startswith("no matches for 'zebra'") and not out.is_error


def test_invalid_regex_is_a_tool_error(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="invalid regular expression"):
        SearchFiles().run({"pattern": "(unclosed"}, ctx)


def test_hits_are_capped_with_a_note(ctx: ToolContext) -> None:
    (ctx.workspace / "many.txt").write_text("hit\n" * (MAX_HITS + 50))
    out = SearchFiles().run({"pattern": "hit", "path": "many.txt"}, ctx)
    lines = out.text.splitlines()
    assert len(lines) == MAX_HITS + 1 and lines[-1].startswith(f"[stopped at {MAX_HITS}")


def test_search_outside_workspace_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="outside the session workspace"):
        SearchFiles().run({"pattern": "root", "path": "/etc"}, ctx)


def test_symlink_to_an_outside_file_is_not_searched(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("handler secret\n")
    (ctx.workspace / "leak.txt").symlink_to(tmp_path / "secret.txt")
    assert "secret" not in SearchFiles().run({"pattern": "handler"}, ctx).text


def test_spill_dir_is_skipped_unless_searched_directly(ctx: ToolContext) -> None:
    assert ctx.spill_dir is not None
    ctx.spill_dir.mkdir(parents=True)
    (ctx.spill_dir / "call_1.txt").write_text("handler echoed\n")
    assert "echoed" not in SearchFiles().run({"pattern": "handler"}, ctx).text
    direct = SearchFiles().run({"pattern": "handler", "path": ".hermes/spill/call_1.txt"}, ctx)
    assert direct.text == ".hermes/spill/call_1.txt:1: handler echoed"


def test_search_reserves_its_root_as_reader(ctx: ToolContext) -> None:
    assert SearchFiles().paths({"pattern": "x"}, ctx) == [(ctx.workspace, "read")]
