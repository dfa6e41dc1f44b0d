"""The scripted model in-process (``ScriptedTransport``, an httpx transport without
sockets) against the same script over real HTTP: the same bytes on the wire, the same
provider events per wire, faults included, and the same events from a whole code-mode
session."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.session import build_session
from codemode.config import load_config
from codemode.providers.base import (
    Completed,
    FreeformSpec,
    ModelRequest,
    Provider,
    RateLimitError,
    StreamEvent,
    TextDelta,
    ToolSpec,
    TransientError,
    UserMessage,
)
from codemode.providers.catalog import ProviderInfo, open_provider
from codemode.providers.retry import RetryPolicy, stream_with_retries
from codemode_testkit.scripted.in_process import IN_PROCESS_BASE_URL, ScriptedTransport
from codemode_testkit.scripted.script import ScriptedModel
from codemode_testkit.scripted_server import ScriptedModelServer

WIRES = ["chat", "responses", "anthropic"]
PATHS = {"chat": "chat/completions", "responses": "responses", "anthropic": "messages"}
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
SHELL = ToolSpec(
    name="shell",
    description="Run a command.",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)
EXEC = ToolSpec(name="exec", description="Run JavaScript.",
                freeform=FreeformSpec(field="code", grammar="start: /.+/s"))

# Replies covering each part of each wire's encoding, and the faults.
REPLIES: list[dict[str, Any]] = [
    {"text": "The quick brown fox jumps over the lazy dog."},
    {"reasoning": "Look first, then act.", "text": "Looking.",
     "tool_calls": [{"name": "shell", "arguments": {"cmd": "ls -la"}, "id": "c1"},
                    {"name": "exec", "arguments": "return 1 + 1", "freeform": True}]},
    {"text": "cut short", "stop_reason": "length"},
    {"status": 429, "retry_after": 2},
    {"status": 400, "error_code": "context_length_exceeded"},
    {"text": "partial", "status": 500, "error_in_stream": True, "cut_after_events": 2},
    {"text": "ends early without its terminal event", "end_after_events": 3},
]


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def body_for(wire: str) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": "exec", "parameters": {
        "type": "object", "properties": {"code": {"type": "string"}}}}}]
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}],
            "tools": tools}


async def exchange(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with client.stream("POST", url, json=body) as response:
        data = await response.aread()
    keep = ("content-type", "retry-after", "x-should-retry", "cache-control")
    return {"status": response.status_code, "body": data,
            "headers": {k: response.headers[k] for k in keep if k in response.headers}}


async def test_the_bytes_on_the_wire_are_the_same_in_process(wire: str) -> None:
    body = body_for(wire)
    with ScriptedModelServer(REPLIES) as server:
        async with httpx.AsyncClient() as client:
            over_http = [await exchange(client, f"{server.base_url}/{PATHS[wire]}", body)
                         for _ in REPLIES]
    model = ScriptedModel(REPLIES)
    async with httpx.AsyncClient(transport=ScriptedTransport(model)) as client:
        in_process = [await exchange(client, f"{IN_PROCESS_BASE_URL}/{PATHS[wire]}", body)
                      for _ in REPLIES]
    assert in_process == over_http
    assert [r["status"] for r in in_process] == [200, 200, 200, 429, 400, 200, 200]
    assert in_process[3]["headers"]["retry-after"] == "2"
    assert [r.body for r in model.requests] == [r.body for r in server.requests]
    assert model.remaining == 0


async def test_refusals_are_the_same_in_process() -> None:
    model = ScriptedModel([])
    async with httpx.AsyncClient(transport=ScriptedTransport(model)) as client:
        missing = await client.post(f"{IN_PROCESS_BASE_URL}/embeddings", json={})
        not_json = await client.post(f"{IN_PROCESS_BASE_URL}/chat/completions", content=b"{")
        exhausted = await client.post(f"{IN_PROCESS_BASE_URL}/chat/completions",
                                      json={"stream": True})
        get = await client.get(f"{IN_PROCESS_BASE_URL}/models?x=1")
    assert missing.status_code == 404 and "no route POST /v1/embeddings" in missing.text
    assert not_json.status_code == 400 and "not JSON" in not_json.text
    assert exhausted.status_code == 500 and exhausted.headers["x-should-retry"] == "false"
    assert "script exhausted after 0 replies" in exhausted.text
    assert get.status_code == 404 and "no route GET /v1/models?x=1" in get.text


# --- providers ---------------------------------------------------------------------------


def provider_for(wire: str, base_url: str, transport: ScriptedTransport | None = None,
                 **kwargs: Any) -> Provider:
    info = ProviderInfo(name="scripted", base_url=base_url, wire_api=wire)
    return open_provider(info, api_key="sk-test", http_transport=transport, **kwargs)


def ask(**kwargs: Any) -> ModelRequest:
    return ModelRequest(model="test-model", instructions="Be brief.",
                        messages=[UserMessage(text="hi")], tools=[SHELL, EXEC], **kwargs)


async def collect(provider: Provider, policy: RetryPolicy = FAST) -> list[StreamEvent]:
    try:
        return [event async for event in stream_with_retries(provider, ask(), policy)]
    finally:
        await provider.aclose()


def dumped(events: list[StreamEvent], base_url: str) -> list[Any]:
    """The events as JSON, with the base URL and the retry jitter (random) left out."""
    data = json.loads(json.dumps([e.model_dump(mode="json") for e in events])
                      .replace(base_url, "BASE"))
    return [{k: v for k, v in e.items() if k != "delay_s"} for e in data]


# Each provider sees: a cut stream (retried), then a tool-calling reply with reasoning.
PROVIDER_SCRIPT: list[dict[str, Any]] = [
    {"text": "this stream is cut", "cut_after_events": 3},
    REPLIES[1],
]


async def test_a_provider_streams_the_same_events_in_process(wire: str) -> None:
    with ScriptedModelServer(PROVIDER_SCRIPT) as server:
        over_http = await collect(provider_for(wire, server.base_url))
        http_url = server.base_url
    model = ScriptedModel(PROVIDER_SCRIPT)
    in_process = await collect(provider_for(wire, IN_PROCESS_BASE_URL, ScriptedTransport(model)))
    assert dumped(in_process, IN_PROCESS_BASE_URL) == dumped(over_http, http_url)
    kinds = [type(e).__name__ for e in in_process]
    assert kinds.count("StreamRestarted") == 1 and kinds[-1] == "Completed"
    done = in_process[-1]
    assert isinstance(done, Completed)
    assert [c.name for c in done.message.tool_calls] == ["shell", "exec"]
    assert len(model.requests) == 2 and model.requests[0].wire == wire


async def test_errors_reach_the_provider_the_same_in_process(wire: str) -> None:
    model = ScriptedModel([{"status": 429, "retry_after": 7}])
    provider = provider_for(wire, IN_PROCESS_BASE_URL, ScriptedTransport(model))
    with pytest.raises(RateLimitError) as info:
        await collect(provider, RetryPolicy(max_attempts=1))
    assert info.value.retry_after == 7 and info.value.status == 429


async def test_a_hang_past_the_read_timeout_times_out_in_process(wire: str) -> None:
    model = ScriptedModel([{"text": "late", "hang_s": 5}])
    provider = provider_for(wire, IN_PROCESS_BASE_URL, ScriptedTransport(model), timeout_s=0.2)
    started = time.monotonic()
    with pytest.raises(TransientError, match="timed out"):
        await collect(provider, RetryPolicy(max_attempts=1))
    assert time.monotonic() - started < 3


async def test_a_slow_stream_within_the_timeout_arrives_whole_in_process() -> None:
    model = ScriptedModel([{"text": "one two three four", "chunk_delay_s": 0.02}])
    events = await collect(provider_for("chat", IN_PROCESS_BASE_URL, ScriptedTransport(model),
                                        timeout_s=2))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "one two three four"


# --- a whole session ------------------------------------------------------------------------

# Usage given, not estimated: the estimate counts the request's bytes, and the program's
# run time is in them.
USAGE = {"input_tokens": 120, "output_tokens": 30}
SESSION_SCRIPT: list[dict[str, Any]] = [
    {"reasoning": "Read the note first.", "usage": USAGE, "tool_calls": [
        {"name": "exec", "freeform": True, "id": "x1",
         "arguments": "const r = await tools.shell({command: 'cat note.txt'});\n"
                      "console.log(r.output.trim()); return r.exit_code;"}]},
    {"text": "The note says: hello from the note.", "usage": USAGE},
]


def _session_events(provider: Provider, home: Path, work: Path) -> tuple[list[Any], bool]:
    events: list[BaseModel] = []
    options = SessionOptions(cwd=work, model="test-model", code_mode=True, harness="native",
                             sandbox_mode="workspace-write", approval_policy="never")
    config = load_config(["model_provider=scripted"], home=home)
    spec = SessionSpec(listeners=[events.append], provider=provider,
                       provider_name="scripted", record=False)
    session = build_session(config, options, spec)

    async def run() -> bool:
        try:
            return (await session.run_turn("What does note.txt say?")).ok
        finally:
            await session.aclose()

    ok = asyncio.run(run())
    return [e.model_dump(mode="json") for e in events], ok


def _normalised(events: list[Any]) -> list[Any]:
    # Timings differ from run to run; everything else must not.
    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()
                    if not k.endswith(("_ms", "_s", "duration", "elapsed"))}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    return [scrub(e) for e in events]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "note.txt").write_text("hello from the note\n")
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    yield home, work


@pytest.mark.parametrize("session_wire", WIRES)
def test_a_session_gives_the_same_events_over_http_and_in_process(
    workspace: tuple[Path, Path], session_wire: str
) -> None:
    home, work = workspace
    with ScriptedModelServer(SESSION_SCRIPT) as server:
        over_http, http_ok = _session_events(provider_for(session_wire, server.base_url),
                                             home, work)
    model = ScriptedModel(SESSION_SCRIPT)
    in_process, ok = _session_events(
        provider_for(session_wire, IN_PROCESS_BASE_URL, ScriptedTransport(model)), home, work)
    assert ok and http_ok
    assert _normalised(in_process) == _normalised(over_http)
    shown = json.dumps(in_process)
    assert "hello from the note" in shown  # the program ran and its output is an event
    assert in_process[-1]["type"] == "turn.completed"
    # The model was sent the same, up to how long the program took ("[1 tool call, N ms]").
    sent = [re.sub(r"\d+ ms\]", "N ms]", json.dumps(r.body)) for r in model.requests]
    assert sent == [re.sub(r"\d+ ms\]", "N ms]", json.dumps(r.body)) for r in server.requests]
    assert len(sent) == 2
