"""The Responses wire: ``response.*`` events (reasoning summaries, messages, function and
custom tool calls) ending in ``response.completed`` or ``response.incomplete``; errors
are OpenAI-shaped bodies, or ``response.failed`` inside a stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from codemode_testkit.scripted import chat
from codemode_testkit.scripted.encoding import (
    Event,
    call_arguments,
    estimate_usage,
    split_args,
    split_text,
    stop_reason,
)

if TYPE_CHECKING:
    from codemode_testkit.scripted.replies import RecordedRequest, ScriptedReply


def events(request: RecordedRequest, reply: ScriptedReply, seq: int) -> Iterator[Event]:
    model = request.body.get("model", "scripted")
    counter = iter(range(1_000_000))
    response = {"id": f"resp_{seq}", "object": "response", "model": model,
                "status": "in_progress", "output": []}

    def event(kind: str, **fields: Any) -> Event:
        return kind, json.dumps({"type": kind, "sequence_number": next(counter), **fields})

    yield event("response.created", response=response)
    yield event("response.in_progress", response=response)
    output: list[dict[str, Any]] = []
    if reply.reasoning:
        index, item_id = len(output), f"rs_{seq}"
        yield event("response.output_item.added", output_index=index,
                    item={"type": "reasoning", "id": item_id, "summary": []})
        part = {"type": "summary_text", "text": ""}
        yield event("response.reasoning_summary_part.added", item_id=item_id,
                    output_index=index, summary_index=0, part=part)
        for piece in split_text(reply.reasoning):
            yield event("response.reasoning_summary_text.delta", item_id=item_id,
                        output_index=index, summary_index=0, delta=piece)
        yield event("response.reasoning_summary_text.done", item_id=item_id,
                    output_index=index, summary_index=0, text=reply.reasoning)
        item: dict[str, Any] = {"type": "reasoning", "id": item_id,
                                "summary": [{"type": "summary_text", "text": reply.reasoning}]}
        if "reasoning.encrypted_content" in (request.body.get("include") or []):
            item["encrypted_content"] = f"enc:{seq}:{len(reply.reasoning)}"
        output.append(item)
        yield event("response.output_item.done", output_index=index, item=item)
    if reply.text:
        index, item_id = len(output), f"msg_{seq}"
        item = {"type": "message", "id": item_id, "role": "assistant",
                "status": "in_progress", "content": []}
        yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.content_part.added", item_id=item_id, output_index=index,
                    content_index=0, part={"type": "output_text", "text": "", "annotations": []})
        for piece in split_text(reply.text):
            yield event("response.output_text.delta", item_id=item_id, output_index=index,
                        content_index=0, delta=piece)
        yield event("response.output_text.done", item_id=item_id, output_index=index,
                    content_index=0, text=reply.text)
        done_part = {"type": "output_text", "text": reply.text, "annotations": []}
        yield event("response.content_part.done", item_id=item_id, output_index=index,
                    content_index=0, part=done_part)
        item = {**item, "status": "completed", "content": [done_part]}
        output.append(item)
        yield event("response.output_item.done", output_index=index, item=item)
    for i, call in enumerate(reply.tool_calls):
        index = len(output)
        call_id = call.id or f"call_{seq}_{i}"
        text = call_arguments(request, call, "responses")
        if call.freeform:
            item_id, key, kind = f"ctc_{seq}_{i}", "input", "custom_tool_call"
            delta_kind = "response.custom_tool_call_input"
        else:
            item_id, key, kind = f"fc_{seq}_{i}", "arguments", "function_call"
            delta_kind = "response.function_call_arguments"
        item = {"type": kind, "id": item_id, "call_id": call_id, "name": call.name,
                key: "", "status": "in_progress"}
        yield event("response.output_item.added", output_index=index, item=item)
        for piece in split_args(text):
            yield event(f"{delta_kind}.delta", item_id=item_id, output_index=index, delta=piece)
        yield event(f"{delta_kind}.done", item_id=item_id, output_index=index, **{key: text})
        item = {**item, key: text, "status": "completed"}
        output.append(item)
        yield event("response.output_item.done", output_index=index, item=item)
    usage = estimate_usage(request, reply)
    raw_usage = {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }
    if stop_reason(reply) == "length":
        yield event("response.incomplete", response={
            **response, "status": "incomplete", "output": output, "usage": raw_usage,
            "incomplete_details": {"reason": "max_output_tokens"}})
    else:
        yield event("response.completed", response={
            **response, "status": "completed", "output": output, "usage": raw_usage})


# The Responses API answers errors with the same body as Chat Completions.
error_body = chat.error_body


def error_event(reply: ScriptedReply, request: RecordedRequest) -> Event:
    """An error inside the stream: ``response.failed`` with the error's code and message."""
    err = error_body(reply, request)["error"]
    code = err["code"] or err["type"]
    return "response.failed", json.dumps({"type": "response.failed", "response": {
        "id": "resp_failed", "status": "failed",
        "error": {"code": code, "message": err["message"]}}})
