"""The provider simulator over real HTTP: the anthropic SDK (max_retries=0) and httpx against a
started server. Wire shapes, validation errors, faults, scripts and the demo policy."""

from __future__ import annotations

import json

import anthropic
import httpx
import httpx2  # the HTTP layer the anthropic SDK (2.14) uses
import pytest

from simulator import Fault, Reply, ScriptRequest, ScriptRule, SimulatorServer, \
    ToolCallSpec

MODEL = "claude-sim"
TOOLS = [{"name": n, "description": f"{n} tool", "input_schema": {"type": "object"}}
         for n in ("read_file", "write_file", "patch", "search_files", "terminal",
                   "skills_list", "skill_view", "session_search")]




def user(text: str) -> dict:
    return {"role": "user", "content": text}


def test_non_streaming_demo_list_and_read_makes_two_tool_calls(client: anthropic.Anthropic,
                                                               sim: SimulatorServer) -> None:
    message = client.messages.create(model=MODEL, max_tokens=1024, tools=TOOLS,
                                     messages=[user("Please LIST the files and read README.md")])
    assert message.stop_reason == "tool_use"
    assert message.content[0].type == "text"
    assert "(simulated model)" in message.content[0].text
    calls = [b for b in message.content if b.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [
        ("terminal", {"command": "ls -la", "timeout": 30}),
        ("read_file", {"path": "README.md", "offset": 1, "limit": 500})]
    assert len({c.id for c in calls}) == 2
    assert message.usage.output_tokens > 0 and message.usage.input_tokens > 0
    assert sim.state.requests[-1].usage == message.usage.model_dump(
        include={"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                 "cache_creation", "output_tokens", "service_tier"})


def test_streaming_event_sequence_and_summary_after_tool_results(client: anthropic.Anthropic,
                                                                 sim: SimulatorServer) -> None:
    body = {"model": MODEL, "max_tokens": 1024, "tools": TOOLS, "stream": True,
            "messages": [user("list the files and read README.md")]}
    with httpx.stream("POST", f"{sim.url}/v1/messages", json=body) as response:
        wire = [line[7:] for line in response.iter_lines() if line.startswith("event: ")]
    assert wire[:3] == ["message_start", "content_block_start", "ping"]
    assert wire[-2:] == ["message_delta", "message_stop"]
    assert wire.count("content_block_start") == wire.count("content_block_stop") == 3
    with client.messages.stream(model=MODEL, max_tokens=1024, tools=TOOLS,
                                messages=body["messages"]) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_message()
    assert "input_json" in kinds and kinds[-2:] == ["message_delta", "message_stop"]
    calls = [b for b in first.content if b.type == "tool_use"]
    assert [c.name for c in calls] == ["terminal", "read_file"]
    assert calls[1].input == {"path": "README.md", "offset": 1, "limit": 500}
    listing = "total 12\ndrwxr-xr-x 2 u u 4096 .\ndrwxr-xr-x 9 u u 4096 ..\n" \
              "-rw-r--r-- 1 u u 20 README.md\n-rw-r--r-- 1 u u 9 a.txt\ndrwxr-xr-x 2 u u 4096 src"
    history = [user("list the files and read README.md"),
               {"role": "assistant", "content": [b.model_dump(exclude_none=True, include={
                   "type", "text", "id", "name", "input"}) for b in first.content]},
               {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": calls[0].id,
                    "content": json.dumps({"output": listing, "exit_code": 0})},
                   {"type": "tool_result", "tool_use_id": calls[1].id,
                    "content": "     1\t# Hermes Web demo\n     2\t\n     3\tMore."}]}]
    deltas: list[str] = []
    with client.messages.stream(model=MODEL, max_tokens=1024, tools=TOOLS,
                                messages=history) as stream:
        for text in stream.text_stream:
            deltas.append(text)
        final = stream.get_final_message()
    assert len(deltas) > 10  # streamed token by token
    assert final.stop_reason == "end_turn"
    assert "3 entries" in final.content[0].text
    assert "# Hermes Web demo" in final.content[0].text


@pytest.mark.parametrize("text, name, arguments", [
    ("write hello.txt with hi there", "write_file", {"path": "hello.txt",
                                                     "content": "hi there\n"}),
    ("patch a.txt: foo -> bar", "patch", {"path": "a.txt", "old_string": "foo",
                                          "new_string": "bar", "replace_all": False}),
    ("replace foo with bar in b.py", "patch", {"path": "b.py", "old_string": "foo",
                                               "new_string": "bar", "replace_all": False}),
    ("search TODO in src", "search_files", {"pattern": "TODO", "path": "src"}),
    ("run pytest -q", "terminal", {"command": "pytest -q", "timeout": 60}),
    ("what skills do you have", "skills_list", {}),
    ("show skill deploy-notes", "skill_view", {"name": "deploy-notes"}),
    ("recall the database decision", "session_search", {"query": "the database decision"}),
    ("search history for redis", "session_search", {"query": "redis"}),
])
def test_demo_rules_call_each_tool(client: anthropic.Anthropic, text: str, name: str,
                                   arguments: dict) -> None:
    message = client.messages.create(model=MODEL, max_tokens=1024, tools=TOOLS,
                                     messages=[user(text)])
    calls = [b for b in message.content if b.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [(name, arguments)]


def test_demo_answers_in_text_without_tools_or_when_tool_not_offered(
        client: anthropic.Anthropic) -> None:
    finalizer = client.messages.create(model=MODEL, max_tokens=512,
                                       messages=[user("list the files")])
    assert [b.type for b in finalizer.content] == ["text"]
    assert finalizer.stop_reason == "end_turn"
    missing = client.messages.create(model=MODEL, max_tokens=512, tools=TOOLS[:1],
                                     messages=[user("run ls")])
    assert [b.type for b in missing.content] == ["text"]
    assert "terminal" in missing.content[0].text and "not available" in missing.content[0].text
    chat = client.messages.create(model=MODEL, max_tokens=512, tools=TOOLS,
                                  messages=[user("hello there")])
    assert "simulator" in chat.content[0].text and "help" in chat.content[0].text
    help_reply = client.messages.create(model=MODEL, max_tokens=512, tools=TOOLS,
                                        messages=[user("help")])
    assert "list the files and read README.md" in help_reply.content[0].text


B01 = [user("list files, then read a.txt"),
       {"role": "assistant", "content": [
           {"type": "tool_use", "id": "toolu_T1", "name": "terminal", "input": {"command": "ls"}},
           {"type": "tool_use", "id": "toolu_T2", "name": "read_file",
            "input": {"path": "a.txt"}}]},
       user("stop, read b.txt instead")]
B02 = [user("run tests"), {"role": "assistant", "content": [{"type": "text", "text": "Running."}]},
       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_T9",
                                     "content": "ok"}, {"type": "text", "text": "continue"}]}]


