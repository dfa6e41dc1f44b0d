"""The seam between an engine worker (``worker.py``) and a JavaScript engine.

An engine only evaluates scripts, inside its worker process: the bridge
(``bridge.py``, in the agent's process) owns everything else — the prelude, tool
dispatch, limits and error reporting — so a backend is a page of code and both
backends behave the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol


class EngineTimeout(Exception):
    """The wall-clock budget ran out while JavaScript was running."""


class EngineOutOfMemory(Exception):
    """The isolate reached its memory cap."""


class ScriptError(Exception):
    """An exception escaped a script: a syntax error, or a throw outside any Promise.

    ``text`` is the engine's own rendering (message plus stack) for the bridge to parse.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Engine(Protocol):
    """One isolate. Used from the worker's main thread only."""

    name: ClassVar[str]
    # Where console output goes that the engine can report while a step still runs
    # (V8: see "live console" in prelude.js); the rest comes back in the drained state.
    # Set by the bridge for each program; while it is None, that output comes back in
    # the drained state like the rest, at the end of the step.
    on_log: Callable[[str, str], None] | None

    async def step(self, script: str, timeout: float) -> str:
        """Run ``script``, let every queued Promise job run, then return ``__cm.drain()``.

        ``timeout`` is advisory: the parent measures the wall clock and kills the worker
        when it runs out. Raises EngineOutOfMemory at the memory cap, ScriptError when
        the script itself throws; after EngineOutOfMemory the engine is not used again.
        """
        ...

    async def settle(self, results_json: str, timeout: float) -> str:
        """Pass finished tool calls (a JSON array of ``[id, ok, payload]``) to
        ``__cm.settle``, then as ``step``: run jobs, return the drained state."""
        ...

    def close(self) -> None:
        """Free the isolate; stops any JavaScript still running in it."""
        ...


ENGINES = ("quickjs", "v8")
