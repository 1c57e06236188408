"""Issue 8 finding 1 (critical): a command creates symlinks in the workspace pointing at
host files (a skill's SKILL.md, a note, HERMES.md, the spill dir, a linked skills dir); no
file-touching path that runs in the worker may follow them: skill_view, skills_list, the
``/skill`` expansion, read_file, search_files, patch, write_file, spill, context discovery.

The links are made by a real command on the backend in force (both backends), and the reads
happen on the path a real turn takes (a turn on the provider simulator)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agents.messages import Message as AgentMessage
from simulator.script import Reply, Script, ScriptRule, ToolCallSpec
from agents.tools import ToolContext
from agents.tools.files import Patch, ReadFile, WriteFile
from agents.tools.search import SearchFiles
from agents.tools.spill import SpillLimits, spill_message
from agents.tools.workspace import Workspace
from sessions import toolbox
from sessions.models import Message, Session, Turn
from sessions.services import session_create, turn_start, workspace_path
from tests.security.confinement_support import (SECRET, backend_kind, host,  # noqa: F401
                                                run_turn)

pytestmark = pytest.mark.django_db(transaction=True)

PLANT = """set -e
mkdir -p .hermes/skills/pwn .hermes/skills/other
ln -s {secret} .hermes/skills/pwn/SKILL.md
ln -s {secret_dir} .hermes/skills/linked
ln -s {secret} notes.md
ln -s {secret} HERMES.md
ln -s {secret} AGENTS.md
ln -s {secret_dir} hostdir
ln -s /etc/shadow shadow.txt
rm -rf .hermes/spill && ln -s {secret_dir} .hermes/spill
echo planted
"""


def plant(workspace: Path, secret: Path) -> None:
    """The attacker's command, run for real on the session's backend."""
    secret_dir = secret.parent / "skilldir"
    (secret_dir / "leak").mkdir(parents=True, exist_ok=True)
    (secret_dir / "leak" / "SKILL.md").write_text(
        f"---\nname: leak\ndescription: {SECRET}\n---\n{SECRET}-skill-body\n")
    result = toolbox.backend_for(workspace).run(
        PLANT.format(secret=secret, secret_dir=secret_dir), cwd=workspace, timeout=30)
    assert result.exit_code == 0 and "planted" in result.output, result.output
    assert os.path.islink(workspace / ".hermes/skills/pwn/SKILL.md")


def shadow_line() -> str:
    """A line of the host's /etc/shadow (the worker is root here), to prove it never leaks."""
    try:
        return Path("/etc/shadow").read_text().splitlines()[0]
    except (OSError, IndexError):
        return "root:"


@pytest.fixture
def alice(make_user, backend_kind, host):  # noqa: F811
    return make_user("alice", team="red")


def test_a_turn_never_reads_a_planted_link(alice, host, simulator):  # noqa: F811
    session = session_create(user=alice)
    workspace = workspace_path(session).resolve()
    plant(workspace, host.secret_file)
    calls = (ToolCallSpec(name="skill_view", input={"name": "pwn"}),
             ToolCallSpec(name="skill_view", input={"name": "leak"}),
             ToolCallSpec(name="skills_list", input={}),
             ToolCallSpec(name="read_file", input={"path": "notes.md"}),
             ToolCallSpec(name="read_file", input={"path": ".hermes/skills/pwn/SKILL.md"}),
             ToolCallSpec(name="read_file", input={"path": "hostdir/host-secret.txt"}),
             ToolCallSpec(name="read_file", input={"path": "shadow.txt"}),
             ToolCallSpec(name="search_files", input={"pattern": "HOST-SECRET|root:"}))
    simulator.state.script = Script([
        ScriptRule(tool_result=".", reply=Reply(text="done")),
        ScriptRule(user="attack", reply=Reply(text="reading", tool_calls=calls))])
    turn_start(session=session, user=alice, text="attack")
    run_turn(session.pk)
    assert Turn.objects.get(session=session).status == Turn.Status.COMPLETED
    results = list(Message.objects.filter(session=session, role="tool").order_by("id"))
    assert len(results) == len(calls)
    for row in results:
        assert SECRET not in row.content and shadow_line() not in row.content, row.content
    by_name = {r.tool_name: r for r in results}
    assert by_name["skills_list"].content == "No skills are installed."
    assert results[0].is_error and "Unknown skill 'pwn'" in results[0].content
    assert all(r.is_error for r in results[3:7])
    # The prompt the model received: no planted HERMES.md/AGENTS.md, no linked skill.
    sent = json.dumps([r.body for r in simulator.state.requests])
    assert SECRET not in sent and shadow_line() not in sent


def test_the_skill_expansion_does_not_follow_a_planted_link(alice, host, simulator):  # noqa
    session = session_create(user=alice)
    workspace = workspace_path(session).resolve()
    plant(workspace, host.secret_file)
    turn_start(session=session, user=alice, text="/pwn now")
    turn = Turn.objects.get(session=session)
    assert turn.kind == "skill"
    message = toolbox.user_message_for(Session.objects.get(pk=session.pk), turn, workspace)
    assert isinstance(message, AgentMessage)
    assert SECRET not in message.wire_text and message.wire_text == "/pwn now"
    assert toolbox.skills_index_for(session, workspace) == ""
    run_turn(session.pk)
    assert SECRET not in json.dumps([r.body for r in simulator.state.requests])


def test_writes_replace_links_and_never_write_through(alice, host):  # noqa: F811
    session = session_create(user=alice)
    workspace = workspace_path(session).resolve()
    plant(workspace, host.secret_file)
    ctx = ToolContext(workspace=workspace, backend=toolbox.backend_for(workspace))
    before = host.secret_file.read_text()
    with pytest.raises(Exception, match="symbolic link"):
        Patch().run({"path": "notes.md", "old_string": SECRET, "new_string": "x"}, ctx)
    with pytest.raises(Exception, match="symbolic link"):
        WriteFile().run({"path": "hostdir/new.txt", "content": "x"}, ctx)
    with pytest.raises(Exception, match="symbolic link"):
        WriteFile().run({"path": "notes.md", "content": "mine\n"}, ctx)
    # A link swapped in after that check (the race) is replaced by the rename, never
    # written through: the write itself opens nothing by name.
    assert Workspace(workspace).write_bytes("notes.md", b"mine\n") is True
    assert not os.path.islink(workspace / "notes.md")
    assert (workspace / "notes.md").read_text() == "mine\n"
    assert host.secret_file.read_text() == before
    assert not (host.secret_file.parent / "skilldir" / "new.txt").exists()
    with pytest.raises(Exception, match="symbolic link"):
        ReadFile().run({"path": "AGENTS.md"}, ctx)
    with pytest.raises(Exception, match="symbolic link"):
        SearchFiles().run({"pattern": "x", "path": "hostdir"}, ctx)


def test_spill_into_a_linked_spill_dir_is_refused(alice, host):  # noqa: F811
    session = session_create(user=alice)
    workspace = workspace_path(session).resolve()
    plant(workspace, host.secret_file)
    spill_target = host.secret_file.parent / "skilldir"
    ctx = ToolContext(workspace=workspace)
    big = AgentMessage(role="tool", content="y" * 50_000, tool_call_id="call_1",
                       tool_name="terminal")
    out = spill_message(big, ctx, SpillLimits(per_result=1_000, per_turn=2_000))
    assert "could not be saved" in out.wire_text
    assert sorted(p.name for p in spill_target.iterdir()) == ["leak"]
