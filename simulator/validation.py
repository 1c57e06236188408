"""Request validation as the real provider APIs do it, raising their real error messages.

Messages follow what the Anthropic Messages API and OpenAI chat completions answer (quoted in
/work/shared/cases/failure-cases.md B01, B02, B03, B05, B07, B11, B17, B25 and public issue
threads). Only rules a harness can break are checked: schema basics, role order, tool pairing,
empty content, cache markers, tool names, context length. Rendering the error body is
``simulator.faults``; counting tokens is ``simulator.prefix``.
"""

from __future__ import annotations

import re
from typing import Any

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_CACHE_BREAKPOINTS = 4


class RequestRejected(Exception):
    """A request the provider answers with an HTTP error. ``error_type`` is the Anthropic
    ``error.type`` (OpenAI bodies reuse it as ``type``); ``param``/``code`` fill the OpenAI
    error fields."""

    def __init__(self, message: str, *, status: int = 400,
                 error_type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type
        self.param = param
        self.code = code


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _check_text(where: str, block: dict[str, Any]) -> None:
    if block.get("type") != "text":
        return
    text = block.get("text")
    if not isinstance(text, str) or text == "":
        raise RequestRejected(f"{where}: text content blocks must be non-empty")
    if not text.strip():
        raise RequestRejected(f"{where}: text content blocks must contain non-whitespace text")


def validate_anthropic(body: Any) -> None:
    """Validate a Messages API body. Raises RequestRejected (400 invalid_request_error)
    with the real API's message for the first problem found."""
    if not isinstance(body, dict):
        raise RequestRejected("Request body must be a JSON object")
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise RequestRejected(f"{name}: Field required")
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        raise RequestRejected("max_tokens: Input should be a valid integer greater than 0")
    _check_tools_anthropic(body.get("tools") or [])
    system = body.get("system")
    for block in _blocks(system) if system not in (None, "") else []:
        _check_text("system", block)
    _check_messages_anthropic(body["messages"])
    _check_cache_markers(body)


def _check_tools_anthropic(tools: list[Any]) -> None:
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise RequestRejected(f"tools.{i}.custom.name: String should match pattern "
                                  f"'{TOOL_NAME.pattern}'")
        if name in seen:
            raise RequestRejected("tools: Tool names must be unique.")
        seen.add(name)


def _check_messages_anthropic(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise RequestRejected("messages: at least one message is required")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise RequestRejected(f"messages.{i}.role: Input should be 'user' or 'assistant'")
    if messages[0]["role"] != "user":
        raise RequestRejected('messages: first message must use the "user" role')
    last = len(messages) - 1
    for i, message in enumerate(messages):
        if i > 0 and message["role"] == messages[i - 1]["role"]:
            raise RequestRejected('messages: roles must alternate between "user" and '
                                  f'"assistant", but found multiple "{message["role"]}" '
                                  "roles in a row")
        blocks = _blocks(message.get("content"))
        final_assistant = i == last and message["role"] == "assistant"
        if not blocks or (isinstance(message.get("content"), str) and not message["content"]):
            if final_assistant:
                continue
            raise RequestRejected(f"messages.{i}: all messages must have non-empty content "
                                  "except for the optional final assistant message")
        for block in blocks:
            _check_text("messages", block)
        if final_assistant and blocks[-1].get("type") == "text" \
                and blocks[-1]["text"] != blocks[-1]["text"].rstrip():
            raise RequestRejected("messages: final assistant content cannot end with "
                                  "trailing whitespace")
    _check_tool_pairing(messages)


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        blocks = _blocks(message.get("content"))
        if message["role"] == "user":
            previous = _blocks(messages[i - 1].get("content")) if i > 0 else []
            offered = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for j, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in offered:
                    raise RequestRejected(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous "
                        "message.")
            continue
        ids = []
        for j, block in enumerate(blocks):
            if block.get("type") != "tool_use":
                continue
            if block.get("id") in seen_ids:
                raise RequestRejected(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
            seen_ids.add(block.get("id"))
            ids.append(block.get("id"))
        if not ids or i == len(messages) - 1:
            continue
        answered = {b.get("tool_use_id") for b in _blocks(messages[i + 1].get("content"))
                    if b.get("type") == "tool_result"}
        missing = [str(x) for x in ids if x not in answered]
        if missing:
            raise RequestRejected(
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.")


def _marked_blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(path, block) for every block carrying cache_control, in tools → system → messages."""
    found: list[tuple[str, dict[str, Any]]] = []
    for i, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, dict) and tool.get("cache_control"):
            found.append((f"tools.{i}", tool))
    system = body.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        if block.get("cache_control"):
            found.append((f"system.{i}", block))
    for i, message in enumerate(body.get("messages") or []):
        for j, block in enumerate(_blocks(message.get("content"))):
            if block.get("cache_control"):
                found.append((f"messages.{i}.content.{j}", block))
            if block.get("type") == "tool_result":
                for k, inner in enumerate(_blocks(block.get("content"))):
                    if inner.get("cache_control"):
                        found.append((f"messages.{i}.content.{j}.content.{k}", inner))
    return found


def _check_cache_markers(body: dict[str, Any]) -> None:
    marked = _marked_blocks(body)
    if len(marked) > MAX_CACHE_BREAKPOINTS:
        raise RequestRejected(f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control "
                              f"may be provided. Found {len(marked)}.")
    seen_5m = False
    for path, block in marked:
        ttl = block["cache_control"].get("ttl", "5m")
        if ttl not in ("5m", "1h"):
            raise RequestRejected(f"{path}.cache_control.ttl: Input should be '5m' or '1h'")
        if ttl == "1h" and seen_5m:
            raise RequestRejected(
                f"{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after "
                "a ttl='5m' cache_control block. Note that blocks are processed in the "
                "following order: `tools`, `system`, `messages`.")
        seen_5m = seen_5m or ttl == "5m"


def check_context_anthropic(prompt_tokens: int, max_tokens: int, window: int) -> None:
    """Raise the Messages API's overflow errors (failure-cases B11, B25)."""
    if prompt_tokens > window:
        raise RequestRejected(f"prompt is too long: {prompt_tokens} tokens > {window} maximum")
    if prompt_tokens + max_tokens > window:
        raise RequestRejected(
            f"input length and max_tokens exceed context limit: {prompt_tokens} + {max_tokens} "
            f"> {window}, decrease input length or max_tokens and try again")


def validate_openai(body: Any, *, strict_roles: bool = False) -> None:
    """Validate a chat-completions body. Raises RequestRejected with the OpenAI message,
    ``param`` and ``code`` for the first problem found. ``strict_roles``: also reject two
    consecutive user or assistant messages, with the message vLLM's strict chat templates
    raise (Mistral's and Llama-2-style templates enforce alternation; issue 10 defect 6)."""
    if not isinstance(body, dict):
        raise RequestRejected("We could not parse the JSON body of your request.")
    if "model" not in body:
        raise RequestRejected("you must provide a model parameter", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestRejected("[] is too short - 'messages'", param="messages")
    for i, tool in enumerate(body.get("tools") or []):
        name = (tool.get("function") or {}).get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise RequestRejected(
                f"Invalid 'tools[{i}].function.name': string does not match pattern. Expected a "
                f"string that matches the pattern '{TOOL_NAME.pattern}'.",
                param=f"tools[{i}].function.name", code="invalid_value")
    pending: list[str] = []
    pending_at = -1
    offered: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise RequestRejected(f"Invalid value: '{role}'. Supported values are: 'system', "
                                  "'assistant', 'user', 'tool', and 'developer'.",
                                  param=f"messages[{i}].role", code="invalid_value")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not offered:
                raise RequestRejected("Messages with role 'tool' must be a response to a "
                                      "preceding message with 'tool_calls'",
                                      param=f"messages.[{i}].role")
            if call_id not in offered:
                raise RequestRejected(f"Invalid parameter: 'tool_call_id' of '{call_id}' not "
                                      "found in 'tool_calls' of previous message.",
                                      param=f"messages.[{i}].tool_call_id")
            pending = [c for c in pending if c != call_id]
            continue
        _raise_unanswered(pending, pending_at)
        if strict_roles and role in ("user", "assistant") and i > 0 \
                and isinstance(messages[i - 1], dict) and messages[i - 1].get("role") == role:
            raise RequestRejected("Conversation roles must alternate user/assistant/user/"
                                  "assistant/...", param=f"messages.[{i}].role")
        offered = set()
        if role == "assistant":
            calls = message.get("tool_calls") or []
            pending = [str(c.get("id")) for c in calls]
            offered = set(pending)
            pending_at = i
    _raise_unanswered(pending, pending_at)


def _raise_unanswered(pending: list[str], at: int) -> None:
    if pending:
        raise RequestRejected(
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response "
            f"messages: {', '.join(pending)}", param=f"messages.[{at}].role")


def check_context_openai(prompt_tokens: int, window: int) -> None:
    """Raise OpenAI's context_length_exceeded (failure-cases B25)."""
    if prompt_tokens > window:
        raise RequestRejected(
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages.",
            param="messages", code="context_length_exceeded")