def _marked(text: str, ttl: str | None = None) -> dict:
    control = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return {"type": "text", "text": text, "cache_control": control}


@pytest.mark.parametrize("messages, system, tools, expected", [
    (B01, None, None, "messages.1: `tool_use` ids were found without `tool_result` blocks "
     "immediately after: toolu_T1, toolu_T2. Each `tool_use` block must have a corresponding "
     "`tool_result` block in the next message."),
    (B02, None, None, "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` "
     "blocks: toolu_T9. Each `tool_result` block must have a corresponding `tool_use` block in "
     "the previous message."),
    ([user("a"), user("b")], None, None, 'messages: roles must alternate between "user" and '
     '"assistant", but found multiple "user" roles in a row'),
    ([{"role": "assistant", "content": "hi"}, user("a")], None, None,
     'messages: first message must use the "user" role'),
    ([user(""), {"role": "assistant", "content": "x"}, user("a")], None, None,
     "messages.0: all messages must have non-empty content except for the optional final "
     "assistant message"),
    ([{"role": "user", "content": [{"type": "text", "text": ""}]}], None, None,
     "messages: text content blocks must be non-empty"),
    ([{"role": "user", "content": [_marked("s"), _marked("a"), _marked("b"), _marked("c"),
                                   _marked("d")]}], None, None,
     "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    ([{"role": "user", "content": [_marked("hello", "1h")]}], [_marked("system", "5m")], None,
     "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come "
     "after a ttl='5m' cache_control block. Note that blocks are processed in the following "
     "order: `tools`, `system`, `messages`."),
    ([user("a")], None, [{"name": "bad name!", "input_schema": {"type": "object"}}],
     "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"),
    ([user("a")], None, [{"name": "x" * 65, "input_schema": {"type": "object"}}],
     "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"),
])
def test_validation_errors_surface_as_bad_request(client: anthropic.Anthropic,
                                                  sim: SimulatorServer, messages: list,
                                                  system: list | None, tools: list | None,
                                                  expected: str) -> None:
    kwargs: dict = {"system": system} if system else {}
    if tools:
        kwargs["tools"] = tools
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=MODEL, max_tokens=64, messages=messages, **kwargs)
    assert caught.value.status_code == 400
    assert caught.value.body["error"] == {"type": "invalid_request_error", "message": expected}
    assert sim.state.requests[-1].status == 400 and sim.state.requests[-1].usage is None


