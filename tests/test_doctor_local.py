"""`interpreter doctor --local` against the scripted server (a real HTTP server on
127.0.0.1) and against a port where nothing listens."""

from __future__ import annotations

from pathlib import Path

from agent_support import call, run_cli

from codemode_testkit.local_model import free_port
from codemode_testkit.scripted_server import ScriptedModelServer


def test_a_working_server_gets_a_full_round_trip(home: Path, work: Path) -> None:
    script = [{"text": "hello there"}, {"tool_calls": [call("add", {"a": 2, "b": 3})]},
              {"text": "the sum is 5"}]
    with ScriptedModelServer(script) as server:
        run = run_cli(["doctor", "--local", "--base-url", server.base_url, "--model", "m"],
                      home=home, cwd=work)
    assert run.code == 0, run.stdout + run.stderr
    assert "Local model servers" in run.stdout
    for words in ("streamed", "add(", "took the result back", "all good"):
        assert words in run.stdout
    sent_back = server.requests[2].body["messages"]
    assert sent_back[-1] == {"role": "tool", "tool_call_id": sent_back[-2]["tool_calls"][0]["id"],
                             "content": "5"}
    assert all(r.body.get("max_tokens") for r in server.requests)  # bounded output


def test_a_model_that_answers_in_text_is_a_warning(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "hi"}, {"text": "2 + 3 = 5"}]) as server:
        run = run_cli(["doctor", "--local", "--base-url", server.base_url, "--model", "m"],
                      home=home, cwd=work)
    assert run.code == 1
    assert "answered in text" in run.stdout and "fix:" in run.stdout


def test_a_server_error_is_reported_not_raised(home: Path, work: Path) -> None:
    script = [{"status": 400, "error_message": "request (9000 tokens) exceeds the available "
               "context size (2048 tokens)", "error_code": "exceed_context_size_error"}]
    with ScriptedModelServer(script) as server:
        run = run_cli(["doctor", "--local", "--base-url", server.base_url, "--model", "m"],
                      home=home, cwd=work)
    assert run.code == 1 and "Traceback" not in run.stderr + run.stdout
    assert "context window" in run.stdout


def test_nothing_listening_says_so(home: Path, work: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    run = run_cli(["doctor", "--local", "--base-url", url], home=home, cwd=work)
    assert run.code == 1 and "Traceback" not in run.stderr
    assert "nothing answers at" in run.stdout
