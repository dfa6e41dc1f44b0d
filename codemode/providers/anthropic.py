"""The Anthropic Messages wire (``POST /messages``, streamed): content blocks, ``tool_use``
/ ``tool_result``, and thinking blocks that go back, signed, before the tool calls they
led to. Also spoken by several other services' Anthropic-compatible endpoints."""

from __future__ import annotations

import json
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
from codemode.providers.wire import WireProvider, arguments_object, function_parameters

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
# Thinking budgets for the neutral reasoning efforts.
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 32000}
# Anthropic caches a prompt prefix only up to explicit breakpoints.
_CACHE = {"type": "ephemeral"}
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                 "max_tokens": "length", "refusal": "content_filter"}


class AnthropicProvider(WireProvider):
    """An Anthropic Messages client."""

    wire = "anthropic"
    auth_style = "x-api-key"

    def __init__(self, **kwargs: Any) -> None:
        headers = dict(kwargs.pop("headers", None) or {})
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
        super().__init__(headers=headers, **kwargs)

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        max_tokens = request.max_output_tokens or DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": max_tokens,
            "messages": render_messages(request.messages, request.tools),
            "stream": True,
        }
        if request.instructions:
            body["system"] = [{"type": "text", "text": request.instructions,
                               "cache_control": dict(_CACHE)}]
        if body["messages"]:
            # A second cache breakpoint at the end of the conversation: the next request
            # (same prefix plus one step) reads everything up to here from the cache.
            last = body["messages"][-1]["content"][-1]
            if last.get("type") in ("text", "tool_result", "tool_use"):  # not on thinking
                last["cache_control"] = dict(_CACHE)
        if request.tools:
            body["tools"] = [render_tool(spec) for spec in request.tools]
            choice: dict[str, Any] = {"type": "auto"}
            if not request.parallel_tool_calls:
                choice["disable_parallel_tool_use"] = True
            body["tool_choice"] = choice
        budget = _BUDGETS.get(request.reasoning_effort or "")
        if budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            # The budget is part of max_tokens and must leave room for the answer.
            body["max_tokens"] = max(max_tokens, budget + 4096)
        elif request.temperature is not None:
            # Thinking requires the default temperature, so it is only sent without.
            body["temperature"] = request.temperature
        elif request.top_p is not None:
            # Newer Claude models refuse temperature and top_p together: one at most.
            body["top_p"] = request.top_p
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        state = _MessagesStream()
        ctx = self.transport.context(request.model)
        body = self.build_body(request)
        async with aclosing(self.transport.events("messages", body,
                                                  model=request.model)) as events:
            async for sse in events:
                if not sse.data.strip():
                    continue
                event = loads_event(self.name, sse.data)
                kind = (event.get("type") if isinstance(event, dict) else None) or sse.event
                if kind == "error":
                    raise classify(ctx, status=None, payload=event, in_stream=True)
                for out in state.feed(kind, event):
                    yield out
                if kind == "message_stop":
                    break
        if not state.stopped:
            raise stream_cut(self.name, "message_stop")
        yield settle_completed(state.completed(), _int(body.get("max_tokens")))


def render_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": function_parameters(spec),
    }


