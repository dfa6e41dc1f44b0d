"""A terminal driven by keystrokes, for agents that type into a shell and read the
screen (Terminus): the ``terminal`` adapter behind the ``send_keys`` tool.

There is no real terminal. Keystrokes collect in a line buffer; each completed line
(Enter, or a newline in the text) runs through our ``shell`` tool, so every line meets
the same policy, approval and confinement as any other command. What the model reads
back is the screen: the prompt, the typed line and its output, the way they would have
scrolled by. The terminal remembers its working directory (``cd`` works as typed);
each line otherwise runs in a fresh non-interactive shell, so environment variables and
interactive programs (editors, REPLs, pagers) do not carry over.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pydantic import BaseModel, Field

from codemode.harnesses.spec import ToolTable
from codemode.tools.context import ToolError

# Keystrokes that are a key name rather than text, as tmux names them.
_ENTER = frozenset({"Enter", "C-m", "C-j", "KPEnter"})
_INTERRUPT = frozenset({"C-c", "^C"})
_IGNORED = frozenset(
    {"Escape", "Tab", "BTab", "Up", "Down", "Left", "Right", "Home", "End", "PageUp",
     "PageDown", "NPage", "PPage", "C-d", "C-z", "C-l", "C-a", "C-e", "C-u", "C-k", "BSpace"}
)
_CD = re.compile(r"\s*cd(?:\s+(?P<dir>[^;&|<>`$()]+?))?\s*")


class TerminalCommand(BaseModel):
    command: str = Field(description="A line that ran.")
    exit_code: int = Field(description="Its exit status.")


class TerminalResult(BaseModel):
    """What typing the keys did: the new screen content and the lines that ran."""

    screen: str = Field(
        description="What appeared on the screen, ending with the prompt and anything "
        "typed but not yet entered."
    )
    commands: list[TerminalCommand] = Field(description="The lines that ran, in order.")
    cwd: str = Field(description="The terminal's working directory now.")


def _options(t: ToolTable) -> tuple[int, float, float, int]:
    o = t.options
    return (
        int(o.get("screen_lines", 60)),
        float(o.get("min_timeout_s", 30)),
        float(o.get("max_timeout_s", 600)),
        int(o.get("max_keystrokes", 100_000)),
    )


def _prompt(cwd: str) -> str:
    return f"{cwd}$ "


async def _run_line(
    line: str, cwd: str, timeout_s: float, invoke: Any, root: str = "."
) -> tuple[str, int, str]:
    """Run one entered line: (output, exit code, working directory afterwards)."""
    cd = _CD.fullmatch(line)
    # A bare `cd` goes back to where the terminal started (the workspace), not $HOME.
    command = f"cd {cd.group('dir') or shlex.quote(root)} && pwd" if cd else line
    args = {"command": command, "workdir": cwd, "timeout_ms": int(timeout_s * 1000)}
    try:
        result = await invoke("shell", args)
    except ToolError as exc:
        return f"codemode: {exc}\n", 126, cwd
    output, code = str(result.get("output", "")), int(result.get("exit_code", 1))
    if cd:
        if code == 0 and output.strip():
            return "", 0, output.strip().splitlines()[-1]
        return output, code, cwd
    return output, code, cwd


async def terminal(
    r: dict[str, Any], t: ToolTable, invoke: Any, state: dict[str, Any]
) -> dict[str, Any]:
    """Type ``r["keystrokes"]`` into the session's terminal."""
    screen_lines, min_timeout, max_timeout, max_keys = _options(t)
    keys = str(r.get("keystrokes") or "")
    if len(keys) > max_keys:
        raise ToolError(f"{t.name}: at most {max_keys} keystrokes at a time")
    duration = r.get("duration")
    try:
        wait = float(duration) if duration is not None else 1.0
    except (TypeError, ValueError):
        raise ToolError(f"{t.name}: duration must be a number of seconds") from None
    timeout = min(max(wait, min_timeout), max_timeout)
    if "cwd" not in state:  # show where the terminal starts, as a real prompt would
        _, _, state["cwd"] = await _run_line("cd .", ".", min_timeout, invoke)
        state["root"] = state["cwd"]
    cwd: str = state["cwd"]
    root: str = state["root"]
    pending: str = state.get("pending", "")
    shown: list[str] = []
    ran: list[dict[str, Any]] = []

    key = keys.strip()
    if key in _INTERRUPT:
        shown.append(_prompt(cwd) + pending + "^C")
        pending, keys = "", ""
    elif key in _ENTER:
        keys = "\n"
    elif key in _IGNORED:
        keys = ""  # no line editing or job control here: the key does nothing
    if keys:
        text = pending + keys.replace("\r\n", "\n").replace("\r", "\n")
        *lines, pending = text.split("\n")
        for line in lines:
            if "\x03" in line:  # Ctrl-C typed inside the text: drop what came before
                shown.append(_prompt(cwd) + line.split("\x03")[0] + "^C")
                line = line.rsplit("\x03", 1)[1]
            shown.append(_prompt(cwd) + line)
            if not line.strip():
                continue
            output, code, cwd = await _run_line(line, cwd, timeout, invoke, root)
            shown.extend(output.rstrip("\n").split("\n") if output.strip() else [])
            ran.append({"command": line, "exit_code": code})
    state["cwd"], state["pending"] = cwd, pending
    shown.append(_prompt(cwd) + pending)
    width = int(t.options.get("line_chars", 2000))  # a terminal wraps; we cut, and say so
    shown = [line if len(line) <= width else line[:width] + " [...line cut]" for line in shown]
    if len(shown) > screen_lines:
        cut = len(shown) - screen_lines
        shown = [f"[{cut} earlier lines scrolled off]", *shown[cut:]]
    return {"screen": "\n".join(shown), "commands": ran, "cwd": cwd}
