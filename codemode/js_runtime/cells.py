"""Programs that outlive their yield time: cells the caller comes back to.

A program runs as a cell: an asyncio task around one execution. ``CodeSession``
waits for it up to the yield time; if it still runs then, the caller gets the output
so far and the cell id, and the program goes on. By the cell's yield rule
(``YieldWhen``), ``wait`` returns as soon as the program finishes or prints something
new (``"output"``: never an unchanged "still running" unless the yield time passes with
nothing new), or only when it finishes, its host passes on the program's request to
yield, or the yield time passes (``"request"``, Codex's rule). ``terminate`` stops it.
The program's own wall-clock limit holds across yields: no wait extends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Literal

from codemode.js_runtime.models import ExecResult
from codemode.tool_terms.elide import marker

# When a waiter gets control back before the program ends (besides its yield time).
YieldWhen = Literal["output", "request"]

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

    def __init__(
        self,
        id: str,
        task: asyncio.Task[ExecResult],
        cap: int,
        yield_when: YieldWhen = "output",
    ) -> None:
        if yield_when not in ("output", "request"):
            raise ValueError(f"yield_when={yield_when!r}: 'output' or 'request'")
        self.id = id
        self.task = task
        self.yield_when = yield_when
        self.asked = asyncio.Event()  # the program asked to yield ("request")
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
        self.asked.clear()  # a request to yield is answered by handing this output back
        return "\n".join(lines)

    def request_yield(self) -> None:
        self.asked.set()

    async def first(self, yield_s: float | None) -> None:
        """The execution's first wait: until it finishes, ``yield_s`` passes, or (rule
        ``"request"``) the program asks to yield. Output alone never ends it."""
        await self._until(yield_s, self.asked if self.yield_when == "request" else None)

    async def wait(self, yield_s: float | None) -> bool:
        """Until it finishes, ``yield_s`` passes, or by its rule it prints something new
        (``"output"``) or asks to yield (``"request"``); True if done. None: until it
        finishes."""
        if self.yield_when == "output":
            if yield_s is None:
                await asyncio.wait([self.task])
                return True
            if not self.unseen:
                await self._until(yield_s, self.changed)
        else:
            await self._until(yield_s, self.asked)
        return self.task.done()

    async def _until(self, yield_s: float | None, event: asyncio.Event | None) -> None:
        if self.task.done() or (event is not None and event.is_set()):
            return
        if event is None:
            await asyncio.wait([self.task], timeout=yield_s)
            return
        woken = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait(
                [self.task, woken], timeout=yield_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            woken.cancel()

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
