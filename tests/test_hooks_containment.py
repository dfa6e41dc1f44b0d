"""A failing hook is contained: a hanging one is stopped at its timeout with everything
it started, a crashing, flooding or garbled one gives one notice, and the event takes
its safe default (a failed PreToolUse guard denies the call)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from hooks_support import hooks_table, python_hook, run_session, script, write_hooks

from codemode.hooks.outcome import read_outcome
from codemode.hooks.process import OUTPUT_CAP, run_command


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_hanging_hook_is_stopped_with_what_it_started(tmp_path: Path, burners: None) -> None:
    pids = tmp_path / "pids"
    hang = script(tmp_path, "hang.sh", (
        "#!/bin/sh\n"
        f"sleep 300 & echo $! > {pids}\n"
        "sleep 300\n"))
    started = time.monotonic()
    done = asyncio.run(run_command(str(hang), b"{}", cwd=tmp_path, env=dict(os.environ),
                                   timeout_s=1.0))
    took = time.monotonic() - started
    assert done.timed_out and done.exit_code is None
    assert took < 30  # stopped at its timeout, not after its sleeps (generous: loaded)
    child = int(pids.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)  # the background child went with it
    outcome = read_outcome("PreToolUse", done)
    assert outcome.failure is not None and "timed out" in outcome.failure


def test_a_flooding_hook_is_stopped_and_its_output_not_kept(tmp_path: Path) -> None:
    flood = script(tmp_path, "flood.sh", "#!/bin/sh\nyes 'xxxxxxxxxxxxxxxx'\n")
    done = asyncio.run(run_command(str(flood), b"", cwd=tmp_path, env=dict(os.environ),
                                   timeout_s=60))
    assert done.flooded and len(done.stdout) <= OUTPUT_CAP
    assert "too much output" in (read_outcome("PostToolUse", done).failure or "")


def test_a_hook_that_exits_leaving_a_child_holding_its_output_is_not_waited_for(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    leave = script(tmp_path, "leave.sh", f"#!/bin/sh\nsleep 300 & echo $! > {pids}\necho '{{}}'\n")
    started = time.monotonic()
    done = asyncio.run(run_command(str(leave), b"", cwd=tmp_path, env=dict(os.environ),
                                   timeout_s=120))
    assert done.exit_code == 0 and time.monotonic() - started < 30
    deadline = time.monotonic() + 10
    child = int(pids.read_text())
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


CRASH = "import sys\nsys.stderr.write('Traceback: boom\\n')\nraise SystemExit(3)\n"


@pytest.mark.parametrize("kind", ["crash", "invalid_json", "flood", "hang"])
def test_a_failing_guard_denies_the_call_with_one_notice_and_the_turn_goes_on(
    home: Path, work: Path, tmp_path: Path, kind: str
) -> None:
    commands = {
        "crash": python_hook(tmp_path, "crash.py", CRASH),
        "invalid_json": str(script(tmp_path, "bad.sh", "#!/bin/sh\necho '{\"decision\": '\n")),
        "flood": str(script(tmp_path, "flood.sh", "#!/bin/sh\nyes '{}'\n")),
        "hang": str(script(tmp_path, "hang.sh", "#!/bin/sh\nsleep 300\n")),
    }
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", commands[kind], "Bash",
                                                 timeout=1))
    code = ("try { await tools.shell({command: 'touch made.txt'}) }\n"
            "catch (e) { console.log('refused: ' + e.message) }\n"
            "const r = await tools.read_file({path: 'notes.txt'}); return r.total_lines")
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "went on"}])
    assert run.result.ok and run.result.final_message == "went on"
    assert not (work / "made.txt").exists()  # the guard failed: the call did not run
    out = run.items("code_execution")[0]["output"]
    assert "refused: tools.shell was denied by PreToolUse hook" in out
    assert "the hook failed" in out
    failures = [n for n in run.notices() if n.startswith("hook failed")]
    assert len(failures) == 1 and "the call was denied" in failures[0]
    expected = {"crash": "exited with status 3: Traceback: boom", "invalid_json": "invalid JSON",
                "flood": "too much output", "hang": "timed out"}[kind]
    assert expected in failures[0]


def test_a_failing_post_hook_leaves_the_result_alone(
    home: Path, work: Path, tmp_path: Path
) -> None:
    write_hooks(home / "hooks.json",
                hooks_table("PostToolUse", python_hook(tmp_path, "crash.py", CRASH)))
    run = run_session(home, work, [
        {"tool_calls": [{"name": "exec", "arguments": {
            "code": "const r = await tools.shell({command: 'echo kept'}); return r.output"}}]},
        {"text": "ok"}])
    assert run.result.ok
    assert run.items("code_execution")[0]["value"].strip() == "kept"
    assert len([n for n in run.notices() if n.startswith("hook failed")]) == 1


def test_hooks_do_not_get_withheld_secrets(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("HOOK_VISIBLE", "visible-value")
    out = tmp_path / "env.txt"
    dump = script(tmp_path, "env.sh", f"#!/bin/sh\nenv > {out}\n")
    write_hooks(home / "hooks.json", hooks_table("SessionStart", str(dump)))
    run_session(home, work, [{"text": "ok"}])
    seen = out.read_text()
    assert "visible-value" in seen and f"CODEMODE_PROJECT_DIR={work}" in seen
    assert "sk-should-not-leak" not in seen and "OPENAI_API_KEY" not in seen
