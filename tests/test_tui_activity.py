"""Signs of life in a real pseudo-terminal: while the model is awaited a spinner line
says so with the seconds elapsed and how to interrupt; a running command shows its
latest output lines before it ends; a running program's console lines appear as they
are printed. Each test holds the command or program open until the screen showed what
it should (a file the test creates releases it), so nothing depends on timing."""

from __future__ import annotations

import re
from pathlib import Path

from agent_support import call
from test_tui import Terminal, start, terminals  # noqa: F401  (the fixture)

from codemode_testkit.scripted_server import ScriptedModelServer

# Waits for the test's go-ahead (at most 30 s, so a broken test cannot hang forever).
HOLD = "for i in $(seq 300); do [ -e go ] && break; sleep 0.1; done"


def test_waiting_for_the_model_shows_a_spinner_with_time_and_the_interrupt_key(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    with ScriptedModelServer([{"text": "slow answer", "hang_s": 2.5}]) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("hello")
        seen = term.expect("slow answer")
        term.prompt()
        assert term.finish() == 0
    shown = re.findall(r"waiting for test-model · (\d+\.\d)s · Esc or Ctrl-C interrupts", seen)
    assert shown, seen[-2000:]
    assert max(float(s) for s in shown) >= 1.0  # it counted while waiting


def test_a_running_command_shows_its_latest_output_before_it_ends(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    command = f"echo first-line; echo second-line; {HOLD}; echo last-line"
    script = [{"tool_calls": [call("shell", {"command": command})]}, {"text": "built."}]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("build it")
        term.expect("running $ echo first-line")
        before = term.expect("second-line")  # on screen while the command waits
        assert "exit 0" not in before and "last-line" not in before
        term.expect("Esc or Ctrl-C interrupts")
        (work / "go").touch()
        term.expect("last-line")
        term.expect("✓ exit 0")
        term.expect("built.")
        term.prompt()
        assert term.finish() == 0


def test_a_running_programs_console_and_calls_show_as_they_happen(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    program = (
        "console.log('tick-one');\n"
        f"await tools.shell({{command: {HOLD!r}}});\n"
        "console.log('tick-two');\n"
    )
    script = [{"tool_calls": [call("exec", {"code": program})]}, {"text": "ran."}]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, "--code-mode", home=home, cwd=work)
        term.prompt()
        term.send_line("run it")
        term.expect("│ tick-one")  # printed while the program still runs
        term.expect("running $ for i in")  # its nested command, live
        (work / "go").touch()
        term.expect("tick-two")
        term.expect("ran.")
        term.prompt()
        assert term.finish() == 0
