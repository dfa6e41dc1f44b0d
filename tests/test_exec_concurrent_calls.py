"""The `interpreter exec` progress text says what happened to each of a program's
concurrent calls: when one call in a Promise.all fails, a sibling command still running
is cancelled (and its process stopped) and says so, not "interrupted"/"exit None"; one
that had finished shows its own exit code, under its own command line."""

from __future__ import annotations

import json
import time
from pathlib import Path

from agent_support import provider_flags, run_cli

from codemode_testkit.scripted_server import ScriptedModelServer


def _exec(program: str, home: Path, work: Path, *extra: str) -> tuple[str, float]:
    script = [{"tool_calls": [{"name": "exec", "arguments": {"code": program}}]},
              {"text": "done"}]
    t0 = time.monotonic()
    with ScriptedModelServer(script) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "--code-mode",
                       *extra, "go"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    return (run.stdout if extra else run.stderr), time.monotonic() - t0


def test_a_sibling_cancelled_by_a_failed_call_says_cancelled(home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    program = (
        "await Promise.all([\n"
        "  tools.shell({command: 'sleep 30; touch late.txt'}),\n"
        "  tools.read_file({path: 'missing.txt'}),\n"
        "]);"
    )
    shown, took = _exec(program, home, work)
    assert took < 25, shown  # the sleep did not run out
    lines = [line.strip() for line in shown.splitlines()]
    assert "interrupted" not in lines and "exit None" not in lines, shown
    at = lines.index("cancelled: the program ended before this call finished")
    assert lines[at - 1] == "$ sleep 30; touch late.txt", shown  # names its command
    assert not (work / "late.txt").exists()

    events, _ = _exec(program, home, work, "--json")
    items = [json.loads(line)["item"] for line in events.splitlines()
             if json.loads(line)["type"] == "item.completed"]
    command = next(i for i in items if i["type"] == "command_execution")
    assert command["status"] == "failed" and "exit_code" not in command
    assert command["aggregated_output"].startswith("cancelled")


def test_a_sibling_that_finished_shows_its_exit_code(home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    program = (
        "await Promise.all([\n"
        "  tools.shell({command: 'echo quick; exit 3'}),\n"
        "  (async () => { await tools.shell({command: 'sleep 2'});"
        " await tools.read_file({path: 'missing.txt'}) })(),\n"
        "]);"
    )
    shown, _ = _exec(program, home, work)
    lines = [line.strip() for line in shown.splitlines()]
    assert "cancelled" not in shown and "exit None" not in lines, shown
    at = lines.index("exit 3")
    assert lines[at - 2 : at] == ["$ echo quick; exit 3", "quick"], shown
    assert lines[lines.index("exit 0") - 1] == "$ sleep 2", shown
