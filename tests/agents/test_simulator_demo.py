"""The demo policy's reading of requests and tool results (simulator/demo.py,
simulator/script.py): listing counts, and a person's new message merged after an
interrupted turn's tool results. Pure request parsing plus one round over real HTTP."""

from __future__ import annotations

import re
from pathlib import Path

import anthropic
import pytest

from simulator import ScriptRequest, SimulatorServer
from simulator.demo import HELP, SLOW_STEPS, demo_policy

MODEL = "claude-sim"
TOOLS = [{"name": n, "description": f"{n} tool", "input_schema": {"type": "object"}}
         for n in ("read_file", "terminal", "session_search")]
LONG = ("total 12\n"
        "drwxr-xr-x 2 u u 4096 Nov 30 04:10 .\n"
        "drwxr-xr-x 9 u u 4096 Nov 30 04:10 ..\n"
        "-rw-r--r-- 1 u u   20 Nov 30 04:10 README.md\n"
        "[exit code 0]")


def _after_ls(command: str, output: str, *, extra: list[dict] | None = None) -> dict:
    """An Anthropic body: the user asked, the model ran ``command``, the result came back."""
    return {"model": MODEL, "max_tokens": 256, "tools": TOOLS, "messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "terminal",
             "input": {"command": command, "timeout": 30}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": output},
            *(extra or [])]}]}


def _reply(body: dict) -> str:
    return demo_policy(ScriptRequest.from_body("anthropic", body)).text


def test_long_listing_counts_entries_and_says_dot_entries_are_apart() -> None:
    text = _reply(_after_ls("ls -la", LONG))
    assert "`ls -la` lists 1 entry (not counting the folder itself and its parent)" in text
    assert "entries" not in text


def _after_read(output: str) -> dict:
    """An Anthropic body: the user asked, the model read README.md, the result came back."""
    return {"model": MODEL, "max_tokens": 256, "tools": TOOLS, "messages": [
        {"role": "user", "content": "read README.md"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file",
             "input": {"path": "README.md"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": output}]}]}


def test_read_summary_counts_lines_in_english() -> None:
    """A one-line README is "1 line", never "1 lines" (a fresh user's report)."""
    assert "README.md has 1 line; the first is: # Demo" in _reply(_after_read("     1\t# Demo"))
    two = _reply(_after_read("     1\t# Demo\n     2\tmore"))
    assert "README.md has 2 lines;" in two


def test_long_listing_of_25_lines_counts_every_entry() -> None:
    names = [f"file{i:02}.txt" for i in range(20)] + ["src", "docs", "link"]
    rows = ["total 96", "drwxr-xr-x 5 u u 4096 Nov 30 04:10 .",
            "drwxr-xr-x 9 u u 4096 Nov 30 04:10 .."]
    for name in names:
        kind = "d" if name in ("src", "docs") else "l" if name == "link" else "-"
        target = " -> src" if kind == "l" else ""
        rows.append(f"{kind}rw-r--r-- 1 u u 9 Nov 30 04:10 {name}{target}")
    text = _reply(_after_ls("ls -la", "\n".join(rows + ["[exit code 0]"])))
    assert "lists 23 entries (not counting the folder itself and its parent)" in text


@pytest.mark.parametrize("output, expected", [
    ("README.md\nnotes.txt\nzeta.py\n[exit code 0]", "`ls` lists 3 entries."),
    ("ls: cannot access 'nope': No such file or directory\n[exit code 2]",
     "`ls` lists 0 entries."),
    ("alpha\n[exit code 0]", "`ls` lists 1 entry."),
])
def test_short_listing_counts_one_name_per_line(output: str, expected: str) -> None:
    assert expected in _reply(_after_ls("ls", output))


def test_new_text_after_tool_results_is_the_question_not_the_results() -> None:
    body = _after_ls("sleep 100", "the command was stopped before it finished",
                     extra=[{"type": "text", "text": "help"}])
    request = ScriptRequest.from_body("anthropic", body)
    assert request.tool_results == () and request.last_user_text == "help"
    assert "I am the provider simulator" in demo_policy(request).text


def test_results_alone_are_still_summarised() -> None:
    request = ScriptRequest.from_body("anthropic", _after_ls("ls -la", LONG))
    assert [x.name for x in request.tool_results] == ["terminal"]
    assert request.last_user_text == "list the files"


def test_merged_new_message_over_http_answers_the_text(sim: SimulatorServer) -> None:
    client = anthropic.Anthropic(base_url=sim.url, api_key="sim-key", max_retries=0)
    body = _after_ls("sleep 100", "stopped", extra=[{"type": "text", "text": "read notes.txt"}])
    message = client.messages.create(model=MODEL, max_tokens=256, tools=TOOLS,
                                     messages=body["messages"])
    calls = [b for b in message.content if b.type == "tool_use"]
    assert [(c.name, c.input["path"]) for c in calls] == [("read_file", "notes.txt")]


def test_slow_demo_plans_three_slow_real_steps_and_help_names_it() -> None:
    """The steer demo (a user's finding: demo turns end in ~3 s, too fast to steer): three
    terminal calls that each sleep SLOW_STEP_SECONDS in the command backend."""
    from simulator.demo import SLOW_STEP_SECONDS, SLOW_STEPS

    body = {"model": MODEL, "max_tokens": 256, "tools": TOOLS,
            "messages": [{"role": "user", "content": "slow demo"}]}
    reply = demo_policy(ScriptRequest.from_body("anthropic", body))
    assert [c.name for c in reply.tool_calls] == ["terminal"] * SLOW_STEPS
    assert all(c.input["command"].startswith(f"sleep {SLOW_STEP_SECONDS}; ")
               for c in reply.tool_calls)
    assert "press Steer" in reply.text
    body["messages"][0]["content"] = "help"
    assert "\"slow demo\"" in demo_policy(ScriptRequest.from_body("anthropic", body)).text


def _steered_body(wire: str, correction: str) -> dict:
    """The request after a correction landed between step 1 and step 2 of the slow demo."""
    steered = ("not run: the user steered the turn before this call started; their "
               "correction follows. Decide again whether it is still needed.")
    results = [("c1", "step 1 of 3 done\n[exit code 0]"), ("c2", steered), ("c3", steered)]
    if wire == "anthropic":
        return {"model": MODEL, "max_tokens": 256, "tools": TOOLS, "messages": [
            {"role": "user", "content": "slow demo"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": i, "name": "terminal", "input": {"command": "x"}}
                for i, _ in results]},
            {"role": "user", "content": [
                *({"type": "tool_result", "tool_use_id": i, "content": r,
                   "is_error": r == steered} for i, r in results),
                {"type": "text", "text": correction}]}]}
    return {"model": MODEL, "tools": [{"type": "function", "function": {"name": t["name"]}}
                                      for t in TOOLS], "messages": [
        {"role": "user", "content": "slow demo"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "terminal",
                                                       "arguments": "{}"}}
            for i, _ in results]},
        *({"role": "tool", "tool_call_id": i, "content": r} for i, r in results),
        {"role": "user", "content": correction}]}


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_a_landed_correction_is_acknowledged_or_obeyed(wire: str) -> None:
    request = ScriptRequest.from_body(wire, _steered_body(wire, "stop after step one"))
    reply = demo_policy(request)
    assert reply.tool_calls == ()
    assert reply.text == ("(simulated model) Got your correction (“stop after step one”): 2 "
                          "planned steps were not run. I stopped there.")
    reply = demo_policy(ScriptRequest.from_body(wire, _steered_body(wire, "read notes.txt")))
    assert [(c.name, c.input["path"]) for c in reply.tool_calls] == [("read_file", "notes.txt")]
    assert "Got your correction" in reply.text


