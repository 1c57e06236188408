"""The OpenAI chat-completions endpoint (POST /v1/chat/completions), non-streaming and SSE.

Same flow as the Anthropic module in the OpenAI wire shape: ``data: {chunk}`` lines, tool-call
deltas addressed by index, an optional final usage chunk (``stream_options.include_usage``),
then ``data: [DONE]``. Usage follows OpenAI: ``prompt_tokens`` includes
``prompt_tokens_details.cached_tokens``. Caching is automatic (every prefix boundary is looked
up; writes are not reported), unless the body carries ``cache_control`` content parts: then it
answers as an envelope gateway in front of Anthropic does (explicit breakpoints, at most 4,
the 20-block lookback, writes reported as ``prompt_tokens_details.cache_write_tokens``).
HTTP plumbing is ``simulator.server``.
"""

from __future__ import annotations

import json
from typing import Any

from simulator.faults import Fault, http_fault, openai_error_body
from simulator.prefix import has_envelope_markers, openai_blocks
from simulator.script import Reply, ScriptRequest
from simulator.state import RecordedRequest, SimulatorState
from simulator.validation import RequestRejected, check_context_openai, validate_openai
from simulator.wire import CUT_REPLY, PreparedReply, WireIO, prepare_reply

_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
           "refusal": "stop"}


def _data(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def handle_chat(state: SimulatorState, io: WireIO, body: Any) -> None:
    """Answer one POST /v1/chat/completions. Never raises for a bad request."""
    number = state.next_number()
    now = state.clock.now()
    headers = {"x-request-id": f"req_sim_{number:06d}"}
    request_headers = getattr(io, "headers", None)
    authorization = request_headers.get("authorization") if request_headers is not None else None
    api_key = authorization.removeprefix("Bearer ").strip() if authorization else None

    def reject(status: int, error_body: dict[str, Any], extra: dict[str, str],
               fault: Fault | None = None) -> None:
        state.record(RecordedRequest(endpoint="openai", body=body if isinstance(body, dict)
                                     else {}, status=status, usage=None, clock=now,
                                     fault=fault.kind if fault else None,
                                     error=error_body["error"]["message"], api_key=api_key))
        io.send_json(status, error_body, {**headers, **extra})

    try:
        validate_openai(body, strict_roles=state.config.strict_roles)
    except RequestRejected as error:
        reject(error.status, openai_error_body(error.message, error.error_type, error.param,
                                               error.code), {})
        return
    model = str(body["model"])
    window = state.config.window_for(model)
    stream = bool(body.get("stream"))
    fault = state.faults.take("openai", api_key=api_key, model=model)
    if fault is not None and fault.kind in ("refusal", "no_usage"):
        pass  # carried out in the reply below
    elif fault is not None and not (stream and fault.kind in ("stream_cut", "stream_error")):
        if fault.kind == "stream_cut":
            state.record(RecordedRequest(endpoint="openai", body=body, status=0, usage=None,
                                         clock=now, fault=fault.kind, error="connection cut"))
            io.cut()
            return
        answer = http_fault(fault, "openai", headers["x-request-id"], window)
        assert answer is not None
        reject(answer[0], answer[2], answer[1], fault)
        return
    blocks = openai_blocks(body)
    explicit = has_envelope_markers(body)
    if explicit and sum(1 for b in body["messages"] for p in (
            b.get("content") if isinstance(b.get("content"), list) else ())
            if isinstance(p, dict) and "cache_control" in p) > 4:
        reject(400, openai_error_body("A maximum of 4 blocks with cache_control may be "
                                      "provided. Found more.", "invalid_request_error",
                                      None, None), {})
        return
    prompt_tokens = sum(b.tokens for b in blocks)
    try:
        check_context_openai(prompt_tokens, window)
        reply = state.script.reply_for(ScriptRequest.from_body("openai", body))
    except RequestRejected as error:
        reject(error.status, openai_error_body(error.message, error.error_type, error.param,
                                               error.code), {})
        return
    except Exception as error:  # a broken script is the simulator user's bug: show it
        reject(500, openai_error_body(f"simulator script failed: {error!r}", "server_error",
                                      None, None), {})
        return
    if fault is not None and fault.kind == "stream_cut" and not reply.tool_calls:
        reply = CUT_REPLY
    if fault is not None and fault.kind == "refusal":  # B27, O-shape: message.refusal
        reply = Reply(text=fault.message or "Cannot help (test)", stop_reason="refusal")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    prepared = prepare_reply(reply, max_tokens=int(limit) if limit is not None else None,
                             id_prefix=f"call_sim_{number:04d}")
    outcome = state.cache.process(blocks, namespace=f"openai:{model}",
                                  lookback=None if explicit else len(blocks))
    cached = outcome.cache_read_input_tokens
    details: dict[str, int] = {"cached_tokens": cached, "audio_tokens": 0}
    if explicit:
        details["cache_write_tokens"] = outcome.cache_creation_input_tokens
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": prepared.output_tokens,
             "total_tokens": prompt_tokens + prepared.output_tokens,
             "prompt_tokens_details": details,
             "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}
    state.record(RecordedRequest(endpoint="openai", body=body, status=200, usage=usage,
                                 clock=now, fault=fault.kind if fault else None,
                                 api_key=api_key))
    base = {"id": f"chatcmpl-sim-{number:06d}", "created": int(now), "model": model,
            "system_fingerprint": "fp_simulator"}
    if not stream:
        io.send_json(200, {**base, "object": "chat.completion",
                           "choices": [{"index": 0, "message": _message(prepared),
                                        "logprobs": None,
                                        "finish_reason": _FINISH.get(prepared.stop, "stop")}],
                           "usage": usage}, headers)
        return
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    if fault is not None and fault.kind == "no_usage":
        include_usage = False
    _stream(io, headers, base, prepared, usage if include_usage else None, fault)


def _message(prepared: PreparedReply) -> dict[str, Any]:
    refused = prepared.stop == "refusal"
    message: dict[str, Any] = {"role": "assistant",
                               "content": None if refused else (prepared.text or None),
                               "refusal": prepared.text if refused else None}
    if prepared.calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in prepared.calls]
    return message