def test_prompt_too_long_uses_the_configured_window(client: anthropic.Anthropic,
                                                    sim: SimulatorServer) -> None:
    sim.state.configure(context_windows={MODEL: 2000})
    text = "alpha beta gamma delta " * 600
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=MODEL, max_tokens=64, messages=[user(text)])
    message = caught.value.body["error"]["message"]
    assert message.startswith("prompt is too long: ") and message.endswith(" > 2000 maximum")
    assert int(message.split()[4]) > 2000
    with pytest.raises(anthropic.BadRequestError, match="input length and max_tokens exceed"):
        client.messages.create(model=MODEL, max_tokens=1999, messages=[user("hello")])


def test_http_faults_surface_as_sdk_exceptions(client: anthropic.Anthropic,
                                               sim: SimulatorServer) -> None:
    sim.state.faults.push(Fault(kind="rate_limit", retry_after="20"))
    sim.state.faults.push(Fault(kind="overloaded"))
    sim.state.faults.push(Fault(kind="server_error"))
    sim.state.faults.push(Fault(kind="prompt_too_long", prompt_tokens=205310))
    request = {"model": MODEL, "max_tokens": 64, "messages": [user("hi")]}
    with pytest.raises(anthropic.RateLimitError) as rate:
        client.messages.create(**request)
    assert rate.value.response.headers["retry-after"] == "20"
    assert rate.value.body["error"]["type"] == "rate_limit_error"
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        client.messages.create(**request)
    assert overloaded.value.status_code == 529
    with pytest.raises(anthropic.InternalServerError) as internal:
        client.messages.create(**request)
    assert internal.value.body["error"]["type"] == "api_error"
    with pytest.raises(anthropic.BadRequestError,
                       match="prompt is too long: 205310 tokens > 200000 maximum"):
        client.messages.create(**request)
    assert client.messages.create(**request).content[0].type == "text"  # queue drained
    assert [r.fault for r in sim.state.requests] == [
        "rate_limit", "overloaded", "server_error", "prompt_too_long", None]