def render_messages(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Messages as alternating user/assistant turns; tool results (and any user text that
    follows them) merge into one user message."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks(message, tools)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: Message, tools: Sequence[ToolSpec]) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        images = [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
            }
            for i in message.images
        ]
        return "user", [*images, {"type": "text", "text": message.text}]
    if isinstance(message, ToolResultMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.call_id,
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    blocks: list[dict[str, Any]] = []
    if message.wire == "anthropic":
        blocks.extend(
            dict(item) for item in message.opaque
            if item.get("type") in ("thinking", "redacted_thinking")
        )
    if message.text:  # an empty text block is refused
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        blocks.append({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": arguments_object(call, tools),
        })
    return "assistant", blocks


@dataclass
class _Block:
    kind: str
    parts: list[str] = field(default_factory=list)
    signature: str = ""
    data: str = ""
    id: str = ""
    name: str = ""
    call_index: int = -1


@dataclass
class _MessagesStream:
    blocks: dict[int, _Block] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    counts: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    stopped: bool = False
    calls: int = 0

    def feed(self, kind: str, event: dict[str, Any]) -> list[StreamEvent]:
        if kind == "message_start":
            self._usage((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            return self._start(int(event.get("index", len(self.order))),
                               event.get("content_block") or {})
        elif kind == "content_block_delta":
            block = self.blocks.get(int(event.get("index", -1)))
            return self._delta(block, event.get("delta") or {}) if block else []
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self._usage(event.get("usage") or {})
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _usage(self, raw: dict[str, Any]) -> None:
        # message_start and message_delta each carry some counts; the latest of each wins.
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                    "output_tokens"):
            if isinstance(raw.get(key), int):
                self.counts[key] = raw[key]
        # Anthropic's input_tokens leaves out cached tokens; ours counts them (as OpenAI's
        # prompt_tokens do), with the cached share in cached_input_tokens.
        self.usage = Usage(
            input_tokens=sum(self.counts.get(k, 0) for k in (
                "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")),
            cached_input_tokens=self.counts.get("cache_read_input_tokens", 0),
            cache_write_input_tokens=self.counts.get("cache_creation_input_tokens", 0),
            output_tokens=self.counts.get("output_tokens", 0),
        )

    def _start(self, index: int, raw: dict[str, Any]) -> list[StreamEvent]:
        block = _Block(kind=raw.get("type") or "text")
        self.blocks[index] = block
        self.order.append(index)
        if block.kind == "text" and raw.get("text"):
            block.parts.append(raw["text"])
            return [TextDelta(text=raw["text"])]
        if block.kind == "thinking" and raw.get("thinking"):
            block.parts.append(raw["thinking"])
            return [ReasoningDelta(text=raw["thinking"])]
        if block.kind == "redacted_thinking":
            block.data = raw.get("data") or ""
        if block.kind == "tool_use":
            block.id = raw.get("id") or f"toolu_{self.calls}"
            block.name = raw.get("name") or ""
            block.call_index = self.calls
            self.calls += 1
            if raw.get("input"):  # some compatible servers send the whole input here
                block.parts.append(json.dumps(raw["input"]))
            return [ToolCallDelta(index=block.call_index, id=block.id, name=block.name,
                                  arguments="".join(block.parts))]
        return []

    def _delta(self, block: _Block, delta: dict[str, Any]) -> list[StreamEvent]:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            block.parts.append(delta["text"])
            return [TextDelta(text=delta["text"])]
        if kind == "thinking_delta" and delta.get("thinking"):
            block.parts.append(delta["thinking"])
            return [ReasoningDelta(text=delta["thinking"])]
        if kind == "signature_delta":
            block.signature += delta.get("signature") or ""
        elif kind == "input_json_delta" and delta.get("partial_json"):
            block.parts.append(delta["partial_json"])
            return [ToolCallDelta(index=block.call_index, arguments=delta["partial_json"])]
        return []

    def completed(self) -> Completed:
        text: list[str] = []
        reasoning: list[str] = []
        opaque: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        for index in self.order:
            block = self.blocks[index]
            body = "".join(block.parts)
            if block.kind == "text":
                text.append(body)
            elif block.kind == "thinking":
                reasoning.append(body)
                opaque.append({"type": "thinking", "thinking": body, "signature": block.signature})
            elif block.kind == "redacted_thinking":
                opaque.append({"type": "redacted_thinking", "data": block.data})
            elif block.kind == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=body or "{}"))
        stop = _STOP_REASONS.get(self.stop_reason or "end_turn", self.stop_reason or "stop")
        message = AssistantMessage(
            text="".join(text),
            reasoning="\n\n".join(r for r in reasoning if r),
            tool_calls=calls,
            opaque=opaque,
            wire="anthropic",
        )
        return Completed(message=message, usage=self.usage, stop_reason=stop)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None
