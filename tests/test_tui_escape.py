"""Esc in the interactive session, driven in a real pseudo-terminal against the scripted
model server: while a turn runs it interrupts the running command, program or model
stream as Ctrl-C does (what was printed stays, the next turn works); an escape
sequence (an arrow key) is not an Esc; text typed during a turn starts the next input
line; at the prompt Esc leaves the line being typed alone. Plus the byte parsing of
``KeyWatcher`` on its own."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from agent_support import call
from test_tui import WAIT, Terminal, _alive, sent_text, start, terminals  # noqa: F401

from codemode.tui.keys import ESCAPE_DELAY_S, KeyWatcher
from codemode_testkit.scripted_server import ScriptedModelServer

ESC = "\x1b"
# What an interrupted turn may take at most: a third of the 30 s the command sleeps,
# so that a turn that ran to its end (or to a timeout) cannot pass.
BOUND_S = 10.0


def _wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + WAIT
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)
    return path.read_text().strip()


def test_esc_stops_a_running_command_and_a_model_stream_and_the_session_goes_on(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    command = "echo $$ > pid.txt; echo before-sleep; sleep 30; echo LATE_$((1+1))"
    long_answer = " ".join(f"w{n}" for n in range(400))
    script = [
        {"tool_calls": [call("shell", {"command": command})]},
        {"text": "still here"},
        {"text": long_answer, "chunk_delay_s": 0.1},  # ~40 s if nothing stops it
        {"text": "and again"},
    ]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("sleep a while")
        term.expect("$ echo $$ > pid.txt")
        pid = int(_wait_for_file(work / "pid.txt"))
        term.expect("before-sleep")
        term.child.send("\x1b[A")  # an arrow key during the turn: not an Esc
        time.sleep(0.5)
        assert _alive(pid), "an arrow key interrupted the turn"
        started = time.monotonic()
        term.child.send(ESC)
        term.expect("interrupted")
        elapsed = time.monotonic() - started
        term.prompt()
        deadline = time.monotonic() + WAIT
        while _alive(pid):
            assert time.monotonic() < deadline, "the interrupted command's shell lives on"
            time.sleep(0.05)
        assert elapsed < BOUND_S, f"Esc took {elapsed:.1f}s to interrupt"
        term.send_line("are you there?")
        term.expect("still here")
        term.prompt()

        term.send_line("talk a lot")
        term.expect("w5")  # the answer is streaming
        started = time.monotonic()
        term.child.send("half typed")  # kept for the next input line
        term.child.send(ESC)
        term.expect("interrupted")
        assert time.monotonic() - started < BOUND_S
        term.prompt()
        term.send_line(" next")  # the line already holds "half typed"
        term.expect("and again")
        term.prompt()
        assert term.finish() == 0
    # The interrupted call was answered, so the next request was well formed.
    answer = server.requests[1].body["messages"][-2]
    assert answer["role"] == "tool" and answer["content"].startswith("interrupted")
    assert "LATE_2" not in sent_text(server, 1)
    assert server.requests[3].body["messages"][-1]["content"] == "half typed next"


def test_esc_stops_a_program_spinning_in_javascript(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    spin = "console.log('spinning'); while (true) {}"
    script = [{"tool_calls": [call("exec", {"code": spin})]}, {"text": "back again"}]
    with ScriptedModelServer(script) as server:
        term = start(
            terminals, server, "--code-mode", "-c", "exec_timeout_s=600", home=home, cwd=work
        )
        term.prompt()
        term.send_line("spin")
        term.expect("spinning")
        started = time.monotonic()
        term.child.send(ESC)
        term.expect("interrupted")
        assert time.monotonic() - started < BOUND_S
        term.prompt()
        term.send_line("still there?")
        term.expect("back again")
        term.prompt()
        assert term.finish() == 0


def test_an_approval_in_the_turn_gets_its_keys_and_esc_works_after_it(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    rules = home / "rules"
    rules.mkdir()
    (rules / "team.rules").write_text(
        'prefix_rule(pattern=["touch"], decision="prompt")\n', encoding="utf-8"
    )
    command = "echo $$ > pid.txt; sleep 30"
    script = [
        {"tool_calls": [call("shell", {"command": "touch asked.txt"})]},
        {"tool_calls": [call("shell", {"command": command})]},
        {"text": "after"},
    ]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("touch then sleep")
        term.expect("[y] approve once")
        term.child.send("y")  # read by the question, not kept as typed-ahead text
        term.expect("→ approve once")
        pid = int(_wait_for_file(work / "pid.txt"))
        started = time.monotonic()
        term.child.send(ESC)  # the turn has the keyboard again
        term.expect("interrupted")
        assert time.monotonic() - started < BOUND_S
        term.prompt()
        deadline = time.monotonic() + WAIT
        while _alive(pid):
            assert time.monotonic() < deadline, "the interrupted command's shell lives on"
            time.sleep(0.05)
        term.send_line("x")
        term.expect("after")
        term.prompt()
        assert term.finish() == 0
    assert (work / "asked.txt").exists()
    assert server.requests[2].body["messages"][-1]["content"] == "x"  # no stray "y"


def test_esc_at_the_prompt_keeps_the_line(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    with ScriptedModelServer([{"text": "got it"}]) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.child.send("keep")
        term.child.send(ESC)
        # prompt-toolkit waits 0.5 s to tell a lone Esc from Alt+key; wait past it so
        # the next key is not read as Alt+key.
        time.sleep(2)
        term.send_line(" this")
        term.expect("got it")
        term.prompt()
        assert term.finish() == 0
    assert server.requests[0].body["messages"][-1]["content"] == "keep this"


# --- the parsing on its own ------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "escapes", "typed"),
    [
        ([b"\x1b"], 1, ""),  # a lone Esc, after the delay
        ([b"ab\x1bcd"], 0, "abd"),  # Alt+c is not text
        ([b"\x1b[A\x1b[1;5C\x1bOP"], 0, ""),  # arrows, Ctrl-Right, F1
        ([b"\x1b[", b"B"], 0, ""),  # a sequence split over two reads
        ([b"\x1b", b"[B"], 0, ""),  # ... split right after its ESC
        ([b"\x1b\x1b"], 2, ""),  # Esc twice
        ([b"abc\x7f\x7fz\n"], 0, "az\n"),  # backspaces applied
        ([b"one\rtwo\n"], 0, "one\rtwo\n"),  # Enter (CR) kept apart from a newline (LF)
        ([b"x\x03\x01y"], 0, "xy"),  # control bytes dropped
        (["héllo".encode()], 0, "héllo"),
    ],
)
async def test_key_watcher_parsing(chunks: list[bytes], escapes: int, typed: str) -> None:
    seen: list[int] = []
    watcher = KeyWatcher(-1, lambda: seen.append(1))  # fed directly: no terminal read
    for chunk in chunks:
        watcher.feed(chunk)
    await asyncio.sleep(ESCAPE_DELAY_S * 6)
    assert len(seen) == escapes
    assert watcher.take_typeahead() == typed
