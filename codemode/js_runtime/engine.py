"""The seam between the bridge and a JavaScript engine.

An engine only evaluates scripts: the bridge (``bridge.py``) owns everything else —
the prelude, tool dispatch, limits and error reporting — so a backend is a page of
code and both backends behave the same.
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
    """One isolate. Used from one thread only: the one whose event loop created it."""

    name: ClassVar[str]
    # Where console output goes that the engine can report while a step still runs
    # (V8: see "live console" in prelude.js); the rest comes back in the drained state.
    # Set by the bridge for each program; while it is None, that output comes back in
    # the drained state like the rest, at the end of the step.
    on_log: Callable[[str, str], None] | None

    async def step(self, script: str, timeout: float) -> str:
        """Run ``script``, let every queued Promise job run, then return ``__cm.drain()``.

        Raises EngineTimeout when ``timeout`` seconds pass, EngineOutOfMemory at the
        memory cap, ScriptError when the script itself throws. After EngineTimeout or
        EngineOutOfMemory the engine must not be used again: the bridge closes it.
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


def create_engine(name: str, memory_bytes: int) -> Engine:
    """Instantiate an engine by name; the backends are imported only when chosen."""
    if name == "quickjs":
        from codemode.js_runtime.quickjs_engine import QuickJSEngine

        return QuickJSEngine(memory_bytes)
    if name == "v8":
        from codemode.js_runtime.v8_engine import V8Engine

        return V8Engine(memory_bytes)
    raise ValueError(f"unknown engine {name!r} (choose from: {', '.join(ENGINES)})")
