"""Programs that outlive their yield time: cells the caller comes back to.

A program runs as a cell: an asyncio task around one execution. ``CodeSession``
waits for it up to the yield time; if it still runs then, the caller gets the output
so far and the cell id, and the program goes on. ``wait`` returns as soon as the
program finishes or prints something new (never an unchanged "still running" unless
the yield time passes with nothing new); ``terminate`` stops it. The program's own
wall-clock limit holds across yields: no wait extends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re

from codemode.js_runtime.models import ExecResult
from codemode.tool_terms.elide import marker

DEFAULT_YIELD_MS = 20_000
_PRAGMA = re.compile(r"^\s*//\s*@exec:\s*(\{.*\})\s*$")
_MAX_YIELD_MS = 3_600_000


def pragma(code: str) -> dict[str, object]:
    """The program's first-line ``// @exec: {...}`` options (empty when none)."""
    first = code.lstrip("\n").split("\n", 1)[0]
    m = _PRAGMA.match(first)
    if m:
        try:
            options = json.loads(m.group(1))
        except ValueError:
            return {}
        if isinstance(options, dict):
            return options
    return {}


def yield_time_ms(code: str, default: int) -> int:
    """The program's first-line ``// @exec: {"yield_time_ms": N}``, else ``default``."""
    value = pragma(code).get("yield_time_ms")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return int(min(value, _MAX_YIELD_MS))
    return default


class Cell:
    """One running (or finished) program and the output its caller has not seen yet.

    (A plain class, not a dataclass: see ``source.Program``.)"""

    def __init__(self, id: str, task: asyncio.Task[ExecResult], cap: int) -> None:
        self.id = id
        self.task = task
        self.cap = cap  # characters of unseen output kept (the oldest go first)
        self.unseen: list[str] = []
        self.unseen_chars = 0
        self.dropped = 0
        self.changed = asyncio.Event()
        self.yielded = False  # the caller has been handed part of its output already
        self.waiting = False  # someone waits on it now

    def add(self, text: str) -> None:
        self.unseen.append(text)
        self.unseen_chars += len(text)
        while self.unseen_chars > self.cap and len(self.unseen) > 1:
            gone = self.unseen.pop(0)
            self.unseen_chars -= len(gone)
            self.dropped += len(gone)
        self.changed.set()

    def take_output(self) -> str:
        lines = list(self.unseen)
        if self.dropped:
            lines.insert(0, marker(self.dropped, "output"))
        self.unseen.clear()
        self.unseen_chars = self.dropped = 0
        self.changed.clear()
        return "\n".join(lines)

    async def wait(self, yield_s: float | None) -> bool:
        """Until it finishes, prints something new, or ``yield_s`` passes (None: until
        it finishes); True if done."""
        if yield_s is None:
            await asyncio.wait([self.task])
            return True
        if not self.task.done() and not self.unseen:
            changed = asyncio.ensure_future(self.changed.wait())
            try:
                await asyncio.wait(
                    [self.task, changed], timeout=yield_s, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                changed.cancel()
        return self.task.done()

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
