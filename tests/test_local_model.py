"""The agent against real model servers on 127.0.0.1: llama.cpp's llama-server (what
users run, and the engine inside Ollama and LM Studio) and llama-cpp-python's server,
both serving SmolLM2-135M-Instruct, as built and cached by scripts/setup-local-model.sh.

These assert plumbing, never task success: the model is far too small to do a task.
Each test skips, saying why, when its server is not built. Generation is kept to a
few dozen tokens per request so that the tier stays within minutes on two busy cores.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_support import records, run_cli, session_files

from codemode.agent.cutoff import settle_reply
from codemode.agent.events import Notice
from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.session import build_session
from codemode.config import load_config
from codemode.providers.base import (
    AssistantMessage,
    BadRequestError,
    Completed,
    ContextOverflowError,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from codemode.providers.chat import ChatProvider
from codemode.providers.retry import RetryPolicy, stream_with_retries
from codemode_testkit.local_model import (
    MODEL_NAME,
    Kind,
    LocalModelServer,
    find_local_model,
)

LIST_DIR = ToolSpec(name="list_dir", description="List the files in a directory.",
                    parameters={"type": "object", "properties": {"path": {"type": "string"}},
                                "required": ["path"]})
ASK_LIST = UserMessage(text="List the files in the current directory.")


def start(kind: Kind, tmp: Path, n_ctx: int = 2048) -> Iterator[LocalModelServer]:
    found = find_local_model(kind)
    if isinstance(found, str):
        pytest.skip(found)
    with LocalModelServer(found, n_ctx=n_ctx, log=tmp / f"{kind}.log") as server:
        print(f"\n{kind}: model loaded and serving in {server.load_s:.1f} s")
        yield server


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    yield from start("llama-server", tmp_path_factory.mktemp("llama-server"))


@pytest.fixture(scope="module")
def llama_cpp_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    yield from start("llama-cpp-python", tmp_path_factory.mktemp("llama-cpp-python"))


@pytest.fixture(params=["llama-server", "llama-cpp-python"])
def server(request: pytest.FixtureRequest) -> LocalModelServer:
    fixture = "llama_server" if request.param == "llama-server" else "llama_cpp_python"
    return request.getfixturevalue(fixture)


class ForcedToolChat(ChatProvider):
    """The chat wire with tool_choice naming the first tool offered: a model this small
    calls a tool only when the server constrains it to (llama-cpp-python does, with a
    grammar; llama-server ignores tool_choice for this template)."""

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        body = super().build_body(request)
        if request.tools:
            body["tool_choice"] = {"type": "function",
                                   "function": {"name": request.tools[0].name}}
        return body


def chat(server: LocalModelServer, cls: type[ChatProvider] = ChatProvider) -> ChatProvider:
    return cls(name=server.found.kind, base_url=server.base_url, timeout_s=240)


def collect(provider: ChatProvider, request: ModelRequest) -> list[StreamEvent]:
    async def run() -> list[StreamEvent]:
        try:
            return [e async for e in provider.stream(request)]
        finally:
            await provider.aclose()

    return asyncio.run(run())


def ask(messages: list[Any], **kw: Any) -> ModelRequest:
    settings = {"max_output_tokens": 12, "temperature": 0, "seed": 1, **kw}
    return ModelRequest(model=MODEL_NAME, messages=messages, **settings)


# --- the chat wire -------------------------------------------------------------------------


def test_streaming_text_parses(server: LocalModelServer) -> None:
    events = collect(chat(server), ask([UserMessage(text="Say hello.")]))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    done = events[-1]
    assert isinstance(done, Completed)
    assert len(deltas) >= 2 and done.message.text == "".join(deltas)
    assert done.stop_reason in ("stop", "length")


def test_max_output_tokens_and_sampling_reach_llama_server(
    llama_server: LocalModelServer,
) -> None:
    request = ask([UserMessage(text="Count from one to fifty.")], max_output_tokens=9,
                  temperature=0.25, top_p=0.5, seed=7)
    done = collect(chat(llama_server), request)[-1]
    assert isinstance(done, Completed)
    assert 0 < done.usage.output_tokens <= 9 and done.stop_reason == "length"
    slots = httpx.get(llama_server.base_url.removesuffix("/v1") + "/slots", timeout=10).json()
    params = slots[0]["params"]
    assert (params["n_predict"], params["temperature"], params["top_p"], params["seed"]) == (
        9, 0.25, 0.5, 7)


def test_max_output_tokens_reach_llama_cpp_python(llama_cpp_python: LocalModelServer) -> None:
    """Its stream carries no usage; the cut-off is its finish_reason and the text length."""
    done = collect(chat(llama_cpp_python), ask([UserMessage(text="Count from one to fifty.")],
                                               max_output_tokens=5))[-1]
    assert isinstance(done, Completed) and done.stop_reason == "length"
    reply = httpx.post(llama_cpp_python.base_url + "/chat/completions", timeout=120, json={
        "model": MODEL_NAME, "messages": [{"role": "user", "content": "Count to fifty."}],
        "max_tokens": 5, "temperature": 0})
    assert reply.json()["usage"]["completion_tokens"] <= 5


def test_streamed_tool_calls_parse(llama_cpp_python: LocalModelServer) -> None:
    events = collect(chat(llama_cpp_python, ForcedToolChat),
                     ask([ASK_LIST], tools=[LIST_DIR], max_output_tokens=40))
    done = events[-1]
    assert isinstance(done, Completed)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) >= 2  # the arguments arrived in pieces
    assert [c.name for c in done.message.tool_calls] == ["list_dir"]
    assert done.message.tool_calls[0].arguments == "".join(d.arguments for d in deltas)


def test_a_cut_off_call_is_refused_raw_and_accepted_settled(
    llama_server: LocalModelServer, llama_cpp_python: LocalModelServer
) -> None:
    """A real call cut off by max_output_tokens (from llama-cpp-python), sent back to
    llama-server as it came (refused: HTTP 500, not retried) and as the loop keeps it."""
    done = collect(chat(llama_cpp_python, ForcedToolChat),
                   ask([ASK_LIST], tools=[LIST_DIR], max_output_tokens=6))[-1]
    assert isinstance(done, Completed)
    call = done.message.tool_calls[0]
    try:
        json.loads(call.arguments)
    except ValueError:
        pass
    else:
        pytest.skip(f"the model finished its call in 6 tokens: {call.arguments!r}")
    raw = done.message.model_copy(update={"wire": "chat"})
    history = [ASK_LIST, raw, ToolResultMessage(call_id=call.id, name=call.name,
                                                content="(not run)")]

    async def send(messages: list[Any]) -> int:
        provider, attempts = chat(llama_server), 0
        try:
            async for event in stream_with_retries(provider, ask(messages, tools=[LIST_DIR]),
                                                   RetryPolicy(base_delay_s=0)):
                attempts += 1 if isinstance(event, Completed) else 0
        finally:
            await provider.aclose()
        return attempts

    with pytest.raises(BadRequestError, match="not valid JSON"):
        asyncio.run(send(history))
    # The server reports "tool_calls" for the cut (the provider calls it "length", see
    # below); either way the loop's history holds JSON: the call dropped under
    # "length", wrapped otherwise.
    for stop in ("length", done.stop_reason):
        settled = settle_reply(raw, stop, [LIST_DIR])
        kept = [ASK_LIST, settled.history]
        kept += [ToolResultMessage(call_id=c.id, name=c.name, content="(not run)")
                 for c in settled.history.tool_calls]
        if settled.dropped:
            kept.append(UserMessage(text="Your last reply was cut off; send it again."))
        assert asyncio.run(send(kept)) == 1


# --- the turn loop -------------------------------------------------------------------------


def test_a_call_cut_off_under_a_tool_calls_reason_is_not_run(
    llama_cpp_python: LocalModelServer, home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-cpp-python ends a call cut off by max_tokens with finish_reason "tool_calls"
    and streams no usage: the provider reports the cut, the loop runs nothing and tells
    the model its call was cut off."""
    raw = httpx.post(llama_cpp_python.base_url + "/chat/completions", timeout=120, json={
        "model": MODEL_NAME, "messages": [{"role": "user", "content": ASK_LIST.text}],
        "tools": [{"type": "function", "function": {"name": "list_dir", "parameters":
                                                    LIST_DIR.parameters}}],
        "tool_choice": {"type": "function", "function": {"name": "list_dir"}},
        "max_tokens": 6, "temperature": 0}).json()
    cut = raw["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    if raw["choices"][0]["finish_reason"] != "tool_calls":
        pytest.skip(f"this server build reports {raw['choices'][0]['finish_reason']!r}")
    with pytest.raises(ValueError):
        json.loads(cut)  # the wire shape this test is about: cut, yet "tool_calls"

    done = collect(chat(llama_cpp_python, ForcedToolChat),
                   ask([ASK_LIST], tools=[LIST_DIR], max_output_tokens=6))[-1]
    assert isinstance(done, Completed) and done.stop_reason == "length"

    monkeypatch.setenv("CODEMODE_HOME", str(home))
    events: list[Any] = []
    options = SessionOptions(cwd=work, model=MODEL_NAME, max_turns=1, harness="minimal")
    spec = SessionSpec(listeners=[events.append], provider=chat(llama_cpp_python, ForcedToolChat),
                       provider_name="llama-cpp-python")
    session = build_session(load_config(["max_output_tokens=6", "temperature=0"]), options, spec)

    async def run() -> Any:
        try:
            return await session.run_turn("Show the files in this directory.")
        finally:
            await session.aclose()

    asyncio.run(run())
    assert not [m for m in session.messages if isinstance(m, ToolResultMessage)]
    assert not [e for e in events if type(e).__name__ == "ItemStarted"
                and e.item.type == "command_execution"]
    assert any(isinstance(e, Notice) and "cut off" in e.message for e in events)
    notes = [m.text for m in session.messages if isinstance(m, UserMessage)]
    assert any("cut off by the output-token limit (6 tokens)" in t for t in notes)
    if session.rollout is not None:
        session.rollout.close()



def test_context_overflow_from_the_server_compacts_and_retries(
    llama_server: LocalModelServer, home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    big = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(400))
    provider = chat(llama_server)
    events: list[Any] = []
    options = SessionOptions(cwd=work, model=MODEL_NAME, max_turns=2, harness="minimal")
    spec = SessionSpec(listeners=[events.append], provider=provider, provider_name="llamacpp",
                       record=False)
    session = build_session(load_config(["max_output_tokens=16", "temperature=0"]), options, spec)
    session.messages.extend([
        UserMessage(text="Read big.txt, then notes.txt."),
        AssistantMessage(wire="chat", tool_calls=[
            ToolCall(id="c1", name="bash", arguments='{"command": "cat big.txt"}')]),
        ToolResultMessage(call_id="c1", name="bash", content=big),
        AssistantMessage(wire="chat", tool_calls=[
            ToolCall(id="c2", name="bash", arguments='{"command": "cat notes.txt"}')]),
        ToolResultMessage(call_id="c2", name="bash", content="alpha\nbeta\n"),
    ])

    async def run() -> Any:
        try:
            return await session.run_turn("What is in notes.txt?")
        finally:
            await session.aclose()

    result = asyncio.run(run())
    assert any(isinstance(e, Notice) and "context window full" in e.message for e in events)
    assert big not in json.dumps([m.model_dump() for m in session.messages])
    if not result.ok:  # the small model may keep calling tools; never "request refused"
        assert result.error and "request refused" not in result.error


def test_the_overflow_error_itself_is_a_context_overflow(llama_server: LocalModelServer) -> None:
    with pytest.raises(ContextOverflowError, match="exceeds the available context size"):
        collect(chat(llama_server), ask([UserMessage(text="word " * 3000)]))


def test_llama_cpp_python_overflow_in_a_stream_is_recognised(
    llama_cpp_python: LocalModelServer,
) -> None:
    """Its stream closes empty on an overflow; the wire asks again without streaming."""
    with pytest.raises(ContextOverflowError, match="context"):
        collect(chat(llama_cpp_python), ask([UserMessage(text="word " * 3000)]))


# --- interpreter exec --json ---------------------------------------------------------------

# Two harnesses with short prompts, both dialects: prompt processing is what takes the
# time on two shared cores (the native prompt is ~3,000 tokens, ~6,000 in code mode).
HARNESS_RUNS = [("minimal", False), ("minimal", True), ("mini-swe-agent", False),
                ("mini-swe-agent", True)]


def check_events(stdout: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["thread.started", "turn.started"], kinds
    assert kinds[-1] in ("turn.completed", "turn.failed"), kinds
    started = {e["item"]["id"] for e in events if e["type"] == "item.started"}
    completed = {e["item"]["id"] for e in events if e["type"] == "item.completed"}
    assert started <= completed, f"items never completed: {started - completed}"
    return events


@pytest.mark.parametrize(("harness", "code"), HARNESS_RUNS,
                         ids=[f"{h}-{'code' if c else 'classic'}" for h, c in HARNESS_RUNS])
def test_exec_json_against_llama_server(
    harness: str, code: bool, llama_server: LocalModelServer, home: Path, work: Path
) -> None:
    flags = ["exec", "--json", "--max-turns", "1", "--harness", harness,
             "-c", "model_provider=llamacpp",
             "-c", f"model_providers.llamacpp.base_url={llama_server.base_url}",
             "--model", MODEL_NAME, "-c", "max_output_tokens=40", "-c", "temperature=0",
             "-c", "seed=3", *(["--code-mode"] if code else []),
             "list the files in this directory and tell me how many there are"]
    begun = time.monotonic()
    run = run_cli(flags, home=home, cwd=work, timeout=240)
    took = time.monotonic() - begun
    print(f"\n{harness} {'code' if code else 'classic'}: exit {run.code} in {took:.1f} s")
    assert run.code in (0, 1), run.stderr
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout
    events = check_events(run.stdout)
    if run.code == 1:
        failed = events[-1]["error"]["message"]
        assert failed and "request refused" not in failed
    # Whatever the model did is in the session file, actions and results included.
    [path] = session_files(home)
    recorded = records(path)
    actions = [e for e in events if e["type"] == "item.completed"
               and e["item"]["type"] in ("command_execution", "code_execution", "tool_call")]
    kept = [r for r in recorded if r["type"] == "event" and r["event"]["type"] ==
            "item.completed" and r["event"]["item"]["type"] in
            ("command_execution", "code_execution", "tool_call")]
    assert len(kept) == len(actions)


def test_a_turn_with_real_tool_calls_runs_and_records_them(
    llama_cpp_python: LocalModelServer, home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop with the real server constrained to call the harness's first tool: the
    model's own call (its own arguments) runs, and the session file records it."""
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    provider = chat(llama_cpp_python, ForcedToolChat)
    events: list[Any] = []
    options = SessionOptions(cwd=work, model=MODEL_NAME, max_turns=1, harness="minimal")
    spec = SessionSpec(listeners=[events.append], provider=provider,
                       provider_name="llama-cpp-python")
    session = build_session(load_config(["max_output_tokens=40", "temperature=0"]), options, spec)

    async def run() -> Any:
        try:
            return await session.run_turn("Show the files in this directory.")
        finally:
            await session.aclose()

    result = asyncio.run(run())
    assert result.error is None or "request refused" not in result.error
    calls = [m for m in session.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert calls and calls[0].tool_calls[0].name == "bash"
    results = [m for m in session.messages if isinstance(m, ToolResultMessage)]
    assert [r.call_id for r in results] == [c.id for c in calls[0].tool_calls]
    items = [e.item for e in events if type(e).__name__ == "ItemCompleted"
             and e.item.type == "command_execution"]
    assert items and items[0].status in ("completed", "failed")
    assert session.rollout is not None
    session.rollout.close()
    recorded = records(session.rollout.path)
    kinds = [r["message"]["role"] for r in recorded if r["type"] == "message"]
    assert kinds[:3] == ["user", "assistant", "tool"]


def test_doctor_local_against_llama_server(
    llama_server: LocalModelServer, home: Path, work: Path
) -> None:
    run = run_cli(["doctor", "--local", "--base-url", llama_server.base_url],
                  home=home, cwd=work, timeout=240)
    print(run.stdout)
    assert run.code in (0, 1) and "Traceback" not in run.stderr + run.stdout
    assert "models: smollm2" in run.stdout
    assert "text deltas" in run.stdout  # the streamed reply worked
    assert "tool call" in run.stdout  # and the tool step said what happened
