"""llama-cpp-python's OpenAI-compatible server with a tool-calling chat handler that serves
OpenAI's chat-completions contract (run by ``.venv-offline/bin/python``, never imported by
Hermes: evals/offline.py starts it). Issue 17 item 3, the offline lane.

Why not the package's own ``chatml-function-calling`` handler (llama-cpp-python 0.3.x,
llama_chat_format.py): with an OpenAI client it cannot serve an agent loop.
- ``tool_choice`` absent is OpenAI's "auto" when tools are sent; that handler then renders
  the prompt WITHOUT the tools (its "no tool choice" case), so the model never sees them.
- Its template has no branch for ``role: "tool"`` messages: every tool result is dropped
  from the prompt.
- ``stream: true`` with automatic tool choice raises "Automatic streaming tool choice is not
  supported" (a 500), and a streamed reply carries no usage.
- It ignores ``max_tokens`` and constrains a text reply with the follow-up grammar (a reply
  can only be a function name or empty).

``hermes-chatml-tools`` keeps its approach (ChatML, SmolLM2's own template; the tools listed
in the system message as ``functions.<name>:`` with their JSON schema; a grammar choosing
``message:`` or one ``functions.<name>:``; the arguments constrained by a grammar built from
that tool's JSON schema with the package's own ``LlamaGrammar.from_json_schema``) and fixes
the four points: auto when tools are sent, tool results rendered (as ``tool`` turns naming
the call), ``max_tokens`` honoured (``finish_reason: "length"`` when it cut), and a streamed
answer sent as chat.completion.chunk events ending with a usage chunk. One call per reply.
A fifth, in the server's request model: ``content: null`` on an assistant message (below).

Usage: ``python evals/offline_server.py <llama_cpp.server arguments>`` with
``--chat_format hermes-chatml-tools``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Iterator

from typing import NotRequired, Optional

from llama_cpp import llama_chat_format, llama_grammar, llama_types

# The server's request model types an assistant message's content as a string that may be
# left out, so `"content": null` beside tool calls (OpenAI's shape, which Hermes sends: case
# B17) is refused with a 500 before any handler runs. OpenAI allows null: let it through
# (read before llama_cpp.server builds its request models, which this module imports last).
llama_types.ChatCompletionRequestAssistantMessage.__annotations__["content"] = \
    NotRequired[Optional[str]]

HANDLER = "hermes-chatml-tools"
INSTRUCTIONS = (
    "\n\nYou can respond to the user with either a message or one function call."
    "\n\nTo respond with a message begin with 'message:', in this format:"
    "\n\nmessage:\n<message>"
    "\n\nTo call a function begin with 'functions.<function_name>:', in this format:"
    '\n\nfunctions.<function_name>:\n{ "arg1": "value1", "arg2": "value2" }')


def _text(content: Any) -> str:
    """A message's content as text (a string, or OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def render(messages: list[dict], tools: list[dict]) -> str:
    """The ChatML prompt: the tools at the head of the system message, every message in
    order (tool results as ``tool`` turns), ending with the assistant's turn opened."""
    out = []
    names = {}
    listing = "".join(f"\nfunctions.{t['function']['name']}:\n"
                      f"{json.dumps(t['function'].get('parameters') or {})}\n" for t in tools)
    has_system = any(m.get("role") == "system" for m in messages)
    if tools and not has_system:
        out.append(f"<|im_start|>system\nYou have access to the following functions:\n"
                   f"{listing}{INSTRUCTIONS}<|im_end|>\n")
    for message in messages:
        role, text = message.get("role"), _text(message.get("content"))
        if role == "system":
            if tools:  # the tools first: the same bytes in every session, so the server's
                # KV cache keeps them from one session to the next (the prompt differs early)
                text = (f"You have access to the following functions:\n{listing}"
                        f"{INSTRUCTIONS}\n\n{text}")
            out.append(f"<|im_start|>system\n{text}<|im_end|>\n")
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            parts = [f"message:\n{text}"] if text and tools else ([text] if text else [])
            for call in calls:
                function = call.get("function") or {}
                names[call.get("id")] = function.get("name", "")
                parts.append(f"functions.{function.get('name')}:\n"
                             f"{function.get('arguments') or '{}'}")
            out.append("<|im_start|>assistant\n" + "\n".join(parts) + "<|im_end|>\n")
        elif role == "tool":
            name = names.get(message.get("tool_call_id"), "")
            out.append(f"<|im_start|>tool\nResult of functions.{name}:\n{text}<|im_end|>\n")
        else:
            out.append(f"<|im_start|>user\n{text}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def _grammar_for(schema: dict, verbose: bool) -> llama_grammar.LlamaGrammar:
    try:
        return llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema or {}),
                                                           verbose=verbose)
    except Exception:  # a schema the converter cannot express: any JSON value then
        return llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=verbose)