def test_fault_for_other_endpoint_waits_its_turn(client: anthropic.Anthropic,
                                                 sim: SimulatorServer) -> None:
    sim.state.faults.push(Fault(kind="server_error", endpoint="openai"))
    assert client.messages.create(model=MODEL, max_tokens=64, messages=[user("hi")]).content
    response = httpx.post(f"{sim.url}/v1/chat/completions",
                          json={"model": "gpt-sim", "messages": [user("hi")]})
    assert response.status_code == 500
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_stream_cut_mid_tool_call_raises_transport_error(client: anthropic.Anthropic,
                                                         sim: SimulatorServer) -> None:
    sim.state.faults.push(Fault(kind="stream_cut", after_events=2))
    seen: list[str] = []
    with pytest.raises(httpx2.RemoteProtocolError):
        with client.messages.stream(model=MODEL, max_tokens=256, tools=TOOLS,
                                    messages=[user("tell me something")]) as stream:
            for event in stream:
                seen.append(event.type)
    assert "input_json" in seen and "message_stop" not in seen
    assert seen.count("content_block_stop") == 1  # the text block only, never the tool block
    sim.state.faults.push(Fault(kind="stream_cut"))
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(model=MODEL, max_tokens=64, messages=[user("hi")])


def test_error_event_inside_200_stream(client: anthropic.Anthropic, sim: SimulatorServer) -> None:
    sim.state.faults.push(Fault(kind="stream_error", after_events=2))
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(model=MODEL, max_tokens=256,
                                    messages=[user("hello")]) as stream:
            for text in stream.text_stream:
                texts.append(text)
    assert not isinstance(caught.value, anthropic.OverloadedError)
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert len(texts) == 2


def test_rules_script_matches_user_text_then_tool_result(sim: SimulatorServer,
                                                         client: anthropic.Anthropic) -> None:
    sim.state.script = type(sim.state.script)([
        ScriptRule(tool_result=r"exit code 1", reply=Reply(text="The tests failed.")),
        ScriptRule(user=r"^deploy", reply=Reply(text="Deploying.", tool_calls=(
            ToolCallSpec(name="terminal", input={"command": "make deploy", "timeout": 5}),))),
    ])
    first = client.messages.create(model=MODEL, max_tokens=256, tools=TOOLS,
                                   messages=[user("Deploy now")])
    call = first.content[1]
    assert (call.name, call.input) == ("terminal", {"command": "make deploy", "timeout": 5})
    history = [user("Deploy now"),
               {"role": "assistant", "content": [{"type": "text", "text": "Deploying."},
                                                 {"type": "tool_use", "id": call.id,
                                                  "name": "terminal", "input": call.input}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                             "content": "boom, exit code 1"}]}]
    second = client.messages.create(model=MODEL, max_tokens=256, tools=TOOLS, messages=history)
    assert second.content[0].text == "The tests failed."
    assert client.messages.create(model=MODEL, max_tokens=256, messages=[user("x")]) \
        .content[0].text.startswith("(simulated model) No script rule matched")


def test_callable_script_and_max_tokens_truncation(sim: SimulatorServer,
                                                   client: anthropic.Anthropic) -> None:
    seen: list[ScriptRequest] = []

    def policy(request: ScriptRequest) -> dict:
        seen.append(request)
        return {"text": "one two three four five six seven eight nine ten"}

    sim.state.script = type(sim.state.script)(policy)
    message = client.messages.create(model=MODEL, max_tokens=3, system="be brief",
                                     messages=[user("count")])
    assert message.stop_reason == "max_tokens"
    assert message.content[0].text == "one two three"
    assert message.usage.output_tokens == 3
    assert seen[0].last_user_text == "count" and seen[0].endpoint == "anthropic"


