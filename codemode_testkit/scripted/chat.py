"""The Chat Completions wire: ``chat.completion.chunk`` events ending in ``[DONE]``, and
OpenAI-shaped error bodies (the Responses wire uses the same)."""

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
    base = {"id": f"chatcmpl-{seq}", "object": "chat.completion.chunk",
            "created": 1700000000, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return None, json.dumps({**base, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    for piece in split_text(reply.reasoning):
        yield chunk({"reasoning_content": piece})
    for piece in split_text(reply.text):
        yield chunk({"content": piece})
    for i, call in enumerate(reply.tool_calls):
        call_id = call.id or f"call_{seq}_{i}"
        head = {"index": i, "id": call_id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in split_args(call_arguments(request, call, "chat")):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, stop_reason(reply))
    usage = estimate_usage(request, reply)
    raw_usage = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }
    yield None, json.dumps({**base, "choices": [], "usage": raw_usage})
    yield None, "[DONE]"


def error_body(reply: ScriptedReply, request: RecordedRequest) -> dict[str, Any]:
    """An OpenAI error object: message, type, param and code."""
    message = error_message("chat", reply, request)
    status = error_status(reply)
    kind = ("server_error" if status >= 500 else "rate_limit_exceeded" if status == 429
            else "invalid_request_error")
    code = reply.error_code
    if code is None:
        code = {401: "invalid_api_key", 404: "model_not_found",
                429: "rate_limit_exceeded"}.get(status, "server_error" if status >= 500 else None)
    error = {"message": message, "type": kind, "param": None, "code": code}
    return {"error": {**error, **reply.error_fields}}


def error_event(reply: ScriptedReply, request: RecordedRequest) -> Event:
    """An error inside the stream: a data-only event with the error body."""
    return None, json.dumps(error_body(reply, request))
