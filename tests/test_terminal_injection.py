"""Escape sequences in what codemode shows (command output, file names, the model's own
text) reach the terminal as visible text, never as sequences it obeys: no clipboard
write (OSC 52), no screen clear, no cursor move, no title change."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from agent_support import provider_flags, run_cli
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.text import Text

from codemode.terminal.control_chars import safe_console, visible
from codemode_testkit.scripted_server import ScriptedModelServer

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x1b\\"  # OSC 52: put "rm -rf ~" on the clipboard
CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
TITLE = "\x1b]0;owned\x07"
C1_CSI = "\x9b2J"  # the one-byte CSI some terminals obey
HOSTILE = f"before{CLIPBOARD}{CLEAR}{TITLE}{C1_CSI}\rafter\x7f"


def _no_sequences(shown: str) -> None:
    for raw in (CLIPBOARD, "\x1b]52", "\x1b[2J", "\x1b]0;", "\x9b", "\r", "\x7f", "\x07"):
        assert raw not in shown, (raw, shown)


def test_visible_shows_every_control_and_keeps_text() -> None:
    assert visible("a\x1b[31mb\tc\nd") == "a^[[31mb\tc\nd"
    assert visible("\x00\x07\x7f\x9b") == "^@^G^?\\x9b"
    assert visible("line\r\n") == "line\n"  # CRLF output reads as lines
    assert visible("héllo 中文 🙂") == "héllo 中文 🙂"
    _no_sequences(visible(HOSTILE))


@pytest.mark.parametrize(
    "renderable",
    [Text(HOSTILE), Text(HOSTILE, style="bold red"), Markdown(f"# t\n\n{HOSTILE}\n"),
     Syntax(f"x = '{HOSTILE}'", "python")],
    ids=["text", "styled", "markdown", "syntax"],
)
def test_the_console_shows_sequences_in_content_but_keeps_its_own_styles(
    renderable: object,
) -> None:
    out = io.StringIO()
    console = safe_console(file=out, force_terminal=True, color_system="truecolor")
    console.print(renderable)
    shown = out.getvalue()
    _no_sequences(shown)
    assert "before" in shown and "after" in shown and "^[" in shown
    if not isinstance(renderable, Text) or renderable.style:
        assert "\x1b[" in shown  # rich's own colour sequences still there


def test_exec_progress_shows_hostile_output_and_keeps_the_answer_raw_for_a_pipe(
    home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "evil.txt").write_text(HOSTILE + "\n")
    script = [
        {"tool_calls": [{"name": "exec", "arguments": {
            "code": "const r = await tools.shell({command: 'cat evil.txt'});\n"
                    "console.log(r.output);"}}]},
        {"text": f"answer {CLEAR}done"},
    ]  # fmt: skip
    with ScriptedModelServer(script) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "--code-mode",
                       "--full-auto", "go"], home=home, cwd=work)  # fmt: skip
    assert run.code == 0, run.stderr
    _no_sequences(run.stderr)  # the progress: command output and console lines
    assert "before^[]52;c;" in run.stderr and "after" in run.stderr
    # stdout is a pipe here: the answer is the command's result, as the model wrote it
    assert run.stdout.strip() == f"answer {CLEAR}done"

    with ScriptedModelServer(script) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "--code-mode",
                       "--full-auto", "--json", "go"], home=home, cwd=work)  # fmt: skip
    assert run.code == 0, run.stderr
    for line in run.stdout.splitlines():
        assert "\x1b" not in line  # JSON escapes it (\u001b), so the event keeps it
        json.loads(line)
