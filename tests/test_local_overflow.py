"""Context overflows against a real llama.cpp server (llama-server, SmolLM2-135M) started
with a small context: the agent reads llama.cpp's own error (exceed_context_size_error,
n_ctx, n_prompt_tokens), shortens the turn and the next request fits.

The first reply is scripted through a relay (tests/local_relay.py): a 135M model will not
run ``seq 1 3000`` when asked; every later request goes to llama-server unchanged.
Skips, saying why, when the server is not built (scripts/setup-local-model.sh).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_support import run_cli
from local_relay import Relay

from codemode_testkit.local_model import MODEL_NAME, LocalModelServer, find_local_model

SEQ_PROGRAM = "const r = await tools.shell({command: 'seq 1 3000'});\nconsole.log(r.output);"


def serve(tmp: Path, n_ctx: int) -> Iterator[LocalModelServer]:
    found = find_local_model("llama-server")
    if isinstance(found, str):
        pytest.skip(found)
    with LocalModelServer(found, n_ctx=n_ctx, log=tmp / "llama-server.log") as server:
        yield server


@pytest.fixture(scope="module")
def server_8k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    yield from serve(tmp_path_factory.mktemp("llama-8k"), 8192)


@pytest.fixture(scope="module")
def server_2k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    yield from serve(tmp_path_factory.mktemp("llama-2k"), 2048)


def exec_flags(base_url: str, *args: str) -> list[str]:
    return ["exec", "-c", "model_provider=llamacpp",
            "-c", f"model_providers.llamacpp.base_url={base_url}", "--model", MODEL_NAME,
            "-c", "max_output_tokens=24", "-c", "temperature=0", "-c", "seed=1", *args]


def test_seq_3000_in_a_program_overflows_8k_and_the_turn_goes_on(
    server_8k: LocalModelServer, home: Path, work: Path
) -> None:
    """The issue's case: request 1 runs `seq 1 3000` through a program; request 2 is
    refused by llama.cpp (exceed_context_size_error); the output is cut to its head and
    tail and request 3 fits the 8,192 tokens."""
    call = {"tool_calls": [{"name": "exec", "arguments": {"code": SEQ_PROGRAM}}]}
    with Relay(server_8k.base_url, [call]) as relay:
        run = run_cli(exec_flags(relay.base_url, "--code-mode", "--max-turns", "3",
                                 "count the numbers"), home=home, cwd=work, timeout=600)
    log = relay.log
    print("\nrequests (body characters, HTTP status, prompt tokens llama.cpp counted):")
    for n, r in enumerate(log, 1):
        print(f"  {n}: {r.body_chars:,} chars, HTTP {r.status}, {r.prompt_tokens} tokens"
              f"{' (reply scripted)' if r.scripted else ''}")
    print(f"exit {run.code}; stderr tail: {run.stderr.strip().splitlines()[-2:]}")
    assert "Traceback" not in run.stderr
    assert log[0].scripted and log[1].status == 400  # the overflow llama.cpp reported
    assert log[1].prompt_tokens and log[1].prompt_tokens > 8192
    assert log[2].status == 200, log  # shortened once, and it fits
    assert log[2].prompt_tokens and log[2].prompt_tokens <= 8192
    assert "context window full (8,192 tokens)" in run.stderr, run.stderr
    assert "does not fit" not in run.stderr
    if run.code != 0:  # the small model may go on calling tools until --max-turns
        assert "--max-turns" in run.stderr, run.stderr
    assert all(r.status == 200 for r in log[2:]), log


def test_an_overflow_on_the_first_request_names_the_sizes(
    server_2k: LocalModelServer, home: Path, work: Path
) -> None:
    """Code mode's instructions alone are more than 2,048 tokens: one request, one line
    with the window, the prompt's size and the remedies, no retry."""
    with Relay(server_2k.base_url, []) as relay:
        run = run_cli(exec_flags(relay.base_url, "--code-mode", "hi"), home=home, cwd=work,
                      timeout=300)
    assert run.code == 1, run.stderr
    assert len(relay.log) == 1 and relay.log[0].status == 400
    prompt = relay.log[0].prompt_tokens
    assert prompt and prompt > 2048
    line = next(x for x in run.stderr.splitlines() if "does not fit" in x)
    assert f"({prompt:,} tokens" in line and "2,048-token context window" in line
    assert "llama-server -c" in line and "--harness minimal" in line
    assert "Traceback" not in run.stderr
    print(f"\n{line}")


def test_the_error_body_is_llama_cpps(server_2k: LocalModelServer) -> None:
    """The shape the classification reads: a 400 whose error has the type and sizes."""
    import urllib.error
    import urllib.request

    body = json.dumps({"model": MODEL_NAME, "messages": [
        {"role": "user", "content": "word " * 3000}], "max_tokens": 4}).encode()
    request = urllib.request.Request(f"{server_2k.base_url}/chat/completions", body,
                                     {"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=120)
    error = json.loads(caught.value.read())["error"]
    assert caught.value.code == 400 and error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == 2048 and error["n_prompt_tokens"] > 2048
