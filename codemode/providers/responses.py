"""The Responses wire (``POST /responses``, streamed): function tools, freeform custom
tools (optionally constrained by a lark grammar), and reasoning items that are sent
back encrypted because nothing is stored server-side (``store: false``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from codemode.providers.base import (
    AssistantMessage,
    Completed,
    Message,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from codemode.providers.errors import classify
from codemode.providers.output_limit import settle_completed
from codemode.providers.transport import loads_event, stream_cut
from codemode.providers.wire import WireProvider, json_arguments

_TERMINAL = {"response.completed", "response.incomplete"}


class ResponsesProvider(WireProvider):
    """A Responses API client."""

    wire = "responses"

    def build_body(self, request: ModelRequest) -> dict[str, object]:
        body: dict[str, object] = {
            "model": request.model,
            "input": render_input(request.messages, request.tools),
            "stream": True,
            "store": False,
        }
        if request.instructions:
            body["instructions"] = request.instructions
        if request.tools:
            body["tools"] = [render_tool(spec) for spec in request.tools]
            body["tool_choice"] = "auto"
            body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.max_output_tokens is not None:
            body["max_output_tokens"] = request.max_output_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.reasoning_effort is not None:
            body["reasoning"] = {"effort": request.reasoning_effort, "summary": "auto"}
            # With store=false a reasoning item can only be sent back encrypted.
            body["include"] = ["reasoning.encrypted_content"]
        if request.output_schema is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": "output",
                    "schema": request.output_schema,
                    "strict": True,
                }
            }
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        state = _ResponsesStream()
        ctx = self.transport.context(request.model)
        body = self.build_body(request)
        async with aclosing(self.transport.events("responses", body,
                                                  model=request.model)) as events:
            async for sse in events:
                if not sse.data.strip():
                    continue
                event = loads_event(self.name, sse.data)
                kind = (event.get("type") if isinstance(event, dict) else None) or sse.event
                if kind in ("error", "response.failed"):
                    raise classify(ctx, status=None, payload=event, in_stream=True)
                for out in state.feed(kind, event):
                    yield out
                if kind in _TERMINAL:
                    break
        if state.finished is None:
            raise stream_cut(self.name, "response.completed")
        yield settle_completed(state.completed(), request.max_output_tokens)


def render_tool(spec: ToolSpec) -> dict[str, object]:
    if spec.freeform is None:
        return {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
            "strict": False,
        }
    if spec.freeform.grammar:
        fmt: dict[str, object] = {
            "type": "grammar",
            "syntax": "lark",
            "definition": spec.freeform.grammar,
        }
    else:
        fmt = {"type": "text"}
    return {"type": "custom", "name": spec.name, "description": spec.description, "format": fmt}


def render_input(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    # A result's item type must match its call's (custom or function), whatever the
    # result message says.
    freeform_calls = {
        call.id: call.freeform
        for message in messages if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }
    for message in messages:
        if isinstance(message, UserMessage):
            items.append({
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": message.text}]
                + [{"type": "input_image", "image_url": i.data_url} for i in message.images],
            })
        elif isinstance(message, ToolResultMessage):
            freeform = freeform_calls.get(message.call_id, message.freeform)
            kind = "custom_tool_call_output" if freeform else "function_call_output"
            items.append({"type": kind, "call_id": message.call_id, "output": message.content})
        else:
            if message.wire == "responses":
                items.extend(_reasoning_item(item) for item in message.opaque
                             if item.get("type") == "reasoning" and item.get("encrypted_content"))
            if message.text:
                items.append(_assistant_item(message))
            for call in message.tool_calls:
                if call.freeform:
                    items.append({"type": "custom_tool_call", "call_id": call.id,
                                  "name": call.name, "input": call.arguments})
                else:
                    items.append({"type": "function_call", "call_id": call.id,
                                  "name": call.name, "arguments": json_arguments(call, tools)})
    return items


def _assistant_item(message: AssistantMessage) -> dict[str, object]:
    """An assistant message in one of the two forms the API documents for input.

    One this wire received goes back as the output item it was
    (``ResponseOutputMessageParam``: ``id`` and ``status`` required, and an output_text
    part's ``annotations``). One without a service id (another wire's, an older
    recording's) is an ``EasyInputMessageParam``, role and text: an id made up here
    would name an item the service never stored.
    """
    ids = [item for item in message.opaque if item.get("type") == "message"]
    if message.wire == "responses" and ids and isinstance(ids[0].get("id"), str):
        status = ids[0].get("status")
        return {
            "type": "message",
            "role": "assistant",
            "id": ids[0]["id"],
            "status": status if status in ("in_progress", "completed", "incomplete")
            else "completed",
            "content": [{"type": "output_text", "text": message.text, "annotations": []}],
        }
    return {"type": "message", "role": "assistant", "content": message.text}


def _reasoning_item(item: dict[str, object]) -> dict[str, object]:
    # Output-only fields (status) are refused when the item is sent back as input.
    keep = ("type", "id", "summary", "encrypted_content")
    return {k: item[k] for k in keep if k in item}


@dataclass
class _Call:
    call_id: str
    name: str
    freeform: bool
    index: int
    arguments: list[str] = field(default_factory=list)
    final: str | None = None


@dataclass
class _ResponsesStream:
    text: list[str] = field(default_factory=list)
    done_text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    opaque: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)  # by item id
    usage: Usage = field(default_factory=Usage)
    finished: str | None = None
    incomplete_reason: str | None = None

    def feed(self, kind: str, event: dict[str, Any]) -> list[StreamEvent]:
        if kind == "response.output_text.delta":
            piece = event.get("delta") or ""
            self.text.append(piece)
            return [TextDelta(text=piece)] if piece else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            piece = event.get("delta") or ""
            self.reasoning.append(piece)
            return [ReasoningDelta(text=piece)] if piece else []
        if kind == "response.reasoning_summary_part.added" and self.reasoning:
            self.reasoning.append("\n\n")
            return [ReasoningDelta(text="\n\n")]
        if kind == "response.output_item.added":
            return self._item_added(event.get("item") or {}, event)
        if kind in ("response.function_call_arguments.delta",
                    "response.custom_tool_call_input.delta"):
            call = self._call_for(event)
            piece = event.get("delta") or ""
            if call is None or not piece:
                return []
            call.arguments.append(piece)
            return [ToolCallDelta(index=call.index, arguments=piece)]
        if kind == "response.output_item.done":
            return self._item_done(event.get("item") or {}, event)
        if kind in _TERMINAL:
            response = event.get("response") or {}
            self.finished = kind
            if isinstance(response.get("usage"), dict):
                self.usage = usage_from(response["usage"])
            details = response.get("incomplete_details") or {}
            self.incomplete_reason = details.get("reason") if isinstance(details, dict) else None
        return []

    def _item_added(self, item: dict[str, Any], event: dict[str, Any]) -> list[StreamEvent]:
        kind = item.get("type")
        if kind not in ("function_call", "custom_tool_call"):
            return []
        key = str(item.get("id") or event.get("output_index") or len(self.calls))
        call = _Call(
            call_id=item.get("call_id") or key,
            name=item.get("name") or "",
            freeform=kind == "custom_tool_call",
            index=len(self.calls),
        )
        self.calls[key] = call
        return [ToolCallDelta(index=call.index, id=call.call_id, name=call.name)]

    def _call_for(self, event: dict[str, Any]) -> _Call | None:
        key = event.get("item_id")
        if key is not None and str(key) in self.calls:
            return self.calls[str(key)]
        index = event.get("output_index")
        return self.calls.get(str(index)) if index is not None else None

    def _item_done(self, item: dict[str, Any], event: dict[str, Any]) -> list[StreamEvent]:
        kind = item.get("type")
        if kind == "reasoning":
            self.opaque.append(item)
            if not self.reasoning:  # no deltas came: take the summary from the item
                summary = [p.get("text", "") for p in item.get("summary") or []]
                self.reasoning.append("\n\n".join(s for s in summary if s))
        elif kind == "message":
            if isinstance(item.get("id"), str):  # sent back with the message next turn
                self.opaque.append({"type": "message", "id": item["id"],
                                    "status": item.get("status") or "completed"})
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    self.done_text.append(part.get("text") or "")
        elif kind in ("function_call", "custom_tool_call"):
            events: list[StreamEvent] = []
            call = self._call_for({"item_id": item.get("id"),
                                   "output_index": event.get("output_index")})
            if call is None:  # a done item without an added one: take it whole
                events = self._item_added(item, event)
                call = self._call_for({"item_id": item.get("id"),
                                       "output_index": event.get("output_index")})
            assert call is not None
            final = item.get("input") if kind == "custom_tool_call" else item.get("arguments")
            if isinstance(final, str):
                call.final = final
            call.call_id = item.get("call_id") or call.call_id
            call.name = item.get("name") or call.name
            return events
        return []

    def completed(self) -> Completed:
        calls = [
            ToolCall(
                id=c.call_id,
                name=c.name,
                arguments=c.final if c.final is not None else "".join(c.arguments),
                freeform=c.freeform,
            )
            for c in self.calls.values()
        ]
        for call in calls:
            if not call.freeform and not call.arguments:
                call.arguments = "{}"
        text = "".join(self.done_text) if self.done_text else "".join(self.text)
        if self.finished == "response.incomplete":
            reason = self.incomplete_reason or "incomplete"
            stop = "length" if reason == "max_output_tokens" else reason
        else:
            stop = "tool_calls" if calls else "stop"
        message = AssistantMessage(
            text=text,
            reasoning="".join(self.reasoning),
            tool_calls=calls,
            opaque=self.opaque,
            wire="responses",
        )
        return Completed(message=message, usage=self.usage, stop_reason=stop)


def usage_from(raw: dict[str, Any]) -> Usage:
    input_details = raw.get("input_tokens_details") or {}
    output_details = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        cached_input_tokens=int(input_details.get("cached_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        reasoning_tokens=int(output_details.get("reasoning_tokens") or 0),
    )
