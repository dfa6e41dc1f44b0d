"""A Codex session on the runtime's session API, with a delegate per execution.

One runtime ``js_runtime.session.CodeSession`` per Codex session, not persistent: each
exec gets a fresh isolate (Codex's contract) in an engine worker the runtime keeps warm.
Each exec is a runtime execution with its own delegate (``execution.CodexExecution``)
and Codex's yield rule (``yield_when="request"``): the runtime hands control back only
when the yield time passes, the program ends, or the program's ``yield_control()`` (a
``HostEvent``) is passed on as ``request_yield``. Cell ids are the runtime's; waiting,
terminating and the program's wall clock across yields are the runtime's too.

What is Codex's and kept here: the ``store`` that outlives an exec; the tool catalog's
revisions (``session/catalog.py``); the bounds on what
a session holds; which cell an Execute or a Wait is observing now (Codex's
``YieldObservation`` and ``CancelWait`` end an observation early; a second observer is
refused); and telling each execution's client when its cell's end was reported.

The runtime's session is ``codemode.host``'s ``delegated_session``: one for a host whose
every tool call goes to its client. Importing it loads the runtime alone, none of the
tools, sandbox and hooks ``ToolHost`` brings (this host's nested calls go back to the
client, and Codex waits for its start: ``docs/codex-host.md``).
"""

from __future__ import annotations

import asyncio
import json
import os
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from codemode.codex_host.session.catalog import ToolCatalog
from codemode.codex_host.session.items import error_text
from codemode.codex_host.session.limits import DEFAULT_MAX_CELLS, ConnectionCells, admit_cell
from codemode.codex_host.session.model import DEFAULT_YIELD_MS, ContentItem, TextItem
from codemode.codex_host.session.store import Store
from codemode.codex_host.session.truncation import cut_items
from codemode.host.sessions import delegated_session
from codemode.js_runtime.models import Limits
from codemode.js_runtime.outcome import (
    AlreadyWaiting,
    Completed,
    Outcome,
    Terminated,
    UnknownCell,
)
from codemode.js_runtime.session import CodeSession
from codemode.js_runtime.worker_process import reap_killed
from codemode.process.package_data import read_text

if TYPE_CHECKING:
    from codemode.codex_host.session.execution import CodexExecution

_MAX_YIELD_MS = 3_600_000
# Reaps of killed workers under way (``CodexSession.close``): held until done.
_REAPING: set[asyncio.Task[None]] = set()


class Reported(NamedTuple):
    """What an outcome reports: the runtime's outcome, the items of the cell's program
    the client had not been given, and when the program ran to its end (monotonic ns;
    0 when it has not, or was stopped)."""

    outcome: Outcome
    items: list[ContentItem]
    finished_ns: int = 0

    def buffered_ns(self, asked_ns: int) -> int:
        """How long a completed result waited for the request (asked at ``asked_ns``)
        that reports it: from the program's end to the request; 0 when it ended while
        the request was there, or did not complete (yielded, terminated)."""
        if self.outcome.kind != "completed" or not self.finished_ns:
            return 0
        return max(0, asked_ns - self.finished_ns)


@cache
def globals_js() -> str:
    """The globals Codex's exec promises a program, run in each of its isolates (read
    once; a warm spare reads it before it is forked: ``launch/serve.py``)."""
    return read_text(__file__, "globals.js")


# Named tuples and plain classes, not dataclasses: see ``session/model.py``.
class _ExecTools(NamedTuple):
    """The runtime's ``ToolNames`` for one exec, with that exec's setup (one line)."""

    names: tuple[str, ...]
    setup: str

    def flat_names(self) -> list[str]:
        return list(self.names)

    def namespaces(self) -> dict[str, dict[str, str]]:
        return {}

    def program_setup(self) -> str:
        return self.setup


class CellBusy(Exception):
    """Another Execute or Wait is already observing this cell."""


class SessionLimits(NamedTuple):
    engine: str = "quickjs"
    timeout_s: float = 3600.0  # a cell's whole life, across yields and waits
    memory_mb: int = 256
    max_tool_calls: int = 100_000
    max_yield_ms: int | None = None
    max_cells: int = DEFAULT_MAX_CELLS  # held at once: running, or ended and not yet reported


