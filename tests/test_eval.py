"""`interpreter eval` end to end against the scripted model server, which answers each
task as its scripts say (codemode.eval.scripted): the real CLI, real sessions, tools
and isolate, each task's workspace checked by its verify.py. The scripts use
claude-code's tool names, so in the minimal harness the same replies fail: the table
has a winner and a loser."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from agent_support import INTERPRETER, cli_env, provider_flags, run_cli

from codemode.eval.scripted import TaskScripts
from codemode.eval.suite import load_tasks
from codemode_testkit.scripted_server import ScriptedModelServer

TASKS = ["fix_failing_test", "find_the_bug", "renamed_setting"]
TWO_HARNESSES = ["--harness", "claude-code", "--harness", "minimal"]


def task_flags(*names: str) -> list[str]:
    return [x for n in names for x in ("--task", n)]


def eval_cli(server: ScriptedModelServer, home: Path, work: Path, *args: str) -> Any:
    return run_cli(["eval", *provider_flags(server.base_url, "chat"), *args],
                   home=home, cwd=work, timeout=600)


def read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


def test_eval_prints_the_table_recommends_and_writes_the_config(home: Path, work: Path) -> None:
    report_path = work / "report.json"
    with ScriptedModelServer(TaskScripts(load_tasks(TASKS))) as server:
        run = eval_cli(server, home, work, *TWO_HARNESSES, *task_flags(*TASKS),
                       "--repeats", "2", "--report", str(report_path), "--write-config")
    assert run.code == 0, run.stderr
    print("\n" + run.stdout)
    rows = {tuple(line.split()[:2]): line for line in run.stdout.splitlines()
            if line.startswith(("claude-code", "minimal"))}
    assert "6/6 (100%)" in rows[("claude-code", "code")]
    assert "6/6 (100%)" in rows[("claude-code", "classic")]
    assert "0/6 (0%)" in rows[("minimal", "code")] and "wrong_result 6" in rows[("minimal", "code")]
    assert "recommended for test-model: harness claude-code, code dialect" in run.stdout
    assert "[24/24]" in run.stderr  # progress, one line per run
    report = read(report_path)
    assert report["stopped"] is None and len(report["runs"]) == 24
    assert {(r["task"], r["harness"], r["dialect"], r["repeat"]) for r in report["runs"]} == {
        (t, h, d, n) for t in TASKS for h in ("claude-code", "minimal")
        for d in ("code", "classic") for n in (1, 2)}
    ok = [r for r in report["runs"] if r["ok"]]
    assert all(r["model_requests"] >= 2 and r["input_tokens"] > 0 for r in ok)
    assert all(0 < r["model_s"] <= r["wall_s"] for r in report["runs"])
    # Code mode takes fewer requests than classic on these tasks (2-3 against 5-6).
    code = [r["model_requests"] for r in ok if r["dialect"] == "code"]
    classic = [r["model_requests"] for r in ok if r["dialect"] == "classic"]
    assert max(code) < min(classic)
    assert report["recommended"] == {"harness": "claude-code", "dialect": "code"}
    config = (home / "config.toml").read_text("utf-8")
    assert '[model_harness."test-model"]' in config or "[model_harness.test-model]" in config
    assert 'harness = "claude-code"' in config and "code_mode = true" in config

    # A session of that model now runs in the stored harness and dialect...
    with ScriptedModelServer([{"text": "hi"}]) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "hello"],
                      home=home, cwd=work)
        offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert run.code == 0, run.stderr
    assert "exec" in offered and "tools.Bash" in json.dumps(server.requests[0].body)
    # ...unless the command line says otherwise.
    with ScriptedModelServer([{"text": "hi"}]) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "--classic",
                       "--harness", "minimal", "hello"], home=home, cwd=work)
        offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert run.code == 0, run.stderr
    assert sorted(offered) == ["bash", "write_file"]


def test_ctrl_c_stops_the_eval_and_resume_finishes_it(home: Path, work: Path) -> None:
    report_path = work / "report.json"
    flags = [*TWO_HARNESSES, *task_flags(*TASKS), "--report", str(report_path)]
    # Each reply waits a little, so that the interrupt lands inside a run.
    with ScriptedModelServer(TaskScripts(load_tasks(TASKS), hang_s=0.2)) as server:
        proc = subprocess.Popen(
            [str(INTERPRETER), "eval", *provider_flags(server.base_url, "chat"), *flags],
            cwd=work, env=cli_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if report_path.is_file() and len(read(report_path)["runs"]) >= 3:
                break
            time.sleep(0.1)
        time.sleep(0.3)  # into the next run
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "--resume" in err
    first = read(report_path)
    done = len(first["runs"])
    assert first["stopped"] == "interrupted" and 3 <= done < 12, (done, err)
    assert "harness" in out  # the partial table

    with ScriptedModelServer(TaskScripts(load_tasks(TASKS))) as server:
        run = eval_cli(server, home, work, *flags, "--resume")
    assert run.code == 0, run.stderr
    assert f"resuming: {done} of 12 runs" in run.stderr
    final = read(report_path)
    assert final["stopped"] is None and len(final["runs"]) == 12
    assert final["runs"][:done] == first["runs"]  # kept as they were
    keys = [(r["task"], r["harness"], r["dialect"], r["repeat"]) for r in final["runs"]]
    assert len(set(keys)) == 12  # nothing ran twice
    # The resumed runs sent their own requests only.
    assert len(server.requests) == sum(r["model_requests"] for r in final["runs"][done:])


def test_a_token_budget_stops_it_and_a_partial_eval_writes_no_config(
    home: Path, work: Path
) -> None:
    """Without --harness: the model family's harness (native, for an unknown family) and
    minimal. The budget is checked before each run."""
    report_path = work / "report.json"
    flags = [*task_flags("fix_failing_test"), "--dialect", "code", "--report", str(report_path)]
    with ScriptedModelServer(TaskScripts(load_tasks())) as server:
        run = eval_cli(server, home, work, *flags, "--max-tokens", "100", "--write-config")
    assert run.code == 0, run.stderr
    assert "(native code, minimal code)" in run.stderr
    assert "stopped early: token budget reached" in run.stderr
    assert "config not written: the eval stopped early" in run.stderr
    assert not (home / "config.toml").exists()
    report = read(report_path)
    assert len(report["runs"]) == 1 and report["stopped"].startswith("token budget")
    with ScriptedModelServer(TaskScripts(load_tasks())) as server:
        run = eval_cli(server, home, work, *flags, "--resume")
    assert run.code == 0 and len(read(report_path)["runs"]) == 2, run.stderr


def test_bad_settings_are_one_line_usage_errors(home: Path, work: Path) -> None:
    with ScriptedModelServer([]) as server:
        cost = eval_cli(server, home, work, "--max-cost", "1")
        harness = eval_cli(server, home, work, "--harness", "nosuch")
        task = eval_cli(server, home, work, "--task", "nosuch")
        resume = eval_cli(server, home, work, "--resume", "--report", str(work / "none.json"))
        assert server.requests == []
    assert cost.code == 2 and "--price-input and --price-output" in cost.stderr
    assert harness.code == 2 and "unknown harness nosuch" in harness.stderr
    assert task.code == 2 and "no task named nosuch" in task.stderr
    assert resume.code == 2 and "nothing to resume" in resume.stderr
    for run in (cost, harness, task, resume):
        assert "Traceback" not in run.stderr


def test_costs_are_counted_with_the_prices_given(home: Path, work: Path) -> None:
    report_path = work / "report.json"
    with ScriptedModelServer(TaskScripts(load_tasks())) as server:
        run = eval_cli(server, home, work, "--harness", "claude-code", "--dialect", "code",
                       *task_flags("fix_failing_test", "find_the_bug"), "--report",
                       str(report_path), "--price-input", "1000", "--price-output", "1000",
                       "--max-cost", "0.001")
    assert run.code == 0, run.stderr
    report = read(report_path)
    [first] = report["runs"]  # ~10,000 tokens at $1,000 per million: over $0.001
    assert first["cost"] == (first["input_tokens"] + first["output_tokens"]) * 1000 / 1e6
    assert "stopped early: cost budget reached" in run.stderr


def test_a_provider_that_fails_every_request_stops_the_eval(home: Path, work: Path) -> None:
    refused = {"status": 401, "error_message": "Incorrect API key provided."}
    with ScriptedModelServer(lambda request: refused) as server:
        run = eval_cli(server, home, work, *task_flags("fix_failing_test", "find_the_bug"))
        asked = len(server.requests)
    assert run.code == 1, run.stderr
    assert "stopped: the model service failed twice in a row" in run.stderr
    assert "authentication failed" in run.stderr and "Traceback" not in run.stderr
    assert asked == 2  # not the 8 runs planned