def test_openai_streaming_with_usage_and_tool_call_deltas(sim: SimulatorServer) -> None:
    tools = [{"type": "function", "function": {"name": "terminal", "parameters": {}}},
             {"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    body = {"model": "gpt-sim", "stream": True, "stream_options": {"include_usage": True},
            "tools": tools, "messages": [{"role": "system", "content": "You help."},
                                         user("list the files and read README.md")]}
    chunks = []
    with httpx.stream("POST", f"{sim.url}/v1/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                chunks.append(line[6:])
    assert chunks[-1] == "[DONE]"
    parsed = [json.loads(c) for c in chunks[:-1]]
    arguments: dict[int, str] = {}
    names: dict[int, str] = {}
    for chunk in parsed[:-1]:
        for delta in chunk["choices"][0]["delta"].get("tool_calls", []):
            names.setdefault(delta["index"], delta.get("function", {}).get("name", ""))
            arguments[delta["index"]] = arguments.get(delta["index"], "") + \
                delta["function"].get("arguments", "")
    assert names == {0: "terminal", 1: "read_file"}
    assert json.loads(arguments[1]) == {"path": "README.md", "offset": 1, "limit": 500}
    assert parsed[-2]["choices"][0]["finish_reason"] == "tool_calls"
    usage = parsed[-1]["usage"]
    assert parsed[-1]["choices"] == [] and usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0


def test_openai_validation_errors(sim: SimulatorServer) -> None:
    url = f"{sim.url}/v1/chat/completions"
    b03 = [{"role": "system", "content": "s"}, {"role": "user", "content": "summary"},
           {"role": "tool", "tool_call_id": "c2", "content": "b"}]
    response = httpx.post(url, json={"model": "m", "messages": b03})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'")
    b05 = [user("book"), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_F1", "type": "function", "function": {"name": "book_flight",
                                                           "arguments": "{}"}},
        {"id": "call_H1", "type": "function", "function": {"name": "transfer", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "call_H1", "content": "ok"}, user("next")]
    error = httpx.post(url, json={"model": "m", "messages": b05}).json()["error"]
    assert error["message"].endswith("did not have response messages: call_F1")
    assert error["type"] == "invalid_request_error"
    sim.state.configure(context_window=50)
    error = httpx.post(url, json={"model": "m", "messages": [user("word " * 80)]}).json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is 50 tokens.")


def test_control_api_drives_a_running_server(sim: SimulatorServer,
                                             client: anthropic.Anthropic) -> None:
    auth = sim.control_headers
    assert httpx.post(f"{sim.url}/_sim/clock", json={"advance": 90},
                      headers=auth).json() == {"now": 90.0}
    assert httpx.post(f"{sim.url}/_sim/faults",
                      json={"kind": "rate_limit", "retry_after_ms": 4321},
                      headers=auth).json() == {"pending": 1}
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model=MODEL, max_tokens=64, messages=[user("hi")])
    assert caught.value.response.headers["retry-after-ms"] == "4321"
    rules = {"rules": [{"user": "ping", "text": "pong"}]}
    assert httpx.post(f"{sim.url}/_sim/script", json=rules, headers=auth).json() == {"ok": True}
    assert client.messages.create(model=MODEL, max_tokens=64,
                                  messages=[user("ping")]).content[0].text == "pong"
    config = httpx.post(f"{sim.url}/_sim/config", json={"min_cacheable_tokens": 10},
                        headers=auth).json()
    assert config["min_cacheable_tokens"] == 10 and sim.state.cache.min_cacheable_tokens == 10
    logged = httpx.get(f"{sim.url}/_sim/requests", headers=auth).json()["requests"]
    assert [r["status"] for r in logged] == [429, 200]
    assert logged[1]["clock"] == 90.0 and logged[1]["body"]["messages"] == [user("ping")]
    assert httpx.post(f"{sim.url}/_sim/faults", json={"kind": "nope"},
                      headers=auth).status_code == 400
    assert httpx.post(f"{sim.url}/_sim/reset", json={}, headers=auth).json() == {"ok": True}
    assert httpx.get(f"{sim.url}/_sim/requests", headers=auth).json() == {"requests": []}
    assert "(simulated model)" in client.messages.create(
        model=MODEL, max_tokens=64, messages=[user("ping")]).content[0].text
