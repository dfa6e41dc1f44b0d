"""Text typed while ``/new`` replaces the session, driven in a real pseudo-terminal
against the scripted model server. The old session's SessionEnd hook makes ``/new``
take a while (as MCP servers starting or a big workspace's snapshot do), so what is
typed lands while the command runs: a line sent with Enter then runs as the first turn
of the new session, and nothing of the command (its hook's activity line) stays on
the screen over the input line."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pexpect
import pytest
from rich.console import Console
from test_tui import ANSI, Terminal, start, terminals  # noqa: F401

from codemode.tui.activity import Activity
from codemode_testkit.scripted_server import ScriptedModelServer

HOOK_S = 1.5  # how long the SessionEnd hook, and so /new, takes


def _slow_session_end(home: Path) -> None:
    hook = {"type": "command", "command": f"sleep {HOOK_S}"}
    (home / "hooks.json").write_text(json.dumps({"hooks": {"SessionEnd": [{"hooks": [hook]}]}}))


def _first_turn(term: Terminal) -> None:
    term.prompt()
    term.send_line("hello")  # SessionEnd fires only for a session that had a prompt
    term.expect("first reply")
    term.prompt()


# gap 0: typed with /new itself; 0.5 s: while its hook runs (the keyboard watcher has it)
@pytest.mark.parametrize("gap_s", [0.0, 0.5])
def test_a_line_typed_during_new_runs_as_the_next_turn(
    home: Path, work: Path, terminals: list[Terminal], gap_s: float  # noqa: F811
) -> None:
    _slow_session_end(home)
    with ScriptedModelServer([{"text": "first reply"}, {"text": "fresh reply"}]) as server:
        term = start(terminals, server, home=home, cwd=work)
        _first_turn(term)
        term.child.send("/new\r")
        time.sleep(gap_s)
        term.child.send("after new\r")
        term.expect("test-model via")  # the new session
        term.expect("after new")  # shown on its input line as it is sent
        term.expect("fresh reply")
        term.prompt()
        term.child.send("/new\r")
        time.sleep(gap_s)
        term.child.send("half")  # typed without Enter during /new: kept, not sent
        term.expect("test-model via")
        term.expect("half")  # on the input line, waiting for Enter
        time.sleep(1)
        assert len(server.requests) == 2
        term.child.sendcontrol("u")  # (prompt-toolkit: clear the line before Ctrl-D)
        assert term.finish() == 0
    assert len(server.requests) == 2
    assert server.requests[1].body["messages"][-1]["content"] == "after new"
    assert all("hello" not in json.dumps(m) for m in server.requests[1].body["messages"])


def test_no_activity_line_stays_after_a_command_that_ran_a_hook(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    _slow_session_end(home)
    with ScriptedModelServer([{"text": "first reply"}]) as server:
        term = start(terminals, server, home=home, cwd=work)
        _first_turn(term)
        term.send_line("/new")
        term.expect("running the SessionEnd hook")  # its activity line, while it runs
        term.expect("test-model via")
        term.prompt()
        # The live region redraws 8 times a second while it is up: 2 s would show it.
        shown = ""
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                shown += term.child.read_nonblocking(65536, timeout=0.2)
            except pexpect.TIMEOUT:
                continue
        assert "waiting for" not in ANSI.sub("", shown), ANSI.sub("", shown)
        assert term.finish() == 0


def test_an_item_outside_a_turn_ends_its_activity_line() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    activity = Activity(console)
    activity.started("hook-1", "running the SessionEnd hook")
    activity.show()
    assert activity.running
    activity.finished("hook-1")
    assert not activity.running  # not "waiting for the model": no turn runs
    assert activity._live is None
    activity.begin_turn()
    activity.started("cmd-1", "running $ ls")
    activity.finished("cmd-1")
    assert activity.running  # in a turn, the next model request is waited for
    activity.end_turn()
    assert not activity.running


def test_what_is_typed_during_a_command_or_a_turn() -> None:
    from codemode.tui.input import TerminalReader

    reader = TerminalReader.__new__(TerminalReader)  # the bookkeeping alone: no terminal
    reader._typeahead, reader._sent = "", []
    reader._keep("one\rtwo\n\rthree", submit=True)  # a newline ends a line as Enter does
    assert (reader._sent, reader._typeahead) == (["one", "two"], "three")
    reader._typeahead, reader._sent = "", []
    reader._keep("one\rtwo", submit=False)  # during a turn: shown, never sent
    assert (reader._sent, reader._typeahead) == ([], "one\ntwo")
