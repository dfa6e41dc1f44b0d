"""The scripted model server itself: routes, refusals, scripts from files and callables,
and the standalone command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from codemode_testkit.scripted_server import RecordedRequest, ScriptedModelServer, ScriptedReply

CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def events(response: httpx.Response) -> list[str]:
    return [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]


def chat_text(response: httpx.Response) -> str:
    chunks = [json.loads(e) for e in events(response)[:-1]]
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])


def test_routes_with_and_without_v1() -> None:
    replies = [{"text": "one"}, {"text": "two"}, {"text": "three"}]
    with ScriptedModelServer(replies) as server:
        root = server.base_url.removesuffix("/v1")
        a = httpx.post(f"{server.base_url}/chat/completions", json=CHAT)
        b = httpx.post(f"{root}/responses", json={"model": "m", "stream": True, "input": []})
        c = httpx.post(f"{root}/messages", json={"model": "m", "stream": True, "messages": []})
        missing = httpx.post(f"{root}/v1/embeddings", json={})
    assert a.headers["content-type"].startswith("text/event-stream")
    assert events(a)[-1] == "[DONE]"
    assert json.loads(events(b)[-1])["type"] == "response.completed"
    assert json.loads(events(c)[-1])["type"] == "message_stop"
    assert [r.wire for r in server.requests] == ["chat", "responses", "anthropic"]
    assert [r.path for r in server.requests] == ["/v1/chat/completions", "/responses",
                                                 "/messages"]
    assert missing.status_code == 404 and "no route" in missing.text


def test_non_streaming_requests_are_refused_without_using_a_reply() -> None:
    with ScriptedModelServer([{"text": "kept"}]) as server:
        refused = httpx.post(f"{server.base_url}/chat/completions", json={**CHAT, "stream": False})
        served = httpx.post(f"{server.base_url}/chat/completions", json=CHAT)
    assert refused.status_code == 400 and "stream: true" in refused.text
    assert chat_text(served) == "kept"
    assert server.remaining == 0


def test_exhausted_script_says_so() -> None:
    with ScriptedModelServer([]) as server:
        response = httpx.post(f"{server.base_url}/chat/completions", json=CHAT)
    assert response.status_code == 500
    assert "scripted server: script exhausted after 0 replies" in response.text
    assert response.headers["x-should-retry"] == "false"


def test_callable_script_sees_the_request() -> None:
    def answer(request: RecordedRequest) -> ScriptedReply:
        return ScriptedReply(text=f"you said {request.body['messages'][-1]['content']}")

    with ScriptedModelServer(answer) as server:
        response = httpx.post(f"{server.base_url}/chat/completions", json=CHAT)
    assert chat_text(response) == "you said hi"
    assert server.remaining is None


def test_from_file_and_invalid_files(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "a"}, {"status": 429, "retry_after": 2}]))
    server = ScriptedModelServer.from_file(script)
    assert server.remaining == 2
    typo = tmp_path / "typo.json"
    typo.write_text('[{"txt": "misspelt"}]')
    with pytest.raises(ValueError, match="txt"):
        ScriptedModelServer.from_file(typo)
    bad = tmp_path / "bad.json"
    bad.write_text('{"text": "not a list"}')
    with pytest.raises(ValueError, match="list of replies"):
        ScriptedModelServer.from_file(bad)


def test_standalone_command(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "hello from the script"}]))
    record = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "codemode_testkit.scripted_server", str(script),
         "--record", str(record)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        response = httpx.post(f"{base_url}/chat/completions", json=CHAT, timeout=10)
        assert "hello" in response.text
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    assert recorded[0]["body"]["messages"] == CHAT["messages"]


def test_standalone_command_reports_a_missing_script(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "codemode_testkit.scripted_server", str(tmp_path / "nope.json")],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert "nope.json" in proc.stderr


def test_push_and_wait_for_requests() -> None:
    import threading

    with ScriptedModelServer([]) as server:
        server.push({"text": "pushed"})
        thread = threading.Thread(
            target=lambda: httpx.post(f"{server.base_url}/chat/completions", json=CHAT))
        thread.start()
        seen = server.wait_for_requests(1, timeout_s=10)
        thread.join()
        with pytest.raises(TimeoutError, match="1 of 2 requests"):
            server.wait_for_requests(2, timeout_s=0.05)
    assert seen[0].body["messages"] == CHAT["messages"]
    assert server.remaining == 0
    with pytest.raises(TypeError):
        ScriptedModelServer(lambda r: {"text": "x"}).push({"text": "y"})
