"""execute_code through real turns (issue 13 item 5): a script batches many file operations
through the RPC (each through the policy gate and the Workspace), the iteration whose only
tool call was execute_code is refunded and Turn.iterations shows it, a script past its
timeout is killed with its partial output kept, output past the cap is cut with a note, and
off the sandbox the call asks like a risky terminal command.
"""

from __future__ import annotations

import pytest

from simulator.script import Reply, ScriptRequest, ToolCallSpec
from approvals.models import ApprovalRequest
from sessions.models import Message, RunEvent, Turn
from sessions.services import workspace_path

pytestmark = pytest.mark.django_db(transaction=True)

BATCH = """
from hermes_tools import read_file, write_file, search_files, ToolError
for i in range(5):
    write_file(path=f"notes/n{i}.txt", content=f"note {i}\\n")
print(search_files(pattern="note 3", path="notes"))
print(read_file(path="notes/n4.txt"))
try:
    read_file(path="../../etc/hostname")
except ToolError as exc:
    print("refused:", exc)
try:
    from hermes_tools import call
    call("terminal", command="id")
except ToolError as exc:
    print("no terminal:", exc)
from hermes_tools import session_search
print("recall:", session_search(query="kestrel")[:300])
"""


def code_model(code: str, *, times: int = 1, timeout: int | None = None, tool="execute_code"):
    """Calls ``tool`` with ``code`` ``times`` times (one call per reply), then answers with
    the last result."""

    def model(request: ScriptRequest) -> Reply:
        done = request.iteration - _assistants_before_last_user(request.body)
        if done < times:
            args = {"code": code} if tool == "execute_code" else {"command": code}
            if timeout is not None:
                args["timeout"] = timeout
            return Reply(tool_calls=(ToolCallSpec(name=tool, input=args),))
        last = request.tool_results[-1].result if request.tool_results else ""
        return Reply(text="Result: " + last)

    return model


def _assistants_before_last_user(body: dict) -> int:
    messages = body["messages"]
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message["content"]
        texts = [content] if isinstance(content, str) else [
            b for b in content if b.get("type") == "text"]
        if message["role"] == "user" and texts:
            return sum(1 for m in messages[:index] if m["role"] == "assistant")
    return 0


def test_one_script_batches_many_file_operations_through_the_gate(alice, script, chat):
    script(code_model(BATCH))
    earlier = chat(alice)
    Message.objects.create(session=earlier.session, role="user",
                           content="we deploy to the kestrel cluster")
    session = chat(alice)
    turn = session.say("organise my notes")
    assert turn.status == Turn.Status.COMPLETED
    (result,) = session.tool_rows()
    assert not result.is_error, result.content
    notes = workspace_path(session.session) / "notes"
    assert sorted(p.name for p in notes.iterdir()) == [f"n{i}.txt" for i in range(5)]
    assert "notes/n3.txt:1: note 3" in result.content
    assert "note 4" in result.content
    assert "refused:" in result.content and "outside the session workspace" in result.content
    assert "no terminal: 'terminal' cannot be called from execute_code" in result.content
    # session_search reads the database on the tool's own thread (its connection).
    assert "recall:" in result.content and "«kestrel» cluster" in result.content
    assert "[exit code 0; 10 tool calls]" in result.content
    # The script and its socket are gone; the helper module stays for the next call.
    code_dir = workspace_path(session.session) / ".hermes" / "code"
    assert sorted(p.name for p in code_dir.iterdir()) == ["hermes_tools.py"]


def test_execute_code_iterations_are_refunded_and_turn_iterations_shows_it(
        alice, script, chat, tool_settings):
    tool_settings.HERMES = {**tool_settings.HERMES, "MAX_ITERATIONS": 3}
    script(code_model("print('step')", times=3))
    session = chat(alice)
    turn = session.say("do three steps")
    # Three execute_code iterations and the answer: four model calls on a budget of three.
    assert turn.status == Turn.Status.COMPLETED
    finished = RunEvent.objects.get(session=session.session, type="turn.finished").payload
    assert finished["status"] == "completed"
    assert finished["iterations"] == 4 and finished["free_iterations"] == 3
    assert turn.iterations == 1  # only the answering iteration was charged
    assert session.final_text() == "Result: step\n[exit code 0; 0 tool calls]"


def test_the_same_steps_through_terminal_exhaust_the_budget(alice, script, chat,
                                                            tool_settings):
    """The control: without the refund a budget of three is spent by three tool iterations
    and the answer only comes from the tool-free finalizer."""
    tool_settings.HERMES = {**tool_settings.HERMES, "MAX_ITERATIONS": 3}
    script(code_model("echo step", times=3, tool="terminal"))
    session = chat(alice)
    turn = session.say("do three steps")
    finished = RunEvent.objects.get(session=session.session, type="turn.finished").payload
    assert finished["status"] == "budget_exhausted"
    assert turn.iterations == 3


def test_past_its_timeout_the_script_is_killed_and_its_partial_output_kept(alice, script,
                                                                          chat):
    code = "import time\nprint('started', flush=True)\ntime.sleep(30)\nprint('never')"
    script(code_model(code, timeout=1))
    session = chat(alice)
    turn = session.say("run the slow thing")
    assert turn.status == Turn.Status.COMPLETED
    (result,) = session.tool_rows()
    assert result.is_error
    assert result.content.startswith("started\n")
    assert "never" not in result.content
    assert "[timed out after 1 s; the script was killed" in result.content


def test_output_past_the_cap_is_cut_with_a_note(alice, script, chat, tool_settings):
    tool_settings.HERMES = {**tool_settings.HERMES, "CODE_OUTPUT_CAP": 1000}
    script(code_model("print('y' * 5000)"))
    session = chat(alice)
    session.say("print a lot")
    (result,) = session.tool_rows()
    assert result.content.startswith("y" * 1000 + "\n[output capped at 1000 characters; "
                                     "4000 more were not kept")


def test_on_the_local_backend_execute_code_asks(alice, script, chat, tool_settings):
    tool_settings.HERMES = {**tool_settings.HERMES, "BACKEND": "local"}
    from sessions import toolbox

    toolbox.backend_kind.cache_clear()
    script(code_model("print('hi')"))
    session = chat(alice)
    turn = session.say("run it")
    assert turn.status == Turn.Status.AWAITING_APPROVAL
    approval = ApprovalRequest.objects.get(session=session.session)
    assert approval.tool_name == "execute_code" and approval.rule == "code_execution"
    assert session.tool_rows() == []
