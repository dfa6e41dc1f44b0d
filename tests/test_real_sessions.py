"""Real small-model output (tests/data/real-model-sessions) replayed through the tolerant
parser and the turn loop, against a stand-in that refuses what llama-server refused.

Each recorded reply is answered in order; the stand-in then behaves as the real server
did after it: it refuses a history whose tool-call arguments are not JSON (HTTP 500
"Failed to parse tool call arguments as JSON"), answers the request the recording ended
with by its recorded error (context overflow), or else ends the turn with a plain
answer. Every session must end cleanly, and the two that broke the agent of the time
must be rescued.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.agent.events import Notice
from codemode.agent.rollout import read_session
from codemode.agent.turn_result import TurnResult
from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.session import build_session
from codemode.config import load_config
from codemode.providers.base import (
    AssistantMessage,
    Completed,
    ModelRequest,
    ProviderError,
    StreamEvent,
    TextDelta,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from codemode.providers.chat import ChatProvider
from codemode.providers.errors import ErrorContext, classify

DATA = Path(__file__).parent / "data" / "real-model-sessions"
FILES = sorted(DATA.glob("*.jsonl"))
CUT_OFF = "20261201T070322-a1a69ad7172b"
OVERFLOWED = "20261201T064729-c0a684be1f75"
LLAMA = ErrorContext("local", "smollm2", None, "http://127.0.0.1:8080/v1")
END = "(end of the recorded replies)"


def llama_server_error(code: int, kind: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "type": kind}}


class RecordedServer:
    """Plays recorded replies and checks each request as llama-server would."""

    name = "replay"
    wire = "chat"

    def __init__(self, replies: list[AssistantMessage], stop_reasons: dict[int, str],
                 ending: ProviderError | None) -> None:
        self.replies = replies
        self.stop_reasons = stop_reasons
        self.ending = ending
        self.requests: list[dict[str, Any]] = []
        self._chat = ChatProvider(name="replay", base_url="http://127.0.0.1:9/v1")

    def _check(self, request: ModelRequest) -> None:
        body = self._chat.build_body(request)
        self.requests.append(body)
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                try:
                    json.loads(call["function"]["arguments"])
                except ValueError:
                    raise classify(LLAMA, status=500, payload=llama_server_error(
                        500, "server_error", "Failed to parse tool call arguments as JSON: "
                        "[json.exception.parse_error.101] parse error")) from None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self._check(request)
        index = len(self.requests) - 1
        if index < len(self.replies):
            message = self.replies[index]
            if message.text:
                yield TextDelta(text=message.text)
            stop = self.stop_reasons.get(index, "tool_calls" if message.tool_calls else "stop")
            yield Completed(message=message, usage=Usage(), stop_reason=stop)
            return
        if self.ending is not None:
            raise self.ending
        yield Completed(message=AssistantMessage(text=END, wire="chat"), usage=Usage())

    async def aclose(self) -> None:
        return None


def replay(path: Path, work: Path, home: Path, monkeypatch: pytest.MonkeyPatch, *,
           stop_reasons: dict[int, str] | None = None,
           ending: ProviderError | None = None) -> tuple[TurnResult, Any, RecordedServer,
                                                           list[Any]]:
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    recorded = read_session(path)
    replies = [m for m in recorded.messages if isinstance(m, AssistantMessage)]
    server = RecordedServer(replies, stop_reasons or {}, ending)
    events: list[Any] = []
    options = SessionOptions(cwd=work, harness=recorded.meta.harness,
                             code_mode=recorded.meta.dialect == "code", model="smollm2")
    spec = SessionSpec(listeners=[events.append], provider=server, provider_name="replay",
                       record=False)
    session = build_session(load_config(), options, spec)
    prompt = recorded.messages[recorded.prompt_indexes[0]].text  # type: ignore[union-attr]

    async def run() -> TurnResult:
        try:
            return await asyncio.wait_for(session.run_turn(prompt), 120)
        finally:
            session.runner.close()

    return asyncio.run(run()), session, server, events


@pytest.fixture
def task(tmp_path: Path) -> Path:
    work = tmp_path / "listfiles"
    work.mkdir()
    for name in ("a.py", "b.txt", "README.md"):
        (work / name).write_text(f"{name}\n", encoding="utf-8")
    return work


def test_the_fixtures_are_all_there() -> None:
    assert len(FILES) == 20
    assert (DATA / "README.md").is_file()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_recorded_session_ends_cleanly(
    path: Path, task: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ending = None
    if path.stem == OVERFLOWED:
        ending = classify(LLAMA, status=400, payload=llama_server_error(
            400, "exceed_context_size_error", "request (8257 tokens) exceeds the available "
            "context size (8192 tokens), try increasing it"))
    result, _, server, _ = replay(path, task, home, monkeypatch, ending=ending)
    if result.ok:
        assert result.final_message
    else:
        assert result.error and "Traceback" not in result.error
        # What a user reads: one of the loop's own endings, never a refused history.
        assert "Failed to parse tool call arguments" not in result.error
    for body in server.requests:  # every request is one llama-server accepts
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_the_cut_off_call_is_dropped_and_the_turn_goes_on(
    task: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = DATA / f"{CUT_OFF}.jsonl"
    recorded = read_session(path)
    cut = next(m for m in recorded.messages if isinstance(m, AssistantMessage)).tool_calls[-1]
    assert cut.name == "grep" and cut.arguments.endswith('"max_results":')
    result, session, server, events = replay(path, task, home, monkeypatch,
                                             stop_reasons={0: "length"})
    assert result.ok and result.final_message == END
    results = [m for m in session.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 12 and cut.id not in {m.call_id for m in results}
    notes = [m.text for m in session.messages if isinstance(m, UserMessage)]
    assert any("cut off by the output-token limit" in n and "grep" in n for n in notes)
    assert any(isinstance(e, Notice) and "cut off" in e.message for e in events)
    assert len(server.requests) == 2  # no retry: the second request was accepted


def test_the_cut_off_call_is_rescued_even_without_the_stop_reason(
    task: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replayed as recorded (the file has no stop reason): the call runs, fails with a
    message for the model, and its arguments go back as valid JSON."""
    result, session, server, _ = replay(DATA / f"{CUT_OFF}.jsonl", task, home, monkeypatch)
    assert result.ok and len(server.requests) == 2
    errors = [m.content for m in session.messages
              if isinstance(m, ToolResultMessage) and m.is_error]
    assert any("not valid JSON" in e for e in errors)


def test_the_overflow_is_recognised_as_one(
    task: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ending = classify(LLAMA, status=400, payload=llama_server_error(
        400, "exceed_context_size_error", "request (8257 tokens) exceeds the available "
        "context size (8192 tokens), try increasing it"))
    result, _, _, _ = replay(DATA / f"{OVERFLOWED}.jsonl", task, home, monkeypatch,
                             ending=ending)
    assert not result.ok and result.error
    assert "context window" in result.error and "request refused" not in result.error
