"""``Bridge``: programs run to completion against a dispatch callable, no cells.

The older face of the runtime, kept for the callers that have not moved to
``CodeSession`` yet (``codemode/host.py``, ``codemode/mcp/server.py``); new code opens
a ``CodeSession`` (``session.py``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from codemode.js_runtime.delegate import NestedCall, ToolNames
from codemode.js_runtime.execution import EventSink, Execution
from codemode.js_runtime.isolates import Isolates, memory_bytes
from codemode.js_runtime.models import ExecResult, Limits
from codemode.js_runtime.source import prepare

Dispatch = Callable[[str, object], Awaitable[Any]]

__all__ = ["Bridge", "Dispatch", "EventSink"]


class Bridge:
    """Runs programs, each in an engine worker process, calling ``dispatch(name, args)``
    for every tool call they make; ``catalog`` names the tools programs see.

    Not persistent (the default): every program gets a fresh isolate, and programs run
    at once run in workers of their own. Persistent: globals survive from one program
    to the next, programs run one after another.
    """

    def __init__(
        self,
        dispatch: Dispatch,
        catalog: ToolNames,
        *,
        engine: str = "quickjs",
        limits: Limits | None = None,
        persistent: bool = False,
        globals: dict[str, Any] | None = None,
        setup_scripts: list[str] | None = None,
    ) -> None:
        self.dispatch = dispatch
        self.catalog = catalog
        self.limits = limits or Limits()
        self._isolates = Isolates(
            engine,
            persistent=persistent,
            globals=globals,
            setup_scripts=setup_scripts,
            prestart_memory=memory_bytes(self.limits),
        )
        self._serial: asyncio.Lock | None = None
        self._ids = itertools.count(1)

    @property
    def engine_name(self) -> str:
        return self._isolates.engine

    @property
    def persistent(self) -> bool:
        return self._isolates.persistent

    async def execute(
        self,
        source: str,
        *,
        on_event: EventSink | None = None,
        limits: Limits | None = None,
        dispatch: Dispatch | None = None,
    ) -> ExecResult:
        """Run one program to completion, a limit, or cancellation; its tool calls go to
        ``dispatch`` when given (one that knows which program calls), else the bridge's."""
        chosen = dispatch or self.dispatch

        async def call_tool(call: NestedCall) -> object:
            return await chosen(call.name, call.args)

        run = Execution(
            self._isolates,
            prepare(source),
            limits or self.limits,
            self.catalog,
            str(next(self._ids)),
            call_tool,
            on_event,
        )
        if not self.persistent:
            return await run.run()
        if self._serial is None:
            self._serial = asyncio.Lock()
        async with self._serial:  # one program at a time on the persistent isolate
            return await run.run()

    def close(self) -> None:
        """Kill the bridge's workers (a persistent one holds the isolate)."""
        self._isolates.close()
