"""read_file, write_file and patch on real files (issue 2 item 7; hermes-facts §17 fixtures)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.errors import ToolError
from agents.tools.workspace import Workspace
from agents.tools import ToolContext
from agents.tools.files import READ_MAX_CHARS, Patch, ReadFile, WriteFile


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(workspace=ws, session_id="s1", user_id="u1")


def lines_file(ctx: ToolContext, name: str, count: int) -> Path:
    path = ctx.workspace / name
    path.write_text("".join(f"line {i}\n" for i in range(1, count + 1)))
    return path


def test_read_file_numbers_lines(ctx: ToolContext) -> None:
    lines_file(ctx, "a.txt", 3)
    out = ReadFile().run({"path": "a.txt"}, ctx)
    assert out.text == "     1\tline 1\n     2\tline 2\n     3\tline 3"
    assert not out.is_error


def test_read_file_pages_with_offset_and_limit_and_says_how_to_continue(ctx: ToolContext) -> None:
    lines_file(ctx, "big.txt", 1200)
    first = ReadFile().run({"path": "big.txt"}, ctx).text.splitlines()
    assert first[0] == "     1\tline 1" and first[499] == "   500\tline 500"
    assert first[-1] == ('[showing lines 1-500 of 1200 in big.txt; continue with '
                         'read_file(path="big.txt", offset=501)]')
    page = ReadFile().run({"path": "big.txt", "offset": 700, "limit": 50}, ctx).text.splitlines()
    assert page[0] == "   700\tline 700" and page[49] == "   749\tline 749"
    last = ReadFile().run({"path": "big.txt", "offset": 1101, "limit": 500}, ctx).text
    assert last.splitlines()[-1] == "  1200\tline 1200"
    assert "continue" not in last


def test_read_file_past_eof_is_an_error_naming_the_length(ctx: ToolContext) -> None:
    lines_file(ctx, "short.txt", 5)
    with pytest.raises(ToolError, match=r"offset 9 is past the end of 'short.txt' \(5 lines\)"):
        ReadFile().run({"path": "short.txt", "offset": 9}, ctx)


def test_read_empty_file(ctx: ToolContext) -> None:
    (ctx.workspace / "empty.txt").write_text("")
    assert ReadFile().run({"path": "empty.txt"}, ctx).text == "[empty.txt is empty: 0 lines]"


def test_read_file_refuses_binary_disguised_as_text(ctx: ToolContext) -> None:
    (ctx.workspace / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolError, match="'image.txt' is a binary file"):
        ReadFile().run({"path": "image.txt"}, ctx)


def test_read_file_refuses_fifo_without_blocking(ctx: ToolContext) -> None:
    os.mkfifo(ctx.workspace / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        ReadFile().run({"path": "pipe"}, ctx)


def test_read_directory_and_missing_file(ctx: ToolContext) -> None:
    (ctx.workspace / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        ReadFile().run({"path": "d"}, ctx)
    with pytest.raises(ToolError, match="does not exist"):
        ReadFile().run({"path": "nope.txt"}, ctx)


def test_minified_single_line_is_cut_and_output_bounded(ctx: ToolContext) -> None:
    (ctx.workspace / "min.js").write_text("x" * 600_000)
    text = ReadFile().run({"path": "min.js"}, ctx).text
    assert len(text) < 3_000
    assert "[line cut: 600000 chars" in text


def test_read_file_stops_at_its_char_cap_and_points_to_the_next_line(ctx: ToolContext) -> None:
    (ctx.workspace / "wide.txt").write_text(("y" * 1_500 + "\n") * 2_000)
    text = ReadFile().run({"path": "wide.txt", "limit": 2000}, ctx).text
    assert len(text) <= READ_MAX_CHARS + 2_000
    footer = text.splitlines()[-1]
    assert footer.startswith("[showing lines 1-") and "of 2000" in footer


def test_read_unicode_filename(ctx: ToolContext) -> None:
    (ctx.workspace / "naïve café.md").write_text("héllo\n")
    assert ReadFile().run({"path": "naïve café.md"}, ctx).text == "     1\théllo"


def test_read_through_symlink_escape_is_refused(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    (ctx.workspace / "link.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(ToolError, match="outside the session workspace"):
        ReadFile().run({"path": "link.txt"}, ctx)


def test_write_file_creates_parents_and_reports(ctx: ToolContext) -> None:
    out = WriteFile().run({"path": "deep/er/new.txt", "content": "a\nb\n"}, ctx)
    assert (ctx.workspace / "deep/er/new.txt").read_text() == "a\nb\n"
    assert out.text == "created deep/er/new.txt (4 chars, 2 lines)"
    again = WriteFile().run({"path": "deep/er/new.txt", "content": "c"}, ctx)
    assert again.text.startswith("replaced")
    assert (ctx.workspace / "deep/er/new.txt").read_text() == "c"


def test_counts_of_one_are_singular(ctx: ToolContext) -> None:
    """The tool card shows this text: "1 line", never "1 lines" (a fresh user's report)."""
    out = WriteFile().run({"path": "one.txt", "content": "c"}, ctx)
    assert out.text == "created one.txt (1 char, 1 line)"
    out = WriteFile().run({"path": "one.txt", "content": "hello\n"}, ctx)
    assert out.text == "replaced one.txt (6 chars, 1 line)"
    with pytest.raises(ToolError, match=r"past the end of 'one.txt' \(1 line\)$"):
        ReadFile().run({"path": "one.txt", "offset": 3}, ctx)


@pytest.mark.parametrize("path", ["../evil.txt", "/etc/evil.txt", "link/evil.txt"])
def test_write_outside_is_refused_and_nothing_is_written(ctx: ToolContext, tmp_path: Path,
                                                        path: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ctx.workspace / "link").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the session workspace"):
        WriteFile().run({"path": path, "content": "x"}, ctx)
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "evil.txt").exists()


def test_write_file_keeps_the_file_mode(ctx: ToolContext) -> None:
    script = ctx.workspace / "run.sh"
    script.write_text("echo a\n")
    script.chmod(0o755)
    WriteFile().run({"path": "run.sh", "content": "echo b\n"}, ctx)
    assert script.stat().st_mode & 0o777 == 0o755


def test_patch_replaces_a_unique_string(ctx: ToolContext) -> None:
    (ctx.workspace / "m.py").write_text("def f():\n    return 1\n")
    out = Patch().run({"path": "m.py", "old_string": "return 1", "new_string": "return 2"}, ctx)
    assert (ctx.workspace / "m.py").read_text() == "def f():\n    return 2\n"
    assert out.text == "patched m.py (1 replacement)"


def test_patch_refuses_ambiguous_match_unless_replace_all(ctx: ToolContext) -> None:
    path = ctx.workspace / "m.py"
    path.write_text("x = 1\ny = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times in m.py"):
        Patch().run({"path": "m.py", "old_string": "1", "new_string": "2"}, ctx)
    assert path.read_text() == "x = 1\ny = 1\n"
    out = Patch().run({"path": "m.py", "old_string": "1", "new_string": "2",
                       "replace_all": True}, ctx)
    assert path.read_text() == "x = 2\ny = 2\n" and "2 replacements" in out.text


def test_patch_missing_string_is_an_error(ctx: ToolContext) -> None:
    (ctx.workspace / "m.py").write_text("abc\n")
    with pytest.raises(ToolError, match="old_string not found in m.py"):
        Patch().run({"path": "m.py", "old_string": "zzz", "new_string": "y"}, ctx)


def test_multi_file_patch_is_all_or_nothing(ctx: ToolContext) -> None:
    a, b = ctx.workspace / "a.txt", ctx.workspace / "b.txt"
    a.write_text("alpha\n")
    b.write_text("beta\n")
    with pytest.raises(ToolError, match="edit 2: old_string not found in b.txt"):
        Patch().run({"edits": [
            {"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"},
            {"path": "b.txt", "old_string": "gamma", "new_string": "GAMMA"},
        ]}, ctx)
    assert a.read_text() == "alpha\n" and b.read_text() == "beta\n"
    out = Patch().run({"edits": [
        {"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"},
        {"path": "b.txt", "old_string": "beta", "new_string": "BETA"},
        {"path": "a.txt", "old_string": "ALPHA", "new_string": "omega"},
    ]}, ctx)
    assert a.read_text() == "omega\n" and b.read_text() == "BETA\n"
    assert out.text.splitlines() == ["patched a.txt (2 replacements)",
                                     "patched b.txt (1 replacement)"]


def test_multi_file_patch_rolls_back_when_a_write_fails(ctx: ToolContext) -> None:
    a = ctx.workspace / "a.txt"
    a.write_text("one\n")
    (ctx.workspace / "plain").write_text("a file, so nothing can be created below it")
    with pytest.raises(ToolError, match="no file was changed"):
        Patch._write_all(Workspace(ctx.workspace), {a: "ONE\n", ctx.workspace / "plain" / "b.txt": "TWO\n"},
                         {a: "one\n", ctx.workspace / "plain" / "b.txt": ""})
    assert a.read_text() == "one\n"


def test_patch_paths_are_writer_reservations(ctx: ToolContext) -> None:
    scope = Patch().paths({"edits": [{"path": "a", "old_string": "x", "new_string": "y"},
                                     {"path": "b/c", "old_string": "x", "new_string": "y"}]},
                          ctx)
    assert scope == [(ctx.workspace / "a", "write"), (ctx.workspace / "b/c", "write")]
    assert ReadFile().paths({"path": "a"}, ctx) == [(ctx.workspace / "a", "read")]
