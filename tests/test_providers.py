"""The three provider wires, driven against the scripted model server over real HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from codemode.providers.base import (
    AssistantMessage,
    AuthenticationError,
    BadRequestError,
    Completed,
    ContextOverflowError,
    FreeformSpec,
    ModelNotFoundError,
    ModelRequest,
    Provider,
    RateLimitError,
    ReasoningDelta,
    StreamEvent,
    StreamRestarted,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    ToolSpec,
    TransientError,
    Usage,
    UserMessage,
)
from codemode.providers.catalog import ProviderInfo, open_provider
from codemode.providers.retry import RetryPolicy, stream_with_retries
from codemode_testkit.scripted_server import ScriptedModelServer, ScriptedReply, ScriptedToolCall

WIRES = ["chat", "responses", "anthropic"]
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
SHELL = ToolSpec(
    name="shell",
    description="Run a command.",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)
EXEC = ToolSpec(
    name="exec",
    description="Run JavaScript.",
    freeform=FreeformSpec(field="code", grammar='start: /.+/s'),
)


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    return request.param


def serve(*replies: ScriptedReply | dict[str, Any]) -> ScriptedModelServer:
    return ScriptedModelServer(list(replies)).start()


@pytest.fixture
def servers() -> Iterator[list[ScriptedModelServer]]:
    started: list[ScriptedModelServer] = []
    yield started
    for server in started:
        server.stop()


def connect(server: ScriptedModelServer, wire: str, **kwargs: Any) -> Provider:
    info = ProviderInfo(name="scripted", base_url=server.base_url, wire_api=wire,
                        env_key="SCRIPTED_API_KEY")
    return open_provider(info, api_key="sk-test", **kwargs)


def ask(text: str = "hi", **kwargs: Any) -> ModelRequest:
    return ModelRequest(model="test-model", instructions="Be brief.",
                        messages=[UserMessage(text=text)], **kwargs)


async def collect(provider: Provider, request: ModelRequest) -> list[StreamEvent]:
    try:
        return [event async for event in provider.stream(request)]
    finally:
        await provider.aclose()


async def collect_retrying(
    provider: Provider, request: ModelRequest, policy: RetryPolicy = FAST
) -> list[StreamEvent]:
    try:
        return [event async for event in stream_with_retries(provider, request, policy)]
    finally:
        await provider.aclose()


def completed(events: list[StreamEvent]) -> Completed:
    done = [e for e in events if isinstance(e, Completed)]
    assert len(done) == 1, events
    assert events[-1] is done[0]
    return done[0]


def shown_text(events: list[StreamEvent]) -> str:
    """What a UI shows: text deltas, with everything before a restart dropped."""
    text = ""
    for event in events:
        if isinstance(event, StreamRestarted):
            text = ""
        elif isinstance(event, TextDelta):
            text += event.text
    return text


async def fails_with(provider: Provider, request: ModelRequest, kind: type) -> Exception:
    with pytest.raises(kind) as info:
        await collect(provider, request)
    return info.value


# --- streaming -----------------------------------------------------------------------


async def test_text_arrives_in_several_deltas(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(text="The quick brown fox jumps.")]) as server:
        events = await collect(connect(server, wire), ask())
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    assert "".join(deltas) == "The quick brown fox jumps."
    done = completed(events)
    assert done.message.text == "The quick brown fox jumps."
    assert done.message.wire == wire
    assert done.stop_reason == "stop"
    assert server.requests[-1].wire == wire
    assert server.requests[-1].body["stream"] is True


async def test_reasoning_streams_and_is_kept(wire: str) -> None:
    reply = ScriptedReply(reasoning="First check the file, then answer.", text="Done.")
    with ScriptedModelServer([reply]) as server:
        events = await collect(connect(server, wire), ask(reasoning_effort="medium"))
    reasoning = [e.text for e in events if isinstance(e, ReasoningDelta)]
    assert len(reasoning) >= 2
    assert "".join(reasoning) == reply.reasoning
    message = completed(events).message
    assert message.reasoning == reply.reasoning
    assert message.text == "Done."
    if wire == "anthropic":
        assert message.opaque == [{"type": "thinking", "thinking": reply.reasoning,
                                   "signature": "sig_1"}]
        assert server.requests[-1].body["thinking"]["type"] == "enabled"
    elif wire == "responses":
        assert [item["type"] for item in message.opaque] == ["reasoning", "message"]
        assert message.opaque[0]["encrypted_content"]
        assert server.requests[-1].body["include"] == ["reasoning.encrypted_content"]
    else:
        assert server.requests[-1].body["reasoning_effort"] == "medium"


async def test_one_tool_call(wire: str) -> None:
    call = ScriptedToolCall(name="shell", arguments={"cmd": "ls -la"}, id="call_a")
    with ScriptedModelServer([ScriptedReply(tool_calls=[call])]) as server:
        events = await collect(connect(server, wire), ask(tools=[SHELL]))
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) >= 2
    assert deltas[0].id == "call_a" and deltas[0].name == "shell"
    assert "".join(d.arguments for d in deltas) == '{"cmd": "ls -la"}'
    done = completed(events)
    assert done.message.tool_calls == [
        ToolCall(id="call_a", name="shell", arguments='{"cmd": "ls -la"}')
    ]
    assert done.stop_reason == "tool_calls"


async def test_parallel_tool_calls(wire: str) -> None:
    calls = [ScriptedToolCall(name="shell", arguments={"cmd": f"echo {i}" * 3}) for i in range(3)]
    with ScriptedModelServer([ScriptedReply(text="Running three.", tool_calls=calls)]) as server:
        events = await collect(connect(server, wire), ask(tools=[SHELL]))
    message = completed(events).message
    assert [json.loads(c.arguments)["cmd"] for c in message.tool_calls] == [
        "echo 0echo 0echo 0", "echo 1echo 1echo 1", "echo 2echo 2echo 2"]
    assert len({c.id for c in message.tool_calls}) == 3
    assert {d.index for d in events if isinstance(d, ToolCallDelta)} == {0, 1, 2}
    assert message.text == "Running three."


async def test_freeform_tool(wire: str) -> None:
    source = 'const r = await tools.shell({cmd: "ls"});\nconsole.log(r.stdout);'
    reply = ScriptedReply(tool_calls=[ScriptedToolCall(name="exec", arguments=source,
                                                       freeform=True)])
    with ScriptedModelServer([reply]) as server:
        events = await collect(connect(server, wire), ask(tools=[EXEC, SHELL]))
    call = completed(events).message.tool_calls[0]
    offered = server.requests[-1].body["tools"][0]
    if wire == "responses":
        assert offered == {"type": "custom", "name": "exec", "description": "Run JavaScript.",
                           "format": {"type": "grammar", "syntax": "lark",
                                      "definition": "start: /.+/s"}}
        assert call.freeform is True
        assert call.arguments == source
    else:
        schema = offered["function"]["parameters"] if wire == "chat" else offered["input_schema"]
        assert schema["properties"] == {"code": {"type": "string",
                                                 "description": "The code text."}}
        assert schema["required"] == ["code"]
        assert call.freeform is False
        assert json.loads(call.arguments) == {"code": source}


async def test_freeform_tool_without_grammar_is_plain_text() -> None:
    spec = ToolSpec(name="exec", description="Run JavaScript.", freeform=FreeformSpec())
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await collect(connect(server, "responses"), ask(tools=[spec]))
    assert server.requests[-1].body["tools"][0]["format"] == {"type": "text"}


async def test_length_stop_reason(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(text="cut sh", stop_reason="length")]) as server:
        events = await collect(connect(server, wire), ask(max_output_tokens=5))
    done = completed(events)
    assert done.stop_reason == "length"
    assert done.message.text == "cut sh"
    body = server.requests[-1].body
    field = {"chat": "max_tokens", "responses": "max_output_tokens", "anthropic": "max_tokens"}
    assert body[field[wire]] == 5


async def test_usage(wire: str) -> None:
    usage = Usage(input_tokens=1200, cached_input_tokens=1000, output_tokens=80,
                  reasoning_tokens=30)
    with ScriptedModelServer([ScriptedReply(text="ok", usage=usage)]) as server:
        events = await collect(connect(server, wire), ask())
    got = completed(events).usage
    if wire == "anthropic":  # the Messages wire reports no reasoning token count
        usage = usage.model_copy(update={"reasoning_tokens": 0})
    assert got == usage


async def test_anthropic_reports_prompt_cache_writes() -> None:
    usage = Usage(input_tokens=1500, cached_input_tokens=1000, cache_write_input_tokens=300,
                  output_tokens=80)
    with ScriptedModelServer([ScriptedReply(text="ok", usage=usage)]) as server:
        events = await collect(connect(server, "anthropic"), ask())
    assert completed(events).usage == usage
    assert (Usage(cache_write_input_tokens=2) + Usage(cache_write_input_tokens=3)
            ).cache_write_input_tokens == 5


async def test_default_usage_is_an_estimate(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(text="a reply of some length")]) as server:
        events = await collect(connect(server, wire), ask("x" * 400))
    usage = completed(events).usage
    assert usage.input_tokens > 100 and usage.output_tokens > 1


# --- rendering the conversation ------------------------------------------------------


def conversation(wire: str) -> ModelRequest:
    opaque: list[dict[str, Any]] = []
    if wire == "anthropic":
        opaque = [{"type": "thinking", "thinking": "Look first.", "signature": "sig_x"}]
    elif wire == "responses":
        opaque = [{"type": "reasoning", "id": "rs_1", "status": "completed",
                   "summary": [{"type": "summary_text", "text": "Look first."}],
                   "encrypted_content": "enc_abc"},
                  {"type": "message", "id": "msg_7", "status": "completed"}]
    return ModelRequest(
        model="test-model",
        instructions="Be brief.",
        tools=[SHELL, EXEC],
        messages=[
            UserMessage(text="list files"),
            AssistantMessage(
                text="Listing.",
                reasoning="Look first.",
                tool_calls=[
                    ToolCall(id="c1", name="shell", arguments='{"cmd": "ls"}'),
                    ToolCall(id="c2", name="exec", arguments="console.log(1)", freeform=True),
                ],
                opaque=opaque,
                wire=wire,
            ),
            ToolResultMessage(call_id="c1", name="shell", content="a.txt"),
            ToolResultMessage(call_id="c2", name="exec", content="1", freeform=True,
                              is_error=True),
            UserMessage(text="thanks"),
        ],
    )


async def test_chat_renders_the_conversation() -> None:
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await collect(connect(server, "chat"), conversation("chat"))
    body = server.requests[-1].body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "Listing.", "reasoning_content": "Look first.",
         "tool_calls": [
             {"id": "c1", "type": "function",
              "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}},
             {"id": "c2", "type": "function",
              "function": {"name": "exec", "arguments": '{"code": "console.log(1)"}'}},
         ]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "c2", "content": "1"},
        {"role": "user", "content": "thanks"},
    ]
    assert body["stream_options"] == {"include_usage": True}
    assert "parallel_tool_calls" not in body
    assert server.requests[-1].headers["authorization"] == "Bearer sk-test"


async def test_parallel_tool_calls_can_be_turned_off(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await collect(connect(server, wire), ask(tools=[SHELL], parallel_tool_calls=False))
    body = server.requests[-1].body
    if wire == "anthropic":
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    else:
        assert body["parallel_tool_calls"] is False


async def test_chat_can_leave_reasoning_out() -> None:
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        info = ProviderInfo(name="x", base_url=server.base_url, send_reasoning=False)
        await collect(open_provider(info), conversation("chat"))
    assert "reasoning_content" not in server.requests[-1].body["messages"][2]
    assert "authorization" not in server.requests[-1].headers


async def test_responses_renders_the_conversation() -> None:
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await collect(connect(server, "responses"), conversation("responses"))
    body = server.requests[-1].body
    assert body["instructions"] == "Be brief."
    assert body["store"] is False
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                         "text": "list files"}]},
        {"type": "reasoning", "id": "rs_1",
         "summary": [{"type": "summary_text", "text": "Look first."}],
         "encrypted_content": "enc_abc"},
        {"type": "message", "role": "assistant", "id": "msg_7", "status": "completed",
         "content": [{"type": "output_text", "text": "Listing.", "annotations": []}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"cmd": "ls"}'},
        {"type": "custom_tool_call", "call_id": "c2", "name": "exec", "input": "console.log(1)"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "1"},
        {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                         "text": "thanks"}]},
    ]
    assert [t["type"] for t in body["tools"]] == ["function", "custom"]


# The keys the openai SDK's request types mark Required: a replayed output message
# (ResponseOutputMessageParam) and its text part (ResponseOutputTextParam), and the
# plain input message (EasyInputMessageParam, whose content may be a string).
OUTPUT_MESSAGE_REQUIRED = {"id", "content", "role", "status", "type"}
OUTPUT_TEXT_REQUIRED = {"annotations", "text", "type"}
EASY_MESSAGE_REQUIRED = {"content", "role"}


def _assistant_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in body["input"]
            if item.get("type") == "message" and item.get("role") == "assistant"]


async def test_responses_replays_assistant_messages_as_the_api_documents() -> None:
    """A message this wire received goes back with the id and status the service gave
    it; one from another wire (no service id to give) as a plain role-and-text message."""
    with ScriptedModelServer([ScriptedReply(text="First."), ScriptedReply(text="ok")]) as server:
        provider = connect(server, "responses")
        request = ask()
        first = completed([e async for e in provider.stream(request)]).message
        foreign = AssistantMessage(text="From chat.", wire="chat")
        request.messages += [first, UserMessage(text="more"), foreign, UserMessage(text="go")]
        await collect(connect(server, "responses"), request)
    served, plain = _assistant_items(server.requests[1].body)
    served_id = first.opaque[-1]["id"]
    assert served_id.startswith("msg_")
    assert OUTPUT_MESSAGE_REQUIRED <= set(served)
    assert served["id"] == served_id and served["status"] == "completed"
    assert served["content"] == [{"type": "output_text", "text": "First.", "annotations": []}]
    for part in served["content"]:
        assert OUTPUT_TEXT_REQUIRED <= set(part)
    assert EASY_MESSAGE_REQUIRED <= set(plain) and "id" not in plain
    assert plain["content"] == "From chat."


async def test_anthropic_renders_the_conversation() -> None:
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await collect(connect(server, "anthropic"), conversation("anthropic"))
    request = server.requests[-1]
    assert request.body["system"] == [{"type": "text", "text": "Be brief.",
                                       "cache_control": {"type": "ephemeral"}}]
    assert request.body["max_tokens"] == 8192
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Look first.", "signature": "sig_x"},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "c1", "name": "shell", "input": {"cmd": "ls"}},
            {"type": "tool_use", "id": "c2", "name": "exec", "input": {"code": "console.log(1)"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "a.txt"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "1", "is_error": True},
            {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}},
        ]},
    ]
    assert request.body["tools"][0] == {"name": "shell", "description": "Run a command.",
                                        "input_schema": SHELL.parameters}
    assert request.headers["x-api-key"] == "sk-test"
    assert request.headers["anthropic-version"] == "2023-06-01"


async def test_opaque_items_of_another_wire_are_not_sent(wire: str) -> None:
    other = "responses" if wire == "anthropic" else "anthropic"
    request = conversation(other)
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await collect(connect(server, wire), request)
    sent = json.dumps(server.requests[-1].body)
    assert "sig_x" not in sent and "enc_abc" not in sent


async def test_round_trip_through_the_server(wire: str) -> None:
    """A completed message goes back as the next request's history, reasoning included."""
    first = ScriptedReply(reasoning="Need the listing.", text="Let me look.",
                          tool_calls=[ScriptedToolCall(name="shell", arguments={"cmd": "ls"})])
    with ScriptedModelServer([first, ScriptedReply(text="Two files.")]) as server:
        provider = connect(server, wire)
        request = ask(tools=[SHELL], reasoning_effort="high")
        message = completed([e async for e in provider.stream(request)]).message
        call = message.tool_calls[0]
        request.messages += [message, ToolResultMessage(call_id=call.id, name="shell",
                                                        content="a b")]
        final = completed(await collect(provider, request)).message
    assert final.text == "Two files."
    sent = json.dumps(server.requests[-1].body)
    assert call.id in sent and "a b" in sent
    if wire == "anthropic":
        assert '"signature": "sig_1"' in sent
    elif wire == "responses":
        assert message.opaque[0]["encrypted_content"] in sent
    else:
        assert '"reasoning_content": "Need the listing."' in sent


# --- faults --------------------------------------------------------------------------


async def test_rate_limit_honours_retry_after(wire: str) -> None:
    replies = [ScriptedReply(status=429, retry_after=0.4), ScriptedReply(text="finally")]
    with ScriptedModelServer(replies) as server:
        start = time.monotonic()
        events = await collect_retrying(connect(server, wire), ask())
        elapsed = time.monotonic() - start
    restarts = [e for e in events if isinstance(e, StreamRestarted)]
    assert len(restarts) == 1
    assert restarts[0].attempt == 2
    assert restarts[0].delay_s >= 0.4
    assert "rate limited" in restarts[0].reason
    assert elapsed >= 0.4
    assert completed(events).message.text == "finally"
    assert len(server.requests) == 2


async def test_rate_limit_error_carries_retry_after(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(status=429, retry_after=7)]) as server:
        error = await fails_with(connect(server, wire), ask(), RateLimitError)
    assert error.retry_after == 7
    assert error.status == 429
    assert error.retryable


async def test_server_error_then_success(wire: str) -> None:
    replies = [ScriptedReply(status=500), ScriptedReply(status=503), ScriptedReply(text="ok")]
    with ScriptedModelServer(replies) as server:
        events = await collect_retrying(connect(server, wire), ask())
    assert [e.attempt for e in events if isinstance(e, StreamRestarted)] == [2, 3]
    assert completed(events).message.text == "ok"


async def test_cut_stream_is_retried_without_duplicates(wire: str) -> None:
    reply = {"text": "alpha beta gamma delta epsilon zeta",
             "tool_calls": [{"name": "shell", "arguments": {"cmd": "make test"}}]}
    with ScriptedModelServer([{**reply, "cut_after_events": 5}, reply]) as server:
        events = await collect_retrying(connect(server, wire), ask(tools=[SHELL]))
    restart = events.index(next(e for e in events if isinstance(e, StreamRestarted)))
    assert any(isinstance(e, TextDelta) for e in events[:restart])  # cut midway, really
    assert "connection" in events[restart].reason  # type: ignore[union-attr]
    message = completed(events).message
    assert message.text == "alpha beta gamma delta epsilon zeta"
    assert shown_text(events) == message.text
    assert len(message.tool_calls) == 1
    assert json.loads(message.tool_calls[0].arguments) == {"cmd": "make test"}
    assert len(server.requests) == 2


async def test_stream_ending_without_its_terminal_event_is_transient(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(text="one two three", end_after_events=3)]) as server:
        error = await fails_with(connect(server, wire), ask(), TransientError)
    assert "ended before" in str(error)


async def test_slow_chunks_stream_before_the_end(wire: str) -> None:
    reply = ScriptedReply(text="one two three four", chunk_delay_s=0.1)
    with ScriptedModelServer([reply]) as server:
        provider = connect(server, wire)
        first_delta = done = 0.0
        async for event in provider.stream(ask()):
            if isinstance(event, TextDelta) and not first_delta:
                first_delta = time.monotonic()
            if isinstance(event, Completed):
                done = time.monotonic()
                assert event.message.text == "one two three four"
        await provider.aclose()
    # At least four more events, 0.1 s apart, came after the first delta.
    assert done - first_delta >= 0.3


async def test_malformed_tool_arguments_pass_through_raw(wire: str) -> None:
    raw = '{"cmd": "ls", "path": '
    reply = ScriptedReply(tool_calls=[ScriptedToolCall(name="shell", arguments=raw)])
    with ScriptedModelServer([reply]) as server:
        events = await collect(connect(server, wire), ask(tools=[SHELL]))
    assert completed(events).message.tool_calls[0].arguments == raw


async def test_unauthorized_names_the_env_var(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(status=401)]) as server:
        error = await fails_with(connect(server, wire), ask(), AuthenticationError)
    assert "set SCRIPTED_API_KEY" in str(error)
    assert error.status == 401 and not error.retryable


async def test_unknown_model(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(status=404)]) as server:
        error = await fails_with(connect(server, wire), ask(), ModelNotFoundError)
    assert "'test-model'" in str(error)


async def test_context_overflow(wire: str) -> None:
    reply = ScriptedReply(status=400, error_code="context_length_exceeded")
    with ScriptedModelServer([reply]) as server:
        await fails_with(connect(server, wire), ask(), ContextOverflowError)


@pytest.mark.parametrize("message", [
    "prompt is too long: 201000 tokens > 200000 maximum",
    "This model's maximum context length is 8192 tokens",
])
async def test_context_overflow_from_the_message(message: str) -> None:
    with ScriptedModelServer([ScriptedReply(status=400, error_message=message)]) as server:
        await fails_with(connect(server, "chat"), ask(), ContextOverflowError)


async def test_other_client_errors_are_bad_requests(wire: str) -> None:
    reply = ScriptedReply(status=400, error_message="tools[0].name: invalid characters")
    with ScriptedModelServer([reply, reply]) as server:
        error = await fails_with(connect(server, wire), ask(), BadRequestError)
        with pytest.raises(BadRequestError):
            await collect_retrying(connect(server, wire), ask())
    assert "tools[0].name: invalid characters" in str(error)
    assert len(server.requests) == 2  # not retried


async def test_request_timeout_is_transient(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(text="late", hang_s=3)]) as server:
        provider = connect(server, wire, timeout_s=0.3)
        error = await fails_with(provider, ask(), TransientError)
    assert "timed out" in str(error)


async def test_connection_refused_is_transient(wire: str) -> None:
    server = ScriptedModelServer([]).start()
    url = server.base_url
    server.stop()
    info = ProviderInfo(name="gone", base_url=url, wire_api=wire)
    error = await fails_with(open_provider(info), ask(), TransientError)
    assert "connection" in str(error)


@pytest.mark.parametrize(("status", "kind"), [
    (429, RateLimitError), (500, TransientError), (401, AuthenticationError),
])
async def test_errors_inside_the_stream(wire: str, status: int, kind: type) -> None:
    reply = ScriptedReply(text="partial answer here", status=status, error_in_stream=True,
                          cut_after_events=2)
    with ScriptedModelServer([reply]) as server:
        await fails_with(connect(server, wire), ask(), kind)