def _stream(io: WireIO, headers: dict[str, str], base: dict[str, Any], prepared: PreparedReply,
            usage: dict[str, Any] | None, fault: Fault | None) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload = {**base, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                "finish_reason": finish}]}
        if usage is not None:
            payload["usage"] = None
        return _data(payload)

    io.start_stream(headers)
    io.write(chunk({"role": "assistant", "content": "", "refusal": None}))
    erroring = fault is not None and fault.kind == "stream_error"
    field = "refusal" if prepared.stop == "refusal" else "content"
    for n, piece in enumerate(prepared.pieces):
        if erroring and fault is not None and n == fault.after_events:
            break
        prepared.pause()
        io.write(chunk({field: piece}))
    if erroring and fault is not None:
        io.write(_data(openai_error_body(fault.message or "The server had an error while "
                                         "processing your request. Sorry about that!",
                                         fault.error_type or "server_error", None, fault.code)))
        io.end_stream()
        return
    for index, call in enumerate(prepared.calls):
        io.write(chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                        "function": {"name": call.name, "arguments": ""}}]}))
        pieces = call.chunks()
        for n, piece in enumerate(pieces):
            if fault is not None and fault.kind == "stream_cut" \
                    and n >= min(fault.after_events, len(pieces) - 1):
                io.cut()
                return
            prepared.pause()
            io.write(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    io.write(chunk({}, _FINISH.get(prepared.stop, "stop")))
    if usage is not None:
        io.write(_data({**base, "object": "chat.completion.chunk", "choices": [],
                        "usage": usage}))
    io.write(_data("[DONE]"))
    io.end_stream()
