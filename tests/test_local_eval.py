"""`interpreter eval` against a real llama.cpp server (llama-server, SmolLM2-135M): the
plumbing, not the model's success (a 135M model does not fix bugs). Skips, saying why,
when the server is not built (scripts/setup-local-model.sh)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_support import run_cli

from codemode_testkit.local_model import MODEL_NAME, LocalModelServer, find_local_model

KINDS = {None, "wrong_result", "max_turns", "no_action", "context_full", "error"}


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    found = find_local_model("llama-server")
    if isinstance(found, str):
        pytest.skip(found)
    log = tmp_path_factory.mktemp("llama-eval") / "llama-server.log"
    with LocalModelServer(found, n_ctx=4096, log=log) as server:
        yield server


def test_eval_runs_a_task_against_llama_server(
    llama_server: LocalModelServer, home: Path, work: Path
) -> None:
    report_path = work / "report.json"
    run = run_cli(["eval", "-c", "model_provider=llamacpp",
                   "-c", f"model_providers.llamacpp.base_url={llama_server.base_url}",
                   "--model", MODEL_NAME, "-c", "max_output_tokens=32", "-c", "temperature=0",
                   "--harness", "minimal", "--dialect", "classic", "--task", "fix_failing_test",
                   "--max-turns", "2", "--report", str(report_path)],
                  home=home, cwd=work, timeout=600)
    print("\n" + run.stdout + run.stderr[-600:])
    assert run.code == 0, run.stderr
    assert "Traceback" not in run.stderr
    [record] = json.loads(report_path.read_text("utf-8"))["runs"]
    assert record["model_requests"] >= 1 and record["input_tokens"] > 0
    assert record["output_tokens"] > 0
    assert record["error_kind"] in KINDS, record
    assert 0 < record["model_s"] <= record["wall_s"]
    assert "minimal" in run.stdout and "classic" in run.stdout
