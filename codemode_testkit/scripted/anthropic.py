"""The Anthropic Messages wire: ``message_start``, content blocks (thinking with a
signature, text, tool_use with partial JSON), ``message_delta`` and ``message_stop``;
errors are ``{"type": "error", "error": {...}}``, in the body or as an ``error`` event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from codemode_testkit.scripted.encoding import (
    Event,
    call_arguments,
    error_message,
    error_status,
    estimate_usage,
    split_args,
    split_text,
    stop_reason,
)

if TYPE_CHECKING:
    from codemode_testkit.scripted.replies import RecordedRequest, ScriptedReply


def events(request: RecordedRequest, reply: ScriptedReply, seq: int) -> Iterator[Event]:
    model = request.body.get("model", "scripted")
    usage = estimate_usage(request, reply)

    def event(kind: str, **fields: Any) -> Event:
        return kind, json.dumps({"type": kind, **fields})

    start_usage = {
        "input_tokens": usage.input_tokens - usage.cached_input_tokens
        - usage.cache_write_input_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "cache_creation_input_tokens": usage.cache_write_input_tokens,
        "output_tokens": 1,
    }
    yield event("message_start", message={
        "id": f"msg_{seq}", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage})
    yield event("ping")
    index = 0
    if reply.reasoning:
        yield event("content_block_start", index=index,
                    content_block={"type": "thinking", "thinking": "", "signature": ""})
        for piece in split_text(reply.reasoning):
            yield event("content_block_delta", index=index,
                        delta={"type": "thinking_delta", "thinking": piece})
        yield event("content_block_delta", index=index,
                    delta={"type": "signature_delta", "signature": f"sig_{seq}"})
        yield event("content_block_stop", index=index)
        index += 1
    if reply.text:
        yield event("content_block_start", index=index,
                    content_block={"type": "text", "text": ""})
        for piece in split_text(reply.text):
            yield event("content_block_delta", index=index,
                        delta={"type": "text_delta", "text": piece})
        yield event("content_block_stop", index=index)
        index += 1
    for i, call in enumerate(reply.tool_calls):
        call_id = call.id or f"toolu_{seq}_{i}"
        yield event("content_block_start", index=index, content_block={
            "type": "tool_use", "id": call_id, "name": call.name, "input": {}})
        for piece in split_args(call_arguments(request, call, "anthropic")):
            yield event("content_block_delta", index=index,
                        delta={"type": "input_json_delta", "partial_json": piece})
        yield event("content_block_stop", index=index)
        index += 1
    stop = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}.get(
        stop_reason(reply), stop_reason(reply))
    yield event("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
                usage={"output_tokens": usage.output_tokens})
    yield event("message_stop")


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def error_body(reply: ScriptedReply, request: RecordedRequest) -> dict[str, Any]:
    status = error_status(reply)
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    message = error_message("anthropic", reply, request)
    return {"type": "error", "error": {"type": kind, "message": message, **reply.error_fields}}


def error_event(reply: ScriptedReply, request: RecordedRequest) -> Event:
    return "error", json.dumps(error_body(reply, request))
