"""End-to-end `interpreter exec` runs against the scripted model server, on every wire,
in both dialects; faults; sessions, resume and replay."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import (
    INTERPRETER,
    WIRES,
    call,
    cli_env,
    provider_flags,
    records,
    run_cli,
    session_files,
)

from codemode_testkit.scripted_server import ScriptedModelServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def exec_cli(server: ScriptedModelServer, wire: str, *args: str, home: Path, cwd: Path, **kw: Any):
    return run_cli(
        ["exec", *provider_flags(server.base_url, wire), *args], home=home, cwd=cwd, **kw
    )


def tool_results(body: dict[str, Any]) -> str:
    """Everything a request sent back as tool results, whatever the wire (as JSON text)."""
    return json.dumps(body, ensure_ascii=False)


# --- classic and code dialects on every wire -------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
def test_classic_turn(wire: str, home: Path, work: Path) -> None:
    script = [
        {
            "text": "Reading the notes first.",
            "tool_calls": [
                call("read_file", {"path": "notes.txt"}),
                call("shell", {"command": "echo gamma >> notes.txt && wc -l < notes.txt"}),
            ],
        },
        {"text": "Added gamma; the file has 3 lines."},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, wire, "add gamma to notes.txt", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "Added gamma; the file has 3 lines."
    assert (work / "notes.txt").read_text() == "alpha\nbeta\ngamma\n"
    second = tool_results(server.requests[1].body)
    assert "1\\talpha" in second  # read_file rendered with line numbers
    assert "exit code: 0" in second and "3" in second
    first = server.requests[0].body
    names = json.dumps(first.get("tools"))
    for tool in ("shell", "read_file", "write_file", "list_dir", "glob", "grep", "update_plan"):
        assert f'"{tool}"' in names
    assert "$ echo gamma" in run.stderr  # progress on stderr


@pytest.mark.parametrize("wire", WIRES)
def test_code_mode_turn(wire: str, home: Path, work: Path) -> None:
    program = (
        "const [a, b] = await Promise.all([\n"
        "  tools.read_file({path: 'notes.txt'}),\n"
        "  tools.shell({command: 'echo from-shell'}),\n"
        "]);\n"
        "await tools.write_file({path: 'out.txt', content: a.content.toUpperCase()});\n"
        "console.log('lines:', a.total_lines, b.output.trim());\n"
        "return {ok: true};"
    )
    script = [
        {"tool_calls": [call("exec", {"code": program})]},
        {"text": "Wrote out.txt."},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, wire, "--code-mode", "--json", "uppercase", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert (work / "out.txt").read_text() == "ALPHA\nBETA\n"
    offered = server.requests[0].body["tools"]
    assert len(offered) == 2 and json.dumps(offered).count("read_file(args") == 1  # exec, wait
    result = tool_results(server.requests[1].body)
    assert "lines: 2 from-shell" in result and "[return value]" in result
    events = run.events()
    types = [e["type"] for e in events]
    assert types[0] == "thread.started" and types[1] == "turn.started"
    assert types[-1] == "turn.completed"
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    program_item = next(i for i in items if i["type"] == "code_execution")
    nested = [i for i in items if i.get("parent_id") == program_item["id"]]
    assert {i["type"] for i in nested} == {"tool_call", "command_execution"}
    assert items[-1] == {
        "id": items[-1]["id"],
        "parent_id": None,
        "type": "agent_message",
        "text": "Wrote out.txt.",
    }
    assert events[-1]["usage"]["input_tokens"] > 0


def test_code_mode_freeform_exec_on_responses(home: Path, work: Path) -> None:
    script = [
        {"tool_calls": [call("exec", "console.log(6 * 7)", freeform=True)]},
        {"text": "42"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "responses", "--code-mode", "compute", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert server.requests[0].body["tools"][0]["type"] == "custom"
    assert "42" in tool_results(server.requests[1].body)


def test_json_events_for_a_command(home: Path, work: Path) -> None:
    script = [
        {"tool_calls": [call("shell", {"command": "exit 3"})]},
        {"text": "it failed with 3"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "--json", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    events = run.events()
    started = next(e for e in events if e["type"] == "item.started")
    assert started["item"]["type"] == "command_execution"
    assert started["item"]["status"] == "in_progress"
    done = next(
        e
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    )
    assert done["item"]["exit_code"] == 3 and done["item"]["status"] == "failed"
    assert all(not e["type"].startswith("delta") for e in events)


def test_update_plan_becomes_a_todo_list(home: Path, work: Path) -> None:
    plan = {
        "plan": [{"step": "look", "status": "completed"}, {"step": "fix", "status": "in_progress"}]
    }
    script = [{"tool_calls": [call("update_plan", plan)]}, {"text": "ok"}]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "--json", "plan it", home=home, cwd=work)
    todo = next(e["item"] for e in run.events() if e.get("item", {}).get("type") == "todo_list")
    assert todo["items"] == [
        {"text": "look", "completed": True, "status": "completed"},
        {"text": "fix", "completed": False, "status": "in_progress"},
    ]


def test_agents_md_reaches_the_model(home: Path, work: Path) -> None:
    (work / ".git").mkdir()
    (work / "AGENTS.md").write_text("Always answer in haiku.\n", encoding="utf-8")
    (home / "AGENTS.md").write_text("User rule: be brief.\n", encoding="utf-8")
    with ScriptedModelServer([{"text": "ok"}]) as server:
        run = exec_cli(server, "anthropic", "hi", home=home, cwd=work)
    assert run.code == 0, run.stderr
    system = json.dumps(server.requests[0].body["system"])
    assert "Always answer in haiku." in system and "User rule: be brief." in system
    assert system.index("be brief") < system.index("haiku")


def test_prompt_from_stdin(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "read it"}]) as server:
        run = exec_cli(server, "chat", "-", home=home, cwd=work, stdin="prompt via stdin")
    assert run.code == 0, run.stderr
    assert "prompt via stdin" in json.dumps(server.requests[0].body["messages"])


def test_a_prompt_on_stdin_that_is_not_utf8_is_read_with_replacement(
    home: Path, work: Path
) -> None:
    with ScriptedModelServer([{"text": "read it"}]) as server:
        proc = subprocess.run(
            [str(INTERPRETER), "exec", *provider_flags(server.base_url, "chat"), "-"],
            input="fix the caf\u00e9 bug".encode("latin-1"),
            capture_output=True, cwd=work, env=cli_env(home), timeout=60,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    messages = json.dumps(server.requests[0].body["messages"], ensure_ascii=False)
    assert "fix the caf\ufffd bug" in messages


# --- faults ------------------------------------------------------------------------------


def test_rate_limit_and_server_error_are_retried(home: Path, work: Path) -> None:
    script = [
        {"status": 429, "retry_after": 0.2, "error_message": "slow down"},
        {"status": 500, "error_message": "boom"},
        {"tool_calls": [call("shell", {"command": "echo x >> ran.txt"})]},
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert "retrying" in run.stderr
    assert (work / "ran.txt").read_text() == "x\n"


@pytest.mark.parametrize("wire", WIRES)
def test_a_stream_cut_midway_runs_no_tool_twice(wire: str, home: Path, work: Path) -> None:
    calls = [call("shell", {"command": "echo x >> ran.txt"})]
    script = [
        {"text": "Running it now, then checking.", "tool_calls": calls, "cut_after_events": 3},
        {"text": "Running it now, then checking.", "tool_calls": calls},
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, wire, "--json", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert (work / "ran.txt").read_text() == "x\n"
    messages = [
        e["item"]["text"]
        for e in run.events()
        if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages == ["Running it now, then checking.", "done"]


def test_malformed_tool_arguments_go_back_to_the_model(home: Path, work: Path) -> None:
    script = [
        {"tool_calls": [call("shell", '{"command": "echo hi"')]},
        {"tool_calls": [call("shel", {"command": "echo hi"})]},
        {"text": "gave up"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert "not valid JSON" in tool_results(server.requests[1].body)
    assert "did you mean shell" in tool_results(server.requests[2].body)


def test_unauthorized_names_the_env_var(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"status": 401, "error_message": "bad key"}]) as server:
        run = exec_cli(
            server,
            "chat",
            "-c",
            "model_providers.scripted.env_key=SCRIPTED_API_KEY",
            "go",
            home=home,
            cwd=work,
            SCRIPTED_API_KEY="wrong",
        )
    assert run.code == 1
    assert "SCRIPTED_API_KEY" in run.stderr


def test_a_missing_key_names_the_env_var(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "never"}]) as server:
        run = exec_cli(
            server,
            "chat",
            "-c",
            "model_providers.scripted.env_key=SCRIPTED_API_KEY",
            "go",
            home=home,
            cwd=work,
        )
    assert run.code == 2
    assert "SCRIPTED_API_KEY" in run.stderr and "Traceback" not in run.stderr
    assert server.requests == []


def test_unknown_model(home: Path, work: Path) -> None:
    script = [
        {
            "status": 404,
            "error_message": "The model `nope` does not exist",
            "error_code": "model_not_found",
        }
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 1
    assert "test-model" in run.stderr or "nope" in run.stderr


def test_context_overflow_shortens_this_turns_outputs_and_retries_once(
    home: Path, work: Path
) -> None:
    """(tests/test_context_overflow.py has each service's error shape and the sizes.)"""
    big = "x" * 5000
    (work / "big.txt").write_text(big, encoding="utf-8")
    script = [
        {"tool_calls": [call("read_file", {"path": "big.txt"})]},
        {"tool_calls": [call("read_file", {"path": "notes.txt"})]},
        {
            "status": 400,
            "error_code": "context_length_exceeded",
            "error_message": "This model's maximum context length is 1000 tokens. However, "
            "your messages resulted in 2600 tokens.",
        },
        {"text": "fits now"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    retried = tool_results(server.requests[3].body)
    assert big not in retried and "cut from the middle of this output" in retried
    assert "alpha" in retried  # the latest result is kept (it is short)
    assert len(server.requests) == 4  # one retry


def test_max_turns_stops_the_turn(home: Path, work: Path) -> None:
    loop = [{"tool_calls": [call("shell", {"command": "true"})]}] * 3
    with ScriptedModelServer(loop) as server:
        run = exec_cli(server, "chat", "--max-turns", "2", "go", home=home, cwd=work)
    assert run.code == 1
    assert "--max-turns" in run.stderr
    assert len(server.requests) == 2


def test_bad_config_is_a_usage_error(home: Path, work: Path) -> None:
    run = run_cli(["exec", "--provider", "nosuch", "hi"], home=home, cwd=work)
    assert run.code == 2
    assert "unknown provider 'nosuch'" in run.stderr
    run = run_cli(["exec", "hi"], home=home, cwd=work)
    assert run.code == 2 and "no model provider configured" in run.stderr


# --- sessions: recording, resume, kill -9, replay ------------------------------------------


def test_session_is_recorded_and_resumed(home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "first answer"}]) as server:
        first = exec_cli(server, "chat", "--json", "first question", home=home, cwd=work)
    thread = first.events()[0]["thread_id"]
    [path] = session_files(home)
    assert thread in path.name
    with ScriptedModelServer([{"text": "second answer"}]) as server:
        second = run_cli(
            ["resume", thread, "second question", *provider_flags(server.base_url, "chat")],
            home=home,
            cwd=work,
        )
    assert second.code == 0, second.stderr
    assert second.stdout.strip() == "second answer"
    sent = json.dumps(server.requests[0].body["messages"])
    assert "first question" in sent and "first answer" in sent and "second question" in sent
    assert session_files(home) == [path]  # appended to the same file
    kinds = [r["type"] for r in records(path)]
    assert kinds.count("session_meta") == 1 and kinds.count("message") == 4


def test_kill_9_mid_turn_then_resume_last(home: Path, work: Path) -> None:
    script = [{"tool_calls": [call("shell", {"command": "echo started > s.txt; sleep 60"})]}]
    with ScriptedModelServer(script) as server:
        proc = subprocess.Popen(
            [str(INTERPRETER), "exec", *provider_flags(server.base_url, "chat"), "long job"],
            cwd=work,
            env=cli_env(home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not (work / "s.txt").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert (work / "s.txt").exists()
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=10)
    [path] = session_files(home)
    with path.open("a", encoding="utf-8") as f:
        f.write('{"type": "message", "message": {"role": "assi')  # a line cut by the kill
    with ScriptedModelServer([{"text": "resumed fine"}]) as server:
        run = run_cli(
            ["resume", "--last", "what happened?", *provider_flags(server.base_url, "chat")],
            home=home,
            cwd=work,
        )
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "resumed fine"
    sent = json.dumps(server.requests[0].body["messages"])
    assert "interrupted: the session ended before this call finished" in sent
    assert "long job" in sent and "what happened?" in sent


def _processes_running(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if needle in cmdline:
                found.append(int(entry.name))
    return found


def test_sigint_stops_the_turn_and_kills_the_command(home: Path, work: Path) -> None:
    # A unique duration marks the command's process (PIDs inside a sandbox's PID
    # namespace are not the host's, so the test looks the process up by command line).
    # Unique per run too: the same test in another checkout on this machine must not match.
    marker = f"sleep 61.{os.getpid()}{time.monotonic_ns() % 10_000:04d}"
    script = [{"tool_calls": [call("shell", {"command": f"touch started; {marker}"})]}]
    with ScriptedModelServer(script) as server:
        proc = subprocess.Popen(
            [str(INTERPRETER), "exec", *provider_flags(server.base_url, "chat"), "go"],
            cwd=work,
            env=cli_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not _processes_running(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_running(marker)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    deadline = time.monotonic() + 5
    while _processes_running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_running(marker) == []
    [path] = session_files(home)
    events = [r["event"]["type"] for r in records(path) if r["type"] == "event"]
    assert events[-1] == "turn.failed"


def test_replay_runs_the_recorded_model_side_against_real_tools(home: Path, tmp_path: Path) -> None:
    original = tmp_path / "original"
    shutil.copytree(EXAMPLES / "bugfix-repo", original)
    program = (
        "const f = await tools.read_file({path: 'textstats/core.py'});\n"
        "await tools.write_file({path: 'textstats/core.py', content: f.content.replace(\n"
        "  'return sum(len(w) for w in found) / len(found)',\n"
        "  'return sum(len(w) for w in found) / len(found) if found else 0.0')});\n"
        "const t = await tools.shell({command: 'python3 -m unittest -q 2>&1 | tail -1'});\n"
        "console.log(t.output);"
    )
    script = [{"tool_calls": [call("exec", {"code": program})]}, {"text": "Fixed."}]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "responses", "--code-mode", "fix the test", home=home, cwd=original)
    assert run.code == 0, run.stderr
    [recording] = session_files(home)

    fresh = tmp_path / "fresh"
    shutil.copytree(EXAMPLES / "bugfix-repo", fresh)
    replayed = run_cli(["exec", "--replay", str(recording), "--json"], home=home, cwd=fresh)
    assert replayed.code == 0, replayed.stderr
    assert (fresh / "textstats/core.py").read_text() == (original / "textstats/core.py").read_text()
    program_items = [
        e["item"]
        for e in replayed.events()
        if e["type"] == "item.completed" and e["item"]["type"] == "code_execution"
    ]
    assert program_items and "OK" in program_items[0]["output"]


# --- the sandbox under exec ------------------------------------------------------------


def test_exec_refuses_a_command_needing_approval(home: Path, work: Path) -> None:
    outside = work.parent / "outside.txt"
    outside.write_text("keep me", encoding="utf-8")
    script = [
        {"tool_calls": [call("shell", {"command": f"rm -rf {outside}"})]},
        {"text": "could not"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "--json", "delete it", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert outside.read_text() == "keep me"
    sent = tool_results(server.requests[1].body)
    assert "approval" in sent and str(outside) in sent


def test_a_refused_call_is_a_catchable_exception_in_code_mode(home: Path, work: Path) -> None:
    program = (
        "try {\n"
        "  await tools.shell({command: 'git reset --hard'});\n"
        "  console.log('RAN' + '-MARK');\n"
        "} catch (e) {\n"
        "  console.log('caught:', e.message);\n"
        "}"
    )
    script = [{"tool_calls": [call("exec", program, freeform=True)]}, {"text": "ok"}]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "responses", "--code-mode", "reset", home=home, cwd=work)
    assert run.code == 0, run.stderr
    sent = tool_results(server.requests[1].body)
    assert "caught:" in sent and "discards uncommitted changes" in sent
    assert "RAN-MARK" not in sent


def test_approval_never_runs_it_confined(home: Path, work: Path) -> None:
    (work / "victim").mkdir()
    outside = work.parent / "escape.txt"
    script = [
        {
            "tool_calls": [
                call("shell", {"command": "rm -rf victim"}),
                call("shell", {"command": f"echo x > {outside}"}),
            ]
        },
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(server, "chat", "--approval", "never", "go", home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert not (work / "victim").exists()  # prompt-level, allowed by --approval never
    assert not outside.exists()  # but confinement still keeps writes in the workspace


def test_an_emulated_harness_reports_commands_as_command_executions(home: Path, work: Path) -> None:
    todos = {"todos": [{"content": "look", "status": "completed", "activeForm": "Looking"}]}
    script = [
        {"tool_calls": [call("Bash", {"command": "echo hi"}), call("TodoWrite", todos)]},
        {"text": "ok"},
    ]
    with ScriptedModelServer(script) as server:
        run = exec_cli(
            server, "anthropic", "--harness", "claude-code", "--json", "go", home=home, cwd=work
        )
    assert run.code == 0, run.stderr
    items = [e["item"] for e in run.events() if e["type"] == "item.completed"]
    command = next(i for i in items if i["type"] == "command_execution")
    assert command["command"] == "echo hi" and command["exit_code"] == 0
    todo = next(i for i in items if i["type"] == "todo_list")
    assert todo["items"] == [{"text": "look", "completed": True, "status": "completed"}]


def test_a_session_without_a_message_leaves_no_file(
    home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.agent.replay import ReplayProvider
    from codemode.assembly.options import SessionOptions, SessionSpec
    from codemode.assembly.session import build_session
    from codemode.config import load_config

    monkeypatch.setenv("CODEMODE_HOME", str(home))
    session = build_session(
        load_config(home=home),
        SessionOptions(cwd=work, model="m"),
        SessionSpec(provider=ReplayProvider([]), provider_name="replay"),
    )
    assert session.rollout is not None
    asyncio.run(session.aclose())
    assert session_files(home) == []