@llama_chat_format.register_chat_completion_handler(HANDLER)
def hermes_chatml_tools(llama, messages, tools=None, tool_choice=None, stream=False,
                        max_tokens=None, temperature=0.2, top_p=0.95, top_k=40, min_p=0.05,
                        repeat_penalty=1.1, stop=None, **_ignored) -> Any:
    """A chat completion (a dict, or an iterator of chunk dicts when ``stream``)."""
    tools = list(tools or []) if tool_choice != "none" else []
    if isinstance(tool_choice, dict):  # a named function: only that one
        wanted = tool_choice.get("function", {}).get("name")
        tools = [t for t in tools if t["function"]["name"] == wanted]
    prompt = render(list(messages), tools)
    sampling = dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                    repeat_penalty=repeat_penalty)
    stops = ["<|im_end|>", *([stop] if isinstance(stop, str) else (stop or []))]
    prompt_tokens = completion_tokens = 0
    choice = "message:"
    if tools:
        options = " | ".join(json.dumps(f"functions.{t['function']['name']}:") for t in tools)
        forced = isinstance(tool_choice, dict) or tool_choice == "required"
        root = options if forced else f'"message:" | {options}'
        first = llama.create_completion(
            prompt=prompt, max_tokens=64, temperature=0.0, stop=["\n"],
            grammar=llama_grammar.LlamaGrammar.from_string(f"root ::= {root}\n",
                                                           verbose=llama.verbose))
        choice = first["choices"][0]["text"].strip()
        prompt_tokens += first["usage"]["prompt_tokens"]
        completion_tokens += first["usage"]["completion_tokens"]
    tool = next((t for t in tools if f"functions.{t['function']['name']}:" == choice), None)
    if tool is None:
        body = llama.create_completion(prompt=prompt + ("message:\n" if tools else ""),
                                       max_tokens=max_tokens, stop=stops, **sampling)
    else:
        body = llama.create_completion(
            prompt=prompt + choice + "\n", max_tokens=max_tokens, stop=stops,
            grammar=_grammar_for(tool["function"].get("parameters") or {}, llama.verbose),
            **sampling)
    prompt_tokens += body["usage"]["prompt_tokens"]
    completion_tokens += body["usage"]["completion_tokens"]
    text = body["choices"][0]["text"]
    finish = body["choices"][0].get("finish_reason") or "stop"
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
    if tool is None:
        message = {"role": "assistant", "content": text.strip()}
    else:
        finish = "tool_calls" if finish == "stop" else finish
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{uuid.uuid4().hex[:20]}", "type": "function",
            "function": {"name": tool["function"]["name"], "arguments": text.strip()}}]}
    if not stream:
        return {"id": ident, "object": "chat.completion", "created": created,
                "model": llama.model_path, "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": finish,
                             "logprobs": None}]}
    return _chunks(ident, created, llama.model_path, message, finish, usage)


def _chunks(ident: str, created: int, model: str, message: dict, finish: str,
            usage: dict) -> Iterator[dict]:
    """The answer as OpenAI stream chunks: the delta, the finish reason, then the usage
    (what ``stream_options.include_usage`` asks for)."""
    head = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call}
                               for i, call in enumerate(message["tool_calls"])]
    yield {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    yield {**head, "choices": [], "usage": usage}


if __name__ == "__main__":
    from llama_cpp.server.__main__ import main

    main()
