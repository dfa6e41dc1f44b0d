"""The Chat Completions wire (``POST /chat/completions`` with ``stream: true``): OpenAI and
the many services that copy it (DeepSeek, Moonshot, DashScope, Z.ai, OpenRouter, Groq,
Ollama, LM Studio, vLLM, llama.cpp)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from codemode.providers.base import (
    AssistantMessage,
    BadRequestError,
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
from codemode.providers.output_limit import settle_stop_reason
from codemode.providers.transport import loads_event, stream_cut
from codemode.providers.wire import WireProvider, function_parameters, json_arguments


class ChatProvider(WireProvider):
    """A Chat Completions client.

    ``max_tokens_field``: the name of the output limit (OpenAI's reasoning models want
    ``max_completion_tokens``; most other services only know ``max_tokens``).
    ``send_reasoning``: put an assistant message's reasoning back as ``reasoning_content``
    (DeepSeek and Kimi require it on tool-calling steps in thinking mode and ignore it
    elsewhere; most services that do not know the field ignore it too).
    """

    wire = "chat"

    def __init__(
        self, *, send_reasoning: bool = True, max_tokens_field: str = "max_tokens", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.send_reasoning = send_reasoning
        self.max_tokens_field = max_tokens_field
        # Send "" rather than null as the content of an assistant message that only
        # calls tools (set on the first refusal of null; see ``stream``).
        self.empty_content = False

    def build_body(self, request: ModelRequest) -> dict[str, object]:
        body: dict[str, object] = {
            "model": request.model,
            "messages": render_messages(request, send_reasoning=self.send_reasoning,
                                        empty_content=self.empty_content),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [render_tool(spec) for spec in request.tools]
            if not request.parallel_tool_calls:
                # Sent only to turn it off: parallel calls are the default, and several
                # compatible servers refuse fields they do not know.
                body["parallel_tool_calls"] = False
        if request.max_output_tokens is not None:
            body[self.max_tokens_field] = request.max_output_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.seed is not None:
            body["seed"] = request.seed
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        try:
            async for event in self._stream(request):
                yield event
        except BadRequestError as exc:
            # llama-cpp-python's server refuses "content": null beside tool_calls (a
            # validation error, HTTP 500) where OpenAI and llama-server want it: learn
            # that once and send "" to this server from then on.
            if self.empty_content or not _refuses_null_content(exc, self.build_body(request)):
                raise
            self.empty_content = True
            async for event in self._stream(request):
                yield event

    async def _stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        state = _ChatStream()
        ctx = self.transport.context(request.model)
        body = self.build_body(request)
        chunks = 0
        async with aclosing(self.transport.events("chat/completions", body,
                                                  model=request.model)) as events:
            async for sse in events:
                data = sse.data.strip()
                if data == "[DONE]":
                    state.done = True
                    break
                if not data:
                    continue
                chunk = loads_event(self.name, data)
                chunks += 1
                if sse.event == "error" or (isinstance(chunk, dict) and chunk.get("error")):
                    raise classify(ctx, status=None, payload=chunk, in_stream=True)
                for event in state.feed(chunk):
                    yield event
        if chunks == 0 and not state.done:
            # An event stream closed before its first event: llama-cpp-python's server
            # does that when the request fails after it sent the headers (a prompt
            # longer than the context, tool_choice "required"). The same request
            # without streaming gets the error as a status and a body.
            for event in await self._unstreamed(body, request.model):
                yield event
            return
        # Some local servers end with a finish_reason and no [DONE]; that answer is whole.
        if not state.done and state.finish_reason is None:
            raise stream_cut(self.name, "[DONE]")
        yield state.completed(request.max_output_tokens)

    async def _unstreamed(self, body: dict[str, Any], model: str) -> list[StreamEvent]:
        limit = body.get(self.max_tokens_field)
        plain = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        reply = await self.transport.post_json("chat/completions", plain, model=model)
        state = _ChatStream()
        events: list[StreamEvent] = []
        for choice in reply.get("choices") or []:
            message = choice.get("message") or {}
            chunk = {"choices": [{"index": choice.get("index", 0), "delta": message,
                                  "finish_reason": choice.get("finish_reason")}]}
            events += state.feed(chunk)
        state.feed({"usage": reply.get("usage")} if reply.get("usage") else {})
        if state.finish_reason is None and not events:
            raise stream_cut(self.name, "its first event")
        return [*events, state.completed(limit if isinstance(limit, int) else None)]


def render_tool(spec: ToolSpec) -> dict[str, object]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": function_parameters(spec),
        },
    }


def render_messages(
    request: ModelRequest, *, send_reasoning: bool = True, empty_content: bool = False
) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        out.append(render_message(message, request.tools, send_reasoning=send_reasoning,
                                  empty_content=empty_content))
    return out


def _refuses_null_content(error: BadRequestError, body: dict[str, Any]) -> bool:
    """Whether ``error`` is a server refusing the null content this body holds."""
    has_null = any(m.get("role") == "assistant" and m.get("content") is None
                   for m in body.get("messages", []))
    text = str(error).lower()
    return has_null and "content" in text and ("valid string" in text or "none" in text
                                               or "null" in text or "attribute" in text)


def render_message(
    message: Message,
    tools: Sequence[ToolSpec],
    *,
    send_reasoning: bool = True,
    empty_content: bool = False,
) -> dict[str, object]:
    if isinstance(message, UserMessage):
        if not message.images:
            return {"role": "user", "content": message.text}
        parts: list[dict[str, object]] = [{"type": "text", "text": message.text}]
        parts += [{"type": "image_url", "image_url": {"url": i.data_url}} for i in message.images]
        return {"role": "user", "content": parts}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    item: dict[str, object] = {
        "role": "assistant",
        "content": message.text or ("" if empty_content else None),
    }
    if send_reasoning and message.reasoning:
        item["reasoning_content"] = message.reasoning
    if message.tool_calls:
        item["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json_arguments(call, tools)},
            }
            for call in message.tool_calls
        ]
    return item


@dataclass
class _Call:
    id: str
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _ChatStream:
    """Assembles one streamed answer: text, reasoning and tool calls by index."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[Any, _Call] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    done: bool = False
    pieces: int = 0  # non-empty pieces of text and arguments streamed (not reasoning)

    def feed(self, chunk: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if not isinstance(chunk, dict):
            return events
        if isinstance(chunk.get("usage"), dict):
            self.usage = usage_from(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            # Servers name it reasoning_content (DeepSeek, Kimi, Qwen, vLLM, llama.cpp) or
            # reasoning (OpenRouter, newer vLLM); a few send both with the same text.
            piece = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(piece, str) and piece:
                self.reasoning.append(piece)
                events.append(ReasoningDelta(text=piece))
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                self.pieces += 1
                self.text.append(piece)
                events.append(TextDelta(text=piece))
            for raw in delta.get("tool_calls") or []:
                events.append(self._tool_delta(raw))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def _tool_delta(self, raw: dict[str, Any]) -> ToolCallDelta:
        # Calls are keyed by index; a server that omits it is keyed by id, and a chunk
        # with neither continues the latest call.
        key = raw.get("index")
        if key is None:
            key = raw.get("id") or (next(reversed(self.calls)) if self.calls else 0)
        fn = raw.get("function") or {}
        call = self.calls.get(key)
        if call is None:
            # Some local servers send no id; the agent needs one to pair the result.
            call = self.calls[key] = _Call(id=raw.get("id") or f"call_{len(self.calls)}")
        if fn.get("name") and not call.name:
            call.name = fn["name"]
        args = fn.get("arguments")
        if isinstance(args, dict):  # a few servers send the object, not its text
            args = json.dumps(args)
        if args:
            self.pieces += 1
            call.arguments.append(args)
        return ToolCallDelta(
            index=list(self.calls).index(key),
            id=raw.get("id"),
            name=fn.get("name"),
            arguments=args or "",
        )

    def completed(self, limit: int | None = None) -> Completed:
        """The answer; ``limit``: the output-token limit the request asked for."""
        raw = [(c, "".join(c.arguments)) for c in self.calls.values()]
        stop = self.finish_reason or "stop"
        if raw and stop == "stop":
            stop = "tool_calls"
        stop = settle_stop_reason(
            stop,
            limit=limit,
            output_tokens=self.usage.output_tokens,
            reasoning_tokens=self.usage.reasoning_tokens,
            pieces=self.pieces,
            last_arguments=raw[-1][1] if raw else None,
        )
        # A call with no arguments at all is one that takes none, except as the last
        # of a cut-off reply: there it stays empty, so that it counts as unfinished.
        last = len(raw) - 1
        calls = [
            ToolCall(
                id=c.id,
                name=c.name,
                arguments=args or ("" if stop == "length" and i == last else "{}"),
            )
            for i, (c, args) in enumerate(raw)
        ]
        message = AssistantMessage(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            tool_calls=calls,
            wire="chat",
        )
        return Completed(message=message, usage=self.usage, stop_reason=stop)


def usage_from(raw: dict[str, Any]) -> Usage:
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = (
        prompt_details.get("cached_tokens")
        or raw.get("prompt_cache_hit_tokens")  # DeepSeek
        or raw.get("cached_tokens")  # Moonshot
        or 0
    )
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        cached_input_tokens=int(cached),
        output_tokens=int(raw.get("completion_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )
