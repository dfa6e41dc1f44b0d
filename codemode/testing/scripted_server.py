"""A model server that answers from a script: a real HTTP server on 127.0.0.1 speaking
the three wires (Chat Completions, Responses, Anthropic Messages) with server-sent
events. It is the one stand-in for a model service that the test suite, benchmarks
and terminal tests use; everything on the client side runs for real against it.

Each request consumes the next ``ScriptedReply`` (or asks a callable for one). A reply
says what the model "says" — text, reasoning, tool calls — and, optionally, which fault
to inject on that attempt: an HTTP error, a Retry-After, a stream cut after N events,
slow chunks, a hang before the headers.

One script serves every wire: a ``ScriptedToolCall(freeform=True)`` is a custom tool
call on the Responses wire and, elsewhere, a function call whose JSON wraps the text
in the tool's single string property (read from the request's tool schema).

Run standalone (for driving the CLI in a pseudo-terminal)::

    python -m codemode.testing.scripted_server SCRIPT.json [--port N] [--record FILE]

prints the base URL as its first line of output and serves until interrupted.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from codemode.providers.base import Usage


class ScriptedToolCall(BaseModel):
    # A misspelt field in a script is an error, not a silently different reply.
    model_config = ConfigDict(extra="forbid")

    name: str
    # A dict is sent as its JSON; a string is sent as is (malformed JSON included).
    arguments: str | dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    # The raw input of a freeform tool (see the module docstring for other wires).
    freeform: bool = False

    def argument_text(self) -> str:
        if isinstance(self.arguments, dict):
            return json.dumps(self.arguments)
        return self.arguments


class ScriptedReply(BaseModel):
    """One answer of the scripted model, and the faults of the attempt that gets it."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    # Default: a deterministic estimate from the request and reply sizes.
    usage: Usage | None = None
    # The neutral stop reason to report ("stop", "tool_calls", "length", ...); by
    # default "tool_calls" when there are tool calls, else "stop". "length" is each
    # wire's own form (finish_reason "length", stop_reason "max_tokens",
    # response.incomplete with reason "max_output_tokens").
    stop_reason: str | None = None
    # Faults. A status other than 200 answers with that error and no stream.
    status: int = 200
    error_message: str | None = None
    error_code: str | None = None  # e.g. "context_length_exceeded"
    retry_after: float | None = None  # sent as a Retry-After header
    # Send the error as an event inside a 200 stream (after cut_after_events events).
    error_in_stream: bool = False
    cut_after_events: int | None = None  # send N events, then drop the connection
    end_after_events: int | None = None  # send N events, then end the body cleanly
    chunk_delay_s: float = 0.0  # sleep between events
    hang_s: float = 0.0  # sleep before the response headers


class RecordedRequest(BaseModel):
    wire: str  # "chat", "responses" or "anthropic"
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    query: str = ""  # the URL's query string, as sent


Script = Sequence[ScriptedReply | dict[str, Any]] | Callable[[RecordedRequest], Any]

_ROUTES = (("chat/completions", "chat"), ("responses", "responses"), ("messages", "anthropic"))


