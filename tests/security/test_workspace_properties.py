"""Property tests of the confined Workspace (issue 8 build item 1): a real command plants a
random tree of files, directories, symlinks (to host files, host dirs, inside), hard links
to a host file, FIFOs and sockets; then any path, including ``..`` and absolute ones, read,
listed, searched or written through the workspace never yields host bytes, never writes
outside, and never blocks on a FIFO.

The planting command runs on the local backend without Landlock (the policy-only fallback),
because that is where a command can make a hard link to a host file at all (Landlock and
the sandbox both refuse it) and the tools must still hold."""

from __future__ import annotations

import os
import shlex
import stat
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.backends.local import LocalBackend
from agents.errors import ToolError
from agents.prompt import load_context_file
from agents.tools import ToolContext
from agents.tools.search import SearchFiles
from agents.tools.skills import load_skills, skill_dirs
from agents.tools.workspace import Workspace

SECRET = b"HOST-SECRET-prop"
NAMES = st.sampled_from(["a", "b", "HERMES.md", "SKILL.md", ".hermes", "skills", "x.txt"])
KINDS = st.sampled_from(["file", "dir", "link_out_file", "link_out_dir", "link_in",
                         "hardlink_out", "fifo", "socket"])
ENTRY = st.tuples(st.lists(NAMES, min_size=1, max_size=4).map("/".join), KINDS)
QUERY = st.one_of(
    st.lists(st.sampled_from(["a", "b", "HERMES.md", "SKILL.md", ".hermes", "skills",
                              "x.txt", "..", ".", ""]), min_size=1, max_size=5).map("/".join),
    st.sampled_from(["/etc/passwd", "/etc/shadow", "~", "~/a", "../../etc/passwd"]))


def plant_script(entries: list[tuple[str, str]], outside: Path) -> str:
    """The bash the attacker runs: each entry created where its parent exists as a real dir."""
    lines = []
    for path, kind in entries:
        q = shlex.quote(path)
        parent = shlex.quote(os.path.dirname(path) or ".")
        make = {
            "file": f"printf 'inside %s\\n' {q} > {q}",
            "dir": f"mkdir {q}",
            "link_out_file": f"ln -s {outside}/secret.txt {q}",
            "link_out_dir": f"ln -s {outside} {q}",
            "link_in": f"ln -s . {q}",
            "hardlink_out": f"ln {outside}/secret.txt {q}",
            "fifo": f"mkfifo {q}",
            "socket": f"python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX)"
                      f".bind(sys.argv[1])' {q}",
        }[kind]
        lines.append(f"[ -d {parent} ] && [ ! -L {parent} ] && [ ! -e {q} ] && "
                     f"{{ {make}; }} 2>/dev/null")
    return "\n".join(lines) + "\ntrue\n"


def leaks(data: bytes | str) -> bool:
    raw = data.encode() if isinstance(data, str) else data
    return SECRET in raw


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(entries=st.lists(ENTRY, min_size=1, max_size=14), queries=st.lists(QUERY, max_size=8))
def test_no_path_through_the_workspace_reaches_a_host_file(entries, queries):
    with tempfile.TemporaryDirectory(prefix="hermes-prop-") as tmp:
        outside = Path(tmp) / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_bytes(SECRET + b"\n")
        root = Path(tmp) / "ws"
        root.mkdir()
        result = LocalBackend(workspace=root, confine="none").run(
            plant_script(entries, outside), cwd=root, timeout=30)
        assert result.exit_code == 0, result.output
        ws = Workspace(root)
        for query in [*queries, *(p for p, _ in entries)]:
            try:
                data = ws.read_bytes(query)
            except ToolError:
                continue
            assert not leaks(data), query
            # What was read is a regular, single-link file that really is inside.
            info = ws.lstat(query)
            assert info is not None and stat.S_ISREG(info.st_mode) and info.st_nlink == 1
        for rel, fd in ws.walk_files("."):
            assert not leaks(os.read(fd, 1 << 16)), rel
        ctx = ToolContext(workspace=root)
        assert not leaks(SearchFiles().run({"pattern": "SECRET|inside"}, ctx).text)
        assert not leaks(load_context_file(root))
        for skill in load_skills(skill_dirs(deployment_dir=root, workspace=root)):
            assert not leaks(skill.body) and not leaks(skill.description)
        for query in queries:
            try:
                ws.write_bytes(query, b"overwritten\n")
            except ToolError:
                pass
        assert (outside / "secret.txt").read_bytes() == SECRET + b"\n"
        assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_opening_is_race_free_against_a_command_swapping_links(tmp_path):
    """A real command swaps a directory for a symlink to a host dir in a tight loop while
    the worker reads through it: a "resolve, check, then open" reader leaks sometimes; the
    fd walk never does (each read is the inside file or a refusal)."""
    import threading

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(SECRET)
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"inside")
    swapper = LocalBackend(workspace=root, confine="none")
    loop = ("for i in $(seq 1500); do mv d d.real && ln -s ../outside d && rm d && "
            "mv d.real d; done; echo swapped")
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(
        out=swapper.run(loop, cwd=root, timeout=120).output))
    thread.start()
    ws = Workspace(root)
    reads = refusals = 0
    while thread.is_alive():
        try:
            data = ws.read_bytes("d/f")
        except ToolError:
            refusals += 1
            continue
        reads += 1
        assert data == b"inside"
    thread.join()
    assert "swapped" in result["out"]
    assert reads > 0 and refusals > 0, (reads, refusals)
