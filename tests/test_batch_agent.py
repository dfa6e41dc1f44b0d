"""Agent-driven batch runs: `interpreter exec --repos ... PROMPT`, one agent session per
repository against the scripted model server (a real HTTP server on 127.0.0.1), with
the same report, all-or-nothing, publish and resume as scripted batches, plus
requests, tokens, cost and budgets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from agent_support import cli_env, provider_flags
from test_batch import INTERPRETER, read_report, report_lines

from codemode_testkit.scripted_server import RecordedRequest, ScriptedModelServer

# The program the "model" writes in every repository: reads name.txt (its output tells
# the model server which repository it is in), writes through a file tool and a command.
PROGRAM = """
const name = (await tools.read_file({path: "name.txt"})).content.trim();
await tools.write_file({path: "agent.txt", content: `edited ${name}\\n`});
await tools.shell({command: "echo from-command >> log.txt"});
console.log(`@@repo=${name}@@`);
"""


def reply(request: RecordedRequest) -> dict[str, Any]:
    """First request of a session: run PROGRAM; after its result: finish, except in
    the repository named "fails" (an error the client does not retry) and in "chatty"
    (keeps running the program, spending tokens)."""
    sent = json.dumps(request.body.get("messages", []))
    if "@@repo=fails@@" in sent:
        return {"status": 400, "error_message": "the model refuses this one"}
    if "@@repo=chatty@@" in sent or "@@repo=" not in sent:
        return {"tool_calls": [{"name": "exec", "arguments": {"code": PROGRAM}}]}
    return {"text": "Done: agent.txt written."}


def make_repos(root: Path, names: list[str]) -> None:
    for name in names:
        repo = root / name
        repo.mkdir(parents=True)
        (repo / "name.txt").write_text(f"{name}\n")
        (repo / "log.txt").write_text("")
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)


def exec_batch(
    tmp: Path, server: ScriptedModelServer, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INTERPRETER), "exec", *provider_flags(server.base_url, "chat"), *args],
        cwd=tmp, capture_output=True, text=True, timeout=300, env=cli_env(tmp / "home"),
    )  # fmt: skip


def test_one_agent_session_per_repository(tmp_path: Path) -> None:
    make_repos(tmp_path / "repos", ["a", "b", "fails", "chatty"])
    with ScriptedModelServer(reply) as server:
        proc = exec_batch(
            tmp_path, server, "--repos", "repos", "--jobs", "2", "--report", "r.jsonl",
            "--token-budget", "30000", "--price", "1.5,6", "Edit agent.txt",
        )  # fmt: skip
        requests = list(server.requests)
    assert proc.returncode == 1, proc.stderr
    report = read_report(tmp_path / "r.jsonl")
    header = report_lines(tmp_path / "r.jsonl")[0]
    assert header["script"] == "(prompt)"
    for name in ("a", "b"):
        line = report[name]
        assert line["status"] == "ok", line
        assert line["value"] == "Done: agent.txt written."
        assert line["model_requests"] == 2 and line["tool_calls"] >= 1
        assert line["input_tokens"] > 0 and line["output_tokens"] > 0
        expected = (line["input_tokens"] * 1.5 + line["output_tokens"] * 6) / 1e6
        assert abs(line["cost_usd"] - expected) < 1e-6
        assert line["changed_files"] == ["agent.txt", "log.txt"]
        repo = tmp_path / "repos" / name
        assert (repo / "agent.txt").read_text() == f"edited {name}\n"
        assert (repo / "log.txt").read_text() == "from-command\n"
    # A turn that failed after writing through a tool and a command: left as it was.
    failed = report["fails"]
    assert failed["status"] == "failed" and failed["error_kind"] == "agent", failed
    assert "the model refuses this one" in failed["error"]
    assert failed["rolled_back"] is True
    assert not (tmp_path / "repos" / "fails" / "agent.txt").exists()
    assert (tmp_path / "repos" / "fails" / "log.txt").read_text() == ""
    # Over its token budget: stopped, failed, nothing kept.
    chatty = report["chatty"]
    assert chatty["status"] == "failed" and chatty["error_kind"] == "budget", chatty
    assert "token budget spent" in chatty["error"] and chatty["input_tokens"] > 30000 - 5000
    assert not (tmp_path / "repos" / "chatty" / "agent.txt").exists()
    # Every request came from a session in a copy, never the repository itself.
    for request in requests:
        assert str(tmp_path / "repos") not in json.dumps(request.body)
    totals = [line for line in proc.stderr.splitlines() if line.startswith("model: ")]
    total_in = sum(line.get("input_tokens") or 0 for line in report.values())
    assert totals and f"{total_in} input" in totals[0] and "$" in totals[0], proc.stderr


def test_total_token_budget_stops_starting_and_resume_goes_on(tmp_path: Path) -> None:
    names = [f"r{i}" for i in range(5)]
    make_repos(tmp_path / "repos", names)
    with ScriptedModelServer(reply) as server:
        proc = exec_batch(
            tmp_path, server, "--repos", "repos", "--jobs", "1", "--report", "r.jsonl",
            "--total-token-budget", "1", "--dry-run", "Edit agent.txt",
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert "total token budget spent" in proc.stderr
        first = read_report(tmp_path / "r.jsonl")
        assert list(first) == ["r0"] and first["r0"]["status"] == "ok"
        assert first["r0"]["changed_files"] == ["agent.txt", "log.txt"]  # dry run: reported
        assert not (tmp_path / "repos" / "r0" / "agent.txt").exists()  # ... not applied
        rest = exec_batch(tmp_path, server, "--resume", "r.jsonl", "Edit agent.txt")
        assert rest.returncode == 0, rest.stderr
    report = read_report(tmp_path / "r.jsonl", resumed=True)
    assert sorted(report) == names and all(v["status"] == "ok" for v in report.values())
    for name in names[1:]:
        assert (tmp_path / "repos" / name / "agent.txt").read_text() == f"edited {name}\n"
    other = subprocess.run(
        [str(INTERPRETER), "exec", "--resume", "r.jsonl", "Another prompt"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, env=cli_env(tmp_path / "home"),
    )  # fmt: skip
    assert other.returncode == 2 and "made with another script" in other.stderr


def test_agent_batch_publishes_each_change_on_a_branch(tmp_path: Path) -> None:
    make_repos(tmp_path / "repos", ["p1", "p2"])
    for name in ("p1", "p2"):
        repo = tmp_path / "repos" / name
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm",
                        "init", "--allow-empty"], cwd=repo, check=True)  # fmt: skip
    with ScriptedModelServer(reply) as server:
        proc = exec_batch(
            tmp_path, server, "--repos", "repos", "--report", "r.jsonl", "--branch",
            "agent-edit", "--commit-message", "Agent edit", "--author", "Bot <bot@x.y>",
            "Edit agent.txt",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for name, line in read_report(tmp_path / "r.jsonl").items():
        repo = tmp_path / "repos" / name
        assert line["branch"] == "agent-edit" and line["commit"], line
        shown = subprocess.run(["git", "show", "--format=%an|%s", "--name-only", "HEAD"],
                               cwd=repo, capture_output=True, text=True).stdout.split()
        assert shown == ["Bot|Agent", "edit", "agent.txt", "log.txt"], shown
        assert (repo / "agent.txt").read_text() == f"edited {name}\n"