class ScriptedModelServer:
    """The scripted server; ``with ScriptedModelServer([...]) as server:`` starts it on
    an ephemeral port and ``server.base_url`` is the ``/v1`` root to configure."""

    def __init__(
        self,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | Path | None = None,
    ) -> None:
        if callable(script):
            self._replies: list[ScriptedReply] | None = None
            self._responder: Callable[[RecordedRequest], Any] | None = script
        else:
            self._replies = [_as_reply(r) for r in script]
            self._responder = None
        self.requests: list[RecordedRequest] = []
        self.replies_used = 0
        self._host = host
        self._port = port
        self._record_path = Path(record_path) if record_path else None
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> Self:
        """A server answering from a JSON file: a list of replies (or ``{"replies": [...]}``)."""
        data = json.loads(Path(path).read_text("utf-8"))
        if isinstance(data, dict):
            data = data.get("replies")
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of replies")
        return cls(data, **kwargs)

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("scripted server: not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def remaining(self) -> int | None:
        """Replies not yet consumed (None for a callable script)."""
        return None if self._replies is None else len(self._replies) - self.replies_used

    def push(self, *replies: ScriptedReply | dict[str, Any]) -> None:
        """Append replies to a running list script (an interactive test's next answers)."""
        if self._replies is None:
            raise TypeError("scripted server: push() needs a list script, not a callable")
        with self._lock:
            self._replies.extend(_as_reply(r) for r in replies)
            self._arrived.notify_all()

    def wait_for_requests(self, count: int, timeout_s: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` requests have arrived; raises TimeoutError naming how many did."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, timeout_s):
                raise TimeoutError(
                    f"scripted server: {len(self.requests)} of {count} requests arrived "
                    f"within {timeout_s}s"
                )
            return list(self.requests)

    def start(self) -> Self:
        handler = type("_Handler", (_Handler,), {"scripted": self})
        self._server = _QuietServer((self._host, self._port), handler)
        self._thread = threading.Thread(
            # A short poll keeps stop() quick (shutdown waits for the next poll).
            target=self._server.serve_forever, args=(0.02,), name="scripted-model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- used by the handler threads ---

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self._arrived.notify_all()
            if self._record_path is not None:
                with self._record_path.open("a", encoding="utf-8") as out:
                    out.write(request.model_dump_json() + "\n")

    def _next_reply(self, request: RecordedRequest) -> ScriptedReply | None:
        with self._lock:
            self.replies_used += 1
            if self._replies is None:
                responder = self._responder
            elif self.replies_used <= len(self._replies):
                return self._replies[self.replies_used - 1]
            else:
                self.replies_used -= 1
                return None
        assert responder is not None
        return _as_reply(responder(request))

    def _new_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (timeouts, closed keep-alive connections) are routine here.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _as_reply(value: Any) -> ScriptedReply:
    if isinstance(value, ScriptedReply):
        return value
    return ScriptedReply.model_validate(value)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._json(404, {"error": {"message": f"scripted server: no route GET {self.path}"}})

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        path = path.rstrip("/")
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        wire = next((w for suffix, w in _ROUTES if path.endswith("/" + suffix)), None)
        if wire is None:
            self._json(404, {"error": {"message": f"scripted server: no route POST {path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "scripted server: the body is not JSON"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest(wire=wire, path=path, headers=headers, body=body, query=query)
        self.scripted._record(request)
        if body.get("stream") is not True:
            self._json(400, {"error": {"message": "scripted server: only streaming requests "
                                                  "are supported (stream: true)"}})
            return
        try:
            reply = self.scripted._next_reply(request)
        except Exception as exc:  # a broken responder must read clearly in the test
            self._json(500, {"error": {"message": f"scripted server: the script raised "
                                                  f"{type(exc).__name__}: {exc}"}},
                       {"x-should-retry": "false"})
            return
        if reply is None:
            used = self.scripted.replies_used
            self._json(500, {"error": {"message": f"scripted server: script exhausted after "
                                                  f"{used} replies", "type": "server_error"}},
                       {"x-should-retry": "false"})
            return
        try:
            self._answer(wire, request, reply)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test)

    def _answer(self, wire: str, request: RecordedRequest, reply: ScriptedReply) -> None:
        if reply.hang_s:
            time.sleep(reply.hang_s)
        if reply.status != 200 and not reply.error_in_stream:
            extra = {}
            if reply.retry_after is not None:
                extra["Retry-After"] = _seconds(reply.retry_after)
            self._json(reply.status, error_body(wire, reply, request), extra)
            return
        events = list(render_events(wire, request, reply, self.scripted._new_id()))
        if reply.error_in_stream:
            events = events[: reply.cut_after_events or 0]
            events.append(error_event(wire, reply, request))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        cut = None if reply.error_in_stream else reply.cut_after_events
        for n, (name, data) in enumerate(events):
            if cut is not None and n >= cut:
                # Drop the connection with the chunked body unfinished, as a proxy or a
                # crashed server would.
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if reply.end_after_events is not None and n >= reply.end_after_events:
                break
            if n and reply.chunk_delay_s:
                time.sleep(reply.chunk_delay_s)
            frame = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
            self._chunk(frame.encode())
        self._chunk(b"")
        if reply.error_in_stream:
            self.close_connection = True

    def _chunk(self, payload: bytes) -> None:
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# --- what the server says ------------------------------------------------------------


def split_text(text: str, parts: int = 4) -> list[str]:
    """``text`` in several pieces (word-aligned where it can be), so streaming is real."""
    if len(text) <= 1:
        return [text] if text else []
    words = re.findall(r"\S+\s*|\s+", text)
    if len(words) < 2:
        half = len(text) // 2
        return [text[:half], text[half:]]
    size = max(1, -(-len(words) // parts))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def split_args(text: str, size: int = 12) -> list[str]:
    if not text:
        return []
    return [text[i : i + size] for i in range(0, len(text), size)]


def estimate_usage(request: RecordedRequest, reply: ScriptedReply) -> Usage:
    if reply.usage is not None:
        return reply.usage
    prompt = len(json.dumps(request.body))
    out = len(reply.text) + len(reply.reasoning)
    out += sum(len(c.name) + len(c.argument_text()) for c in reply.tool_calls)
    return Usage(
        input_tokens=prompt // 4 + 1,
        output_tokens=out // 4 + 1,
        reasoning_tokens=len(reply.reasoning) // 4,
    )


def _string_field(request: RecordedRequest, tool: str) -> str:
    """The single string property a freeform tool is offered with on a function wire."""
    for spec in request.body.get("tools") or []:
        fn = spec.get("function") or spec
        if fn.get("name") != tool:
            continue
        schema = fn.get("parameters") or fn.get("input_schema") or {}
        props = list((schema.get("properties") or {}).keys())
        if len(props) == 1:
            return props[0]
    return "input"


def _call_arguments(request: RecordedRequest, call: ScriptedToolCall, wire: str) -> str:
    if call.freeform and wire != "responses":
        return json.dumps({_string_field(request, call.name): call.argument_text()})
    return call.argument_text()


Event = tuple[str | None, str]


def _stop(reply: ScriptedReply) -> str:
    return reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")


def render_events(
    wire: str, request: RecordedRequest, reply: ScriptedReply, seq: int
) -> Iterator[Event]:
    """The SSE events (name, data) of ``reply`` on ``wire``."""
    if wire == "chat":
        return _chat_events(request, reply, seq)
    if wire == "responses":
        return _responses_events(request, reply, seq)
    return _anthropic_events(request, reply, seq)


def _chat_events(request: RecordedRequest, reply: ScriptedReply, seq: int) -> Iterator[Event]:
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
        for piece in split_args(_call_arguments(request, call, "chat")):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, _stop(reply))
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


def _responses_events(request: RecordedRequest, reply: ScriptedReply, seq: int) -> Iterator[Event]:
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
        text = _call_arguments(request, call, "responses")
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
    if _stop(reply) == "length":
        yield event("response.incomplete", response={
            **response, "status": "incomplete", "output": output, "usage": raw_usage,
            "incomplete_details": {"reason": "max_output_tokens"}})
    else:
        yield event("response.completed", response={
            **response, "status": "completed", "output": output, "usage": raw_usage})


def _anthropic_events(request: RecordedRequest, reply: ScriptedReply, seq: int) -> Iterator[Event]:
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
        for piece in split_args(_call_arguments(request, call, "anthropic")):
            yield event("content_block_delta", index=index,
                        delta={"type": "input_json_delta", "partial_json": piece})
        yield event("content_block_stop", index=index)
        index += 1
    stop = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}.get(
        _stop(reply), _stop(reply))
    yield event("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
                usage={"output_tokens": usage.output_tokens})
    yield event("message_stop")


# --- errors ----------------------------------------------------------------------------

_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


def _error_message(wire: str, reply: ScriptedReply, request: RecordedRequest) -> str:
    if reply.error_message:
        return reply.error_message
    model = request.body.get("model", "")
    if reply.error_code == "context_length_exceeded":
        if wire == "anthropic":
            return "prompt is too long: 210000 tokens > 200000 maximum"
        return ("This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130000 tokens. Please reduce the length of the messages.")
    defaults = {
        401: "Incorrect API key provided.",
        403: "This key is not allowed to use this model.",
        404: f"The model `{model}` does not exist or you do not have access to it.",
        429: "Rate limit reached, please try again later.",
    }
    status = reply.status if reply.status != 200 else 500
    return defaults.get(status, f"scripted error {status}")


def error_body(wire: str, reply: ScriptedReply, request: RecordedRequest) -> dict[str, Any]:
    message = _error_message(wire, reply, request)
    status = reply.status if reply.status != 200 else 500
    if wire == "anthropic":
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500
                                    else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = ("server_error" if status >= 500 else "rate_limit_exceeded" if status == 429
            else "invalid_request_error")
    code = reply.error_code
    if code is None:
        code = {401: "invalid_api_key", 404: "model_not_found",
                429: "rate_limit_exceeded"}.get(status, "server_error" if status >= 500 else None)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def error_event(wire: str, reply: ScriptedReply, request: RecordedRequest) -> Event:
    body = error_body(wire, reply, request)
    if wire == "anthropic":
        return "error", json.dumps(body)
    if wire == "responses":
        err = body["error"]
        code = err["code"] or err["type"]
        return "response.failed", json.dumps({"type": "response.failed", "response": {
            "id": "resp_failed", "status": "failed",
            "error": {"code": code, "message": err["message"]}}})
    return None, json.dumps(body)


# --- standalone -------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m codemode.testing.scripted_server",
        description="Serve a scripted model on 127.0.0.1 (chat, responses and anthropic wires).",
    )
    parser.add_argument("script", help="JSON file: a list of replies")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--record", help="append each request as a JSON line to this file")
    args = parser.parse_args(argv)
    try:
        server = ScriptedModelServer.from_file(args.script, host=args.host, port=args.port,
                                               record_path=args.record)
    except (OSError, ValueError) as exc:
        print(f"scripted server: {exc}", file=sys.stderr)
        return 2
    server.start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
