"""The sign of life at the bottom of the terminal while a turn runs.

A spinner, what the turn waits for (the model, a command, a program), how long it has
been waiting, and how to interrupt; under a running command, its latest output lines
as they arrive. It is one transient live region: lines printed meanwhile appear above
it, and it disappears when the turn ends or something else needs the screen (a
streaming answer, an approval question).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

if TYPE_CHECKING:
    from codemode.agent.events import Item

_TAIL_LINES = 5  # latest lines of a running command shown live
_KEEP_CHARS = 8_000  # output kept per command for that tail
HINT = "Esc or Ctrl-C interrupts"


class _Task:
    """One thing the turn waits for."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        self.output = ""


class Activity:
    """What the turn is waiting for, drawn as a live region on a terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.model = "the model"
        self._tasks: dict[str, _Task] = {}  # item id -> what it does, in start order
        self._waiting: _Task | None = None  # the model request, while no item runs
        # Items also run outside a turn (the SessionEnd hook of /new): only a turn
        # waits for the model once they are done.
        self._in_turn = False
        self._live: Live | None = None
        self._held = False  # paused by someone who needs the screen (a question)
        self._spinner = Spinner("dots", style="cyan")

    # --- what the turn is doing ------------------------------------------------------

    def begin_turn(self) -> None:
        self._in_turn = True
        self._tasks.clear()
        self._waiting = _Task(f"waiting for {self.model}")
        self.show()

    def end_turn(self) -> None:
        self._in_turn = False
        self._tasks.clear()
        self._waiting = None
        self.hide()

    def started(self, item_id: str, label: str) -> None:
        self._tasks[item_id] = _Task(label)

    def finished(self, item_id: str) -> None:
        if self._tasks.pop(item_id, None) is None or self._tasks:
            return
        if self._in_turn:
            self._waiting = _Task(f"waiting for {self.model}")  # the next request
        else:
            self.hide()  # nothing runs any more: the input line comes back

    def output(self, item_id: str, text: str) -> None:
        task = self._tasks.get(item_id)
        if task is not None:  # drawn at the next refresh (8 a second), not per chunk
            task.output = (task.output + text)[-_KEEP_CHARS:]

    @property
    def running(self) -> bool:
        return self._waiting is not None or bool(self._tasks)

    # --- the live region -------------------------------------------------------------

    def show(self) -> None:
        """Draw it, if a turn runs, nobody holds the screen and it is a terminal."""
        if self._live is not None or self._held or not self.running:
            return
        if not self.console.is_terminal:
            return
        self._live = Live(
            self,
            console=self.console,
            refresh_per_second=8,
            transient=True,
            vertical_overflow="crop",
        )
        try:
            self._live.start()
        except Exception:  # another live region is up: stay quiet rather than fail
            self._live = None

    def hide(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def hold(self) -> None:
        """Off the screen until ``release`` (a question is being asked)."""
        self._held = True
        self.hide()

    def release(self) -> None:
        self._held = False
        self.show()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        tasks = list(self._tasks.values())  # the live region redraws from its own thread
        task = tasks[-1] if tasks else self._waiting
        if task is None:
            return
        width = max(20, options.max_width - 4)
        parts: list[RenderableType] = []
        if task.output:
            lines = [line.rsplit("\r", 1)[-1] for line in task.output.splitlines()]
            for line in [x for x in lines if x.strip()][-_TAIL_LINES:]:
                parts.append(Text(f"  │ {line[:width]}", style="dim"))
        seconds = time.monotonic() - task.started
        status = Text.assemble(
            (task.label[: width - 20 - len(HINT)], "bold"), (f" · {seconds:.1f}s · {HINT}", "dim")
        )
        self._spinner.text = status
        parts.append(self._spinner)
        yield Group(*parts)


def label_for(item: Item) -> str | None:
    """What a started item makes the turn wait for, or None for items that take no time."""
    if item.type == "command_execution":
        command = " ".join(item.command.split())
        return f"running $ {command[:80]}"
    if item.type == "code_execution":
        return "running the program"
    if item.type == "tool_call":
        return f"running {item.name}"
    if item.type == "mcp_tool_call":
        return f"running {item.server}.{item.tool}"
    if item.type == "file_change":
        return "applying the patch"
    if item.type == "hook_run":
        return item.status_message or f"running the {item.event} hook"
    return None