README = Path(__file__).resolve().parents[2] / "README.md"
FULL_TOOLS = [{"name": n, "description": f"{n} tool", "input_schema": {"type": "object"}}
              for n in ("read_file", "write_file", "terminal", "session_search")]


def _ask(client: anthropic.Anthropic, text: str) -> anthropic.types.Message:
    """One request over real HTTP with ``text`` as the only user message."""
    return client.messages.create(model=MODEL, max_tokens=2048, tools=FULL_TOOLS,
                                  messages=[{"role": "user", "content": text}])


def _calls(message: anthropic.types.Message) -> list[tuple[str, dict]]:
    return [(b.name, b.input) for b in message.content if b.type == "tool_use"]


def _documented_triggers() -> list[str]:
    """The whole-message commands the README tells a new user to send ("send `slow demo`",
    "Type `help`"), read from it so a renamed trigger breaks this test, not the demo."""
    text = README.read_text()
    found = re.findall(r"(?:send|[Tt]ype) `([^`]+)`", text)
    assert "slow demo" in found and "help" in found, found
    return found


def test_documented_triggers_fire_as_whole_messages(client: anthropic.Anthropic) -> None:
    for phrase in _documented_triggers():
        for typed in (phrase, f"  {phrase.upper()}  ", f"{phrase.capitalize()}."):
            message = _ask(client, typed)
            text = message.content[0].text
            if phrase == "help":
                assert text == HELP and not _calls(message), typed
            else:
                assert [name for name, _ in _calls(message)] == ["terminal"] * SLOW_STEPS
                assert "Slow demo:" in text, typed
    assert '"slow demo"' in HELP


@pytest.mark.parametrize("typed, expected", [
    # A user's finding: "recall slow demo" ran the slow demo instead of searching for it.
    ("recall slow demo", [("session_search", {"query": "slow demo"})]),
    ("search history for slow demo", [("session_search", {"query": "slow demo"})]),
    ("don't start the slow demo yet", []),
    ("help me write hello.txt", [("write_file", {"path": "hello.txt",
                                                 "content": "Hello from the simulated "
                                                            "model.\n"})]),
    ("what is the slow demo?", []),
    ("is there a help page?", []),
])
def test_a_message_that_only_contains_a_trigger_does_not_fire_it(
        client: anthropic.Anthropic, typed: str, expected: list) -> None:
    message = _ask(client, typed)
    text = message.content[0].text
    assert "Slow demo:" not in text and text != HELP, typed
    assert _calls(message) == expected
