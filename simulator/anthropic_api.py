"""The Anthropic Messages API endpoint (POST /v1/messages), non-streaming and SSE.

One request: validate, consume a fault, check the context window, account the prompt cache,
ask the script, render the reply in the real wire shape (event sequence message_start,
content_block_start, ping, content_block_delta, content_block_stop, message_delta,
message_stop), and record it. Validation rules, cache rules and scripts live in their own
modules; HTTP plumbing is ``simulator.server``.
"""

from __future__ import annotations

import json
from typing import Any

from simulator.cache import CacheOutcome
from simulator.faults import Fault, anthropic_error_body, http_fault
from simulator.prefix import anthropic_blocks
from simulator.script import Reply, ScriptRequest
from simulator.state import RecordedRequest, SimulatorState
from simulator.validation import RequestRejected, check_context_anthropic, \
    validate_anthropic
from simulator.wire import CUT_REPLY, PreparedReply, WireIO, prepare_reply


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def count_tokens_endpoint(state: SimulatorState, io: WireIO, body: Any) -> None:
    """POST /v1/messages/count_tokens: {"input_tokens": N} for a valid body."""
    try:
        validate_anthropic({**body, "max_tokens": 1} if isinstance(body, dict) else body)
    except RequestRejected as error:
        io.send_json(error.status, anthropic_error_body(error.error_type, error.message,
                                                        "req_sim_count"))
        return
    io.send_json(200, {"input_tokens": sum(b.tokens for b in anthropic_blocks(body))})


def handle_messages(state: SimulatorState, io: WireIO, body: Any) -> None:
    """Answer one POST /v1/messages. Never raises for a bad request (answers the error);
    connection errors while streaming propagate to the server."""
    number = state.next_number()
    request_id = f"req_sim_{number:06d}"
    now = state.clock.now()
    headers = {"request-id": request_id}
    request_headers = getattr(io, "headers", None)
    api_key = None
    if request_headers is not None:  # the SDK sends x-api-key or a bearer Authorization
        bearer = (request_headers.get("authorization") or "").removeprefix("Bearer ").strip()
        api_key = request_headers.get("x-api-key") or bearer or None
    if state.config.gateway_tool_ttl and isinstance(body, dict) and body.get("tools"):
        # A gateway in front of the API adds its own marker on the tools (defect 8).
        marker = {"type": "ephemeral"}
        if state.config.gateway_tool_ttl == "1h":
            marker["ttl"] = "1h"
        body = {**body, "tools": [*body["tools"][:-1],
                                  {**body["tools"][-1], "cache_control": marker}]}

    def reject(status: int, error_body: dict[str, Any], extra: dict[str, str],
               fault: Fault | None = None) -> None:
        state.record(RecordedRequest(endpoint="anthropic", body=body if isinstance(body, dict)
                                     else {}, status=status, usage=None, clock=now,
                                     fault=fault.kind if fault else None,
                                     error=error_body["error"]["message"], api_key=api_key))
        io.send_json(status, error_body, {**headers, **extra})

    try:
        validate_anthropic(body)
    except RequestRejected as error:
        reject(error.status, anthropic_error_body(error.error_type, error.message, request_id),
               {})
        return
    model = str(body["model"])
    window = state.config.window_for(model)
    cap = state.config.output_caps.get(model)
    if cap is not None and int(body["max_tokens"]) > cap:
        reject(400, anthropic_error_body(
            "invalid_request_error", f"max_tokens: {body['max_tokens']} > {cap}, which is the "
            f"maximum allowed number of output tokens for {model}", request_id), {})
        return
    stream = bool(body.get("stream"))
    fault = state.faults.take("anthropic", api_key=api_key, model=model)
    if fault is not None and fault.kind in ("refusal", "no_usage"):
        pass  # carried out in the reply below
    elif fault is not None and not (stream and fault.kind in ("stream_cut", "stream_error")):
        if fault.kind == "stream_cut":
            state.record(RecordedRequest(endpoint="anthropic", body=body, status=0, usage=None,
                                         clock=now, fault=fault.kind, error="connection cut"))
            io.cut()
            return
        answer = http_fault(fault, "anthropic", request_id, window)
        assert answer is not None
        reject(answer[0], answer[2], answer[1], fault)
        return
    blocks = anthropic_blocks(body)
    try:
        check_context_anthropic(sum(b.tokens for b in blocks), int(body["max_tokens"]), window)
    except RequestRejected as error:
        reject(error.status, anthropic_error_body(error.error_type, error.message, request_id),
               {})
        return
    try:
        reply = state.script.reply_for(ScriptRequest.from_body("anthropic", body))
    except Exception as error:  # a broken script is the simulator user's bug: show it
        reject(500, anthropic_error_body("api_error", f"simulator script failed: {error!r}",
                                         request_id), {})
        return
    if fault is not None and fault.kind == "stream_cut" and not reply.tool_calls:
        reply = CUT_REPLY
    if fault is not None and fault.kind == "refusal":  # B27: no content, stop "refusal"
        reply = Reply(text="", stop_reason="refusal")
    prepared = prepare_reply(reply, max_tokens=int(body["max_tokens"]),
                             id_prefix=f"toolu_sim_{number:04d}")
    outcome = state.cache.process(blocks, namespace=model)
    usage = outcome.anthropic_usage(prepared.output_tokens)
    state.record(RecordedRequest(endpoint="anthropic", body=body, status=200, usage=usage,
                                 clock=now, fault=fault.kind if fault else None,
                                 api_key=api_key))
    message_id = f"msg_sim_{number:06d}"
    if not stream:
        io.send_json(200, _message(message_id, model, prepared, usage), headers)
        return
    _stream(io, headers, message_id, model, prepared, outcome, fault)


def _content(prepared: PreparedReply) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if prepared.text:
        content.append({"type": "text", "text": prepared.text})
    for call in prepared.calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name,
                        "input": call.input})
    return content


def _message(message_id: str, model: str, prepared: PreparedReply,
             usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": _content(prepared), "stop_reason": prepared.stop,
            "stop_sequence": None, "usage": usage}


def _stream(io: WireIO, headers: dict[str, str], message_id: str, model: str,
            prepared: PreparedReply, outcome: CacheOutcome, fault: Fault | None) -> None:
    io.start_stream(headers)
    start_usage = outcome.anthropic_usage(1)
    io.write(_sse("message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}}))
    index = 0
    pinged = False
    if prepared.text or (fault is not None and fault.kind == "stream_error"):
        io.write(_sse("content_block_start", {"type": "content_block_start", "index": 0,
                                              "content_block": {"type": "text", "text": ""}}))
        io.write(_sse("ping", {"type": "ping"}))
        pinged = True
        for n, piece in enumerate(prepared.pieces):
            if fault is not None and fault.kind == "stream_error" and n == fault.after_events:
                break
            prepared.pause()
            io.write(_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                  "delta": {"type": "text_delta",
                                                            "text": piece}}))
        if fault is not None and fault.kind == "stream_error":
            io.write(_sse("error", {"type": "error", "error": {
                "type": fault.error_type or "overloaded_error",
                "message": fault.message or "Overloaded"}}))
            io.end_stream()
            return
        io.write(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for call in prepared.calls:
        io.write(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                              "content_block": {"type": "tool_use", "id": call.id,
                                                                "name": call.name,
                                                                "input": {}}}))
        if not pinged:
            io.write(_sse("ping", {"type": "ping"}))
            pinged = True
        chunks = [""] + call.chunks()
        for n, chunk in enumerate(chunks):
            if fault is not None and fault.kind == "stream_cut" \
                    and n > min(fault.after_events, len(chunks) - 2):
                io.cut()
                return
            prepared.pause()
            io.write(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                  "delta": {"type": "input_json_delta",
                                                            "partial_json": chunk}}))
        io.write(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    final_usage = outcome.anthropic_usage(prepared.output_tokens)
    final_usage.pop("service_tier", None)
    io.write(_sse("message_delta", {"type": "message_delta",
                                    "delta": {"stop_reason": prepared.stop,
                                              "stop_sequence": None},
                                    "usage": final_usage}))
    io.write(_sse("message_stop", {"type": "message_stop"}))
    io.end_stream()
