"""Context overflows against a real llama.cpp server (llama-server, SmolLM2-135M) started
with a small context: the agent reads llama.cpp's own error (exceed_context_size_error,
n_ctx, n_prompt_tokens), shortens the turn and the next request fits.

The first reply is scripted through a relay (codemode_testkit/relay.py): a 135M model will
not run ``seq`` when asked; every later request goes to llama-server unchanged.
One 2,048-token server serves every case: the model's prompt processing is what these
tests cost (at 8,192 tokens the overflow case took ~110 CPU-s here, at 2,048 ~20), and
the issue's own case (``seq 1 3000`` against 8,192 tokens) is a figure that
benchmarks/local_overflow.py prints.
Skips, saying why, when the server is not built (scripts/setup-local-model.sh).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_support import run_cli

from codemode_testkit.local_model import MODEL_NAME, LocalModelServer, find_local_model
from codemode_testkit.relay import Relay

# The minimal harness's tools in code mode are bash and write_file; its instructions
# and tool declarations are ~1,500 tokens, so ~500 are left in a 2,048-token window and
# seq's ~3,000 tokens of output overflow it inside the turn, as seq 1 3000 overflows
# the default harness's ~4,500 tokens of instructions in an 8,192-token one.
SEQ_PROGRAM = "const r = await tools.bash({command: 'seq 1 1000'});\nconsole.log(r.output);"


@pytest.fixture(scope="module")
def server_2k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    found = find_local_model("llama-server")
    if isinstance(found, str):
        pytest.skip(found)
    log = tmp_path_factory.mktemp("llama-2k") / "llama-server.log"
    with LocalModelServer(found, n_ctx=2048, log=log) as server:
        yield server


def exec_flags(base_url: str, *args: str) -> list[str]:
    return ["exec", "-c", "model_provider=llamacpp",
            "-c", f"model_providers.llamacpp.base_url={base_url}", "--model", MODEL_NAME,
            "-c", "max_output_tokens=24", "-c", "temperature=0", "-c", "seed=1", *args]


def test_a_program_output_overflows_the_window_and_the_turn_goes_on(
    server_2k: LocalModelServer, home: Path, work: Path
) -> None:
    """The issue's case, at a quarter of its size: request 1 runs `seq` through a
    program; request 2, with that one output of the current turn, is refused by
    llama.cpp (exceed_context_size_error); the output is cut to its head and tail and
    request 3 fits the 2,048 tokens."""
    call = {"tool_calls": [{"name": "exec", "arguments": {"code": SEQ_PROGRAM}}]}
    with Relay(server_2k.base_url, [call]) as relay:
        run = run_cli(exec_flags(relay.base_url, "--code-mode", "--harness", "minimal",
                                 "--max-turns", "3", "count the numbers"),
                      home=home, cwd=work, timeout=600)
    log = relay.log
    print("\nrequests (body characters, HTTP status, prompt tokens llama.cpp counted):")
    for n, r in enumerate(log, 1):
        print(f"  {n}: {r.body_chars:,} chars, HTTP {r.status}, {r.prompt_tokens} tokens"
              f"{' (reply scripted)' if r.scripted else ''}")
    print(f"exit {run.code}; stderr tail: {run.stderr.strip().splitlines()[-2:]}")
    assert "Traceback" not in run.stderr
    assert log[0].scripted and log[1].status == 400  # the overflow llama.cpp reported
    assert log[1].prompt_tokens and log[1].prompt_tokens > 2048
    assert log[2].status == 200, log  # shortened once, and it fits
    assert log[2].prompt_tokens and log[2].prompt_tokens <= 2048
    assert "context window full (2,048 tokens)" in run.stderr, run.stderr
    assert "1 tool output cut to head and tail" in run.stderr, run.stderr
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
