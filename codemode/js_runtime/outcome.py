"""What ``CodeSession.execute``, ``wait`` and ``terminate`` return: one of three cases.

``Completed``: the program finished, with a value or an error (``result``).
``Yielded``: its yield time passed first; it runs on as ``cell_id``, and ``output``
is what it printed since the caller last heard from it.
``Terminated``: ``terminate`` stopped it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from codemode.js_runtime.models import ExecError, ExecResult


@dataclass(frozen=True, slots=True)
class Completed:
    cell_id: str
    result: ExecResult  # value or error, logs, nested calls, duration
    # The output the caller has not been given yet: all of it (``result.output``)
    # unless the cell yielded before, then what it printed since.
    output: str
    kind: Literal["completed"] = "completed"

    @property
    def ok(self) -> bool:
        return self.result.error is None

    @property
    def error(self) -> ExecError | None:
        return self.result.error


@dataclass(frozen=True, slots=True)
class Yielded:
    cell_id: str
    output: str  # printed since the caller last heard from this cell
    kind: Literal["yielded"] = "yielded"


@dataclass(frozen=True, slots=True)
class Terminated:
    cell_id: str
    output: str  # printed since the caller last heard from this cell, up to the stop
    kind: Literal["terminated"] = "terminated"


Outcome = Completed | Yielded | Terminated


class CellBusy(Exception):
    """A persistent session runs one program at a time: ``cell_id`` still runs."""

    def __init__(self, cell_id: str) -> None:
        super().__init__(f"cell {cell_id} is still running")
        self.cell_id = cell_id


class UnknownCell(LookupError):
    """No running cell has this id (it finished, was terminated, or never was)."""

    def __init__(self, cell_id: str, running: list[str]) -> None:
        super().__init__(f"no running cell {cell_id!r} (running: {', '.join(running) or 'none'})")
        self.cell_id = cell_id
        self.running = running


class AlreadyWaiting(Exception):
    """Someone is already waiting on this cell; one waiter at a time."""

    def __init__(self, cell_id: str) -> None:
        super().__init__(f"cell {cell_id} is already being waited on")
        self.cell_id = cell_id