async def test_context_overflow_inside_the_stream(wire: str) -> None:
    reply = ScriptedReply(status=400, error_code="context_length_exceeded", error_in_stream=True)
    with ScriptedModelServer([reply]) as server:
        await fails_with(connect(server, wire), ask(), ContextOverflowError)


async def test_retries_give_up_after_max_attempts(wire: str) -> None:
    replies = [ScriptedReply(status=502)] * 3
    with ScriptedModelServer(replies) as server:
        with pytest.raises(TransientError) as info:
            await collect_retrying(connect(server, wire), ask(),
                                   FAST.model_copy(update={"max_attempts": 3}))
    assert len(server.requests) == 3
    assert "gave up after 3 attempts" in info.value.__notes__


async def test_exhausted_script_fails_at_once_and_clearly(wire: str) -> None:
    with ScriptedModelServer([ScriptedReply(text="only one")]) as server:
        await collect(connect(server, wire), ask())
        with pytest.raises(TransientError) as info:
            await collect_retrying(connect(server, wire), ask())
    assert "script exhausted after 1 replies" in str(info.value)
    assert len(server.requests) == 2  # the retry loop did not hammer it


async def test_tool_calls_without_text_render_without_empty_content(wire: str) -> None:
    request = ModelRequest(model="m", tools=[SHELL], messages=[
        UserMessage(text="go"),
        AssistantMessage(tool_calls=[ToolCall(id="c1", name="shell", arguments="{not json")]),
        ToolResultMessage(call_id="c1", name="shell", content="bad arguments", is_error=True),
    ])
    with ScriptedModelServer([ScriptedReply(text="ok")]) as server:
        await collect(connect(server, wire), request)
    body = server.requests[-1].body
    if wire == "chat":
        assert body["messages"][1]["content"] is None
        assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{not json"
    elif wire == "anthropic":
        assert body["messages"][1]["content"] == [
            {"type": "tool_use", "id": "c1", "name": "shell",
             "input": {"_raw_arguments": "{not json"}}]
    else:
        assert [i["type"] for i in body["input"]] == ["message", "function_call",
                                                      "function_call_output"]
