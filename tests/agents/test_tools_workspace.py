"""Path resolution inside the session workspace (issue 2 item 7; failure case B33)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.errors import ToolError
from agents.tools.workspace import display_path, overlaps, resolve_in_workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x = 1\n")
    return root


def test_relative_path_resolves_inside(ws: Path) -> None:
    assert resolve_in_workspace(ws, "src/a.py") == ws.resolve() / "src" / "a.py"


def test_absolute_path_inside_is_accepted(ws: Path) -> None:
    assert resolve_in_workspace(ws, str(ws / "src" / "a.py")) == ws.resolve() / "src/a.py"


def test_missing_file_resolves_for_creation(ws: Path) -> None:
    assert resolve_in_workspace(ws, "new/dir/f.txt") == ws.resolve() / "new/dir/f.txt"


def test_dotdot_that_stays_inside_is_fine(ws: Path) -> None:
    assert resolve_in_workspace(ws, "src/../src/a.py") == ws.resolve() / "src/a.py"


def test_tilde_means_the_workspace(ws: Path) -> None:
    assert resolve_in_workspace(ws, "~/src/a.py") == ws.resolve() / "src/a.py"


@pytest.mark.parametrize("path", ["../x", "../../etc/passwd", "/etc/passwd", "src/../../x", "/"])
def test_escape_is_refused_with_a_clear_message(ws: Path, path: str) -> None:
    with pytest.raises(ToolError) as info:
        resolve_in_workspace(ws, path)
    assert str(info.value) == f"path '{path}' is outside the session workspace"


def test_symlinked_file_pointing_outside_is_refused(ws: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("key")
    (ws / "notes").symlink_to(secret)
    with pytest.raises(ToolError, match="outside the session workspace"):
        resolve_in_workspace(ws, "notes")


def test_symlinked_directory_to_root_is_refused(ws: Path) -> None:
    (ws / "link").symlink_to("/")
    with pytest.raises(ToolError, match="outside"):
        resolve_in_workspace(ws, "link/tmp/evil")


def test_dangling_symlink_pointing_outside_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "newdir").symlink_to(tmp_path / "does-not-exist-yet")
    with pytest.raises(ToolError, match="outside"):
        resolve_in_workspace(ws, "newdir/x")


def test_symlink_inside_the_workspace_is_refused_too(ws: Path) -> None:
    """Issue 8 finding 1: no link is followed, even one pointing inside (the agent can
    retarget it between any check and the open)."""
    (ws / "alias").symlink_to(ws / "src")
    with pytest.raises(ToolError, match="symbolic link"):
        resolve_in_workspace(ws, "alias/a.py")


def test_opening_a_linked_directory_or_a_file_as_one_says_which(ws: Path) -> None:
    """Each refusal is its own sentence: a link is named as a link, a file as a file (the
    kernel's ELOOP/ENOTDIR alone does not tell them apart)."""
    from agents.tools.workspace import Workspace

    (ws / "alias").symlink_to(ws / "src")
    (ws / "plain.txt").write_text("x")
    workspace = Workspace(ws)
    with pytest.raises(ToolError) as link:
        workspace.open_dir("alias")
    assert str(link.value) == ("path 'alias' is a symbolic link; tools do not follow links, "
                               "which may point outside the session workspace.")
    with pytest.raises(ToolError) as plain:
        workspace.open_dir("plain.txt/sub")
    assert str(plain.value) == "path 'plain.txt/sub': 'plain.txt' is a file, not a directory."


def test_workspace_reached_through_a_symlink(ws: Path, tmp_path: Path) -> None:
    link = tmp_path / "wslink"
    link.symlink_to(ws)
    assert resolve_in_workspace(link, "src/a.py") == ws.resolve() / "src/a.py"
    assert resolve_in_workspace(link, str(link / "src/a.py")) == ws.resolve() / "src/a.py"


@pytest.mark.parametrize("path", ["", "   ", "a\x00b"])
def test_empty_or_nul_path_is_refused(ws: Path, path: str) -> None:
    with pytest.raises(ToolError):
        resolve_in_workspace(ws, path)


def test_display_path_is_workspace_relative(ws: Path) -> None:
    assert display_path(ws, ws.resolve() / "src" / "a.py") == "src/a.py"
    assert display_path(ws, ws.resolve()) == "."


def test_overlap_is_by_path_parts() -> None:
    assert overlaps(Path("/w/a"), Path("/w/a/b.txt"))
    assert overlaps(Path("/w/a/b.txt"), Path("/w/a"))
    assert overlaps(Path("/w/a"), Path("/w/a"))
    assert not overlaps(Path("/w/a"), Path("/w/ab"))
    assert not overlaps(Path("/w/a/x"), Path("/w/a/y"))


segment = st.sampled_from(["a", "b", "..", ".", "c"])


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(segment, min_size=1, max_size=6))
def test_resolved_paths_never_leave_the_workspace(tmp_path_factory: pytest.TempPathFactory,
                                                   parts: list[str]) -> None:
    ws = tmp_path_factory.getbasetemp() / "prop-ws"
    ws.mkdir(exist_ok=True)
    text = "/".join(parts)
    try:
        real = resolve_in_workspace(ws, text)
    except ToolError:
        assert not os.path.normpath(os.path.join(ws.resolve(), text)).startswith(
            str(ws.resolve()))
        return
    assert real == ws.resolve() or ws.resolve() in real.parents