class CodexSession:
    """One client session: its runtime session, its store, the cells it holds."""

    def __init__(
        self, limits: SessionLimits | None = None, client: ConnectionCells | None = None
    ) -> None:
        self.limits = limits or SessionLimits()
        # What its connection's cells hold, across its sessions: its cells count there too.
        self.client = client or ConnectionCells()
        self.store = Store()  # what its programs keep for its later execs
        self.catalog = ToolCatalog(self.client)  # kept revisions count there too
        self.executions: dict[str, CodexExecution] = {}  # by cell id, until reported ended
        self._held: set[CodexExecution] = set()  # started, its end not yet reported
        # cell id -> ("execution", execution id) or ("wait", wait id): who observes it.
        self.observed: dict[str, tuple[str, str | None]] = {}
        # What exit() throws: a name no program can guess, so a thrown error never passes
        # for a clean exit. (os.urandom, as ``secrets`` would: importing ``secrets`` loads
        # OpenSSL's hashing, part of the host's start.)
        self._exit_name = f"CodexExit_{os.urandom(8).hex()}"
        self.closed = False
        self._session: CodeSession | None = None

    def _runtime(self) -> CodeSession:
        if self._session is None:
            self._session = delegated_session(
                limits=Limits(
                    timeout_s=self.limits.timeout_s,
                    memory_mb=self.limits.memory_mb,
                    max_tool_calls=self.limits.max_tool_calls,
                ),
                engine=self.limits.engine,
                setup_scripts=[globals_js()],
            )
        return self._session

    def check_room(self) -> None:
        """``LimitReached`` when the session already holds ``max_cells`` cells, or its
        connection its ``max_cells`` across its sessions."""
        admit_cell(len(self._held), self.limits.max_cells)
        self.client.admit()

    def yield_ms(self, requested: int | None) -> int:
        ms = DEFAULT_YIELD_MS if requested is None else requested
        if self.limits.max_yield_ms is not None:
            ms = min(ms, self.limits.max_yield_ms)
        return max(0, min(ms, _MAX_YIELD_MS))

    # -- exec -------------------------------------------------------------------------------

    def start(
        self, execution: CodexExecution, source: str, yield_ms: int | None
    ) -> asyncio.Task[Outcome]:
        """Run ``source`` as a new cell with ``execution`` as its delegate; the task is
        its first outcome (``first``). Over ``max_cells``: ``LimitReached``, before
        anything starts."""
        if self.closed:
            raise RuntimeError("the session is closed")
        self.check_room()
        tools = list(execution.tools.values())
        config = {
            "store": self.store.for_program(),
            "tools": [{"name": t.global_name, "description": t.description} for t in tools],
            "exitName": self._exit_name,
        }
        names = tuple(execution.tools)
        setup = (
            # A failed call rejects with its message as a string, as in Codex's host.
            f"__cm.configure({json.dumps(names)}, {self.limits.max_tool_calls}, {{}}, "
            "{plainRejections: true}); "
            f"globalThis.__codex = JSON.parse({json.dumps(json.dumps(config))});"
        )
        # What can fail on a request's values fails before the cell is held.
        program = self._runtime().execute(
            source,
            _ExecTools(names, setup),
            self.yield_ms(yield_ms) / 1000,
            delegate=execution,
            yield_when="request",
        )
        self._held.add(execution)
        self.client.cells += 1
        task = asyncio.ensure_future(program)
        task.add_done_callback(lambda done: self._abandoned(execution, done))
        return task

    def _abandoned(self, execution: CodexExecution, task: asyncio.Task[Outcome]) -> None:
        """The request that started the cell went before its first outcome (its client
        reset the stream, its ``grpc-timeout`` passed, the connection ended): the runtime
        stopped the program, and the cell no longer counts against ``max_cells``, else a
        session would be refused every later exec after ``max_cells`` such requests."""
        if task.cancelled() or task.exception() is not None:
            self._retire(execution)

    async def opened(self, execution: CodexExecution, task: asyncio.Task[Outcome]) -> None:
        """Until the execution's cell has its id (or its start failed: ``first`` says)."""
        if execution.started.is_set() or task.done():
            return
        started = asyncio.ensure_future(execution.started.wait())
        try:
            await asyncio.wait([task, started], return_when=asyncio.FIRST_COMPLETED)
        finally:
            started.cancel()

    def started(self, execution: CodexExecution) -> None:
        """The runtime started the execution's cell (its id is known now)."""
        self.executions[execution.cell_id] = execution
        self.observed[execution.cell_id] = ("execution", execution.execution_id)

    async def first(self, execution: CodexExecution, task: asyncio.Task[Outcome]) -> Reported:
        """The cell's first outcome: it ended, yielded, or was terminated or closed."""
        try:
            outcome: Outcome = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():  # the caller went: the program stops with it
                task.cancel()
                raise
            outcome = Terminated(execution.cell_id, "")  # closed or terminated meanwhile
        except RuntimeError:  # the session closed before the cell started
            outcome = Terminated(execution.cell_id, "")
        finally:
            if self.observed.get(execution.cell_id, ("",))[0] == "execution":
                del self.observed[execution.cell_id]
        return self._reported(execution, outcome)

    async def wait(
        self, cell_id: str, yield_ms: int | None, wait_id: str | None = None
    ) -> Reported | None:
        """None when no such cell is held (never started, or its end already reported)."""
        execution = self.executions.get(cell_id)
        if execution is None or self._session is None:
            return None
        if cell_id in self.observed:
            raise CellBusy(f"cell {cell_id} is already being observed")
        self.observed[cell_id] = ("wait", wait_id)
        try:
            outcome = await self._session.wait(cell_id, self.yield_ms(yield_ms) / 1000)
        except UnknownCell:
            return None
        except AlreadyWaiting as exc:
            raise CellBusy(str(exc)) from None
        finally:
            self.observed.pop(cell_id, None)
        return self._reported(execution, outcome)

    def request_yield(self, cell_id: str) -> None:
        """The program called ``yield_control()``."""
        if self._session is not None:
            self._session.request_yield(cell_id)

    def end_observation(
        self, *, execution_id: str | None = None, wait_id: str | None = None
    ) -> bool:
        """YieldObservation: the Execute or Wait in progress returns now (the cell runs on)."""
        for cell_id, (kind, ident) in self.observed.items():
            if (kind == "execution" and execution_id is not None and ident == execution_id) or (
                kind == "wait" and wait_id is not None and ident == wait_id
            ):
                self.request_yield(cell_id)
                return True
        return False

    async def terminate(self, cell_id: str) -> Reported | None:
        execution = self.executions.get(cell_id)
        if execution is None or self._session is None:
            return None
        try:
            outcome = await self._session.terminate(cell_id)
        except UnknownCell:
            return None
        if cell_id in self.observed:
            # The Execute or Wait observing it reports the end, with the items.
            return Reported(outcome, [])
        return self._reported(execution, outcome)

    def error_text(self, outcome: Completed) -> str | None:
        """A completed program's error as Codex shows it; None for none, or exit()."""
        error = outcome.result.error
        if error is None or error.name == self._exit_name:
            return None
        return error_text(error)

    async def close(self) -> None:
        self.closed = True
        self.catalog.clear()
        if self._session is not None:
            await self._session.close()  # every cell stopped, awaited
            # Its workers were killed: reaped soon, so a client that went leaves not even
            # a zombie behind (else the next worker's start reaps them). Not awaited: a
            # CloseSession (Codex waits for it at a turn's end) is answered once the
            # workers are killed, not once the kernel has seen them go (10 ms and more).
            reaping = asyncio.ensure_future(reap_killed())
            _REAPING.add(reaping)
            reaping.add_done_callback(_REAPING.discard)
        for execution in list(self._held):
            self._retire(execution)

    # -- plumbing ---------------------------------------------------------------------------

    def _reported(self, execution: CodexExecution, outcome: Outcome) -> Reported:
        if execution.cut_to is not None and outcome.kind == "completed":
            # A host that truncates reports the error among the items, bounded and cut
            # with them (as Codex's does; the client then shows the items alone).
            error = self.error_text(outcome)
            if error is not None:
                execution.add_item(TextItem(f"Script error:\n{error}"))
        items = execution.take_items()
        if outcome.kind != "yielded":
            self._retire(execution)
        if execution.cut_to is not None:
            items = cut_items(items, execution.cut_to)
        return Reported(outcome, items, execution.finished_ns)

    def _retire(self, execution: CodexExecution) -> None:
        if execution not in self._held:
            return
        self._held.discard(execution)
        self.client.cells -= 1
        execution.let_go()  # what it keeps for the client now goes (or went with a report)
        if self.executions.get(execution.cell_id) is execution:
            del self.executions[execution.cell_id]
        if execution.cell_id:
            execution.closed()
