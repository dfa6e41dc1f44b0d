"""The seam between an engine worker (``worker.py``) and a JavaScript engine.

An engine only evaluates scripts, inside its worker process: the execution
(``execution.py``, in the session's process) owns everything else — the prelude, nested
calls, limits and error reporting — so a backend is a page of code and both backends
behave the same.
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

    ``text`` is the engine's own rendering (message plus stack) for the session's side to parse.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# Handed a settle's outcome (a call that returns the state or raises), replies, and
# returns the next results to settle, or None to end the chain.
ChainServer = Callable[[Callable[[], str]], str | None]


class Engine(Protocol):
    """One isolate. Used from the worker's main thread only (V8: and its own thread)."""

    name: ClassVar[str]
    # Where console output goes that the engine can report while a step still runs
    # (V8: see "live console" in prelude.js); the rest comes back in the drained state.
    # Set by the worker; while it is None, that output comes back in the drained state
    # like the rest, at the end of the step.
    on_log: Callable[[str, str], None] | None

    def __init__(self, memory_bytes: int) -> None:
        """A fresh isolate whose heap is capped at ``memory_bytes``."""
        ...

    @classmethod
    def boot(cls) -> None:
        """Load what the engine needs from disk, before the worker is confined."""
        ...

    def step(self, script: str) -> str:
        """Run ``script``, let every queued Promise job run, then return ``__cm.drain()``.

        Raises EngineOutOfMemory at the memory cap, ScriptError when the script itself
        throws; after EngineOutOfMemory the engine is not used again. The parent
        measures the wall clock and kills the worker when it runs out.
        """
        ...

    def settle(self, results_json: str) -> str:
        """Pass finished tool calls (a JSON array of ``[id, ok, payload]``) to
        ``__cm.settle``, then as ``step``: run jobs, return the drained state."""
        ...

    def settle_chain(self, results_json: str, serve: ChainServer) -> None:
        """Settle, hand the outcome to ``serve`` (``serve(finish)`` calls ``finish()``
        for the state or the exception, replies, and returns the next results), and
        again with what it returns, until it returns None. ``serve`` must not raise."""
        ...

    def read_live(self) -> None:
        """Pass console output written so far in a running step to ``on_log`` (from
        another thread; a no-op for an engine whose output leaves as it is written)."""
        ...

    def close(self) -> None:
        """Free the isolate; stops any JavaScript still running in it."""
        ...


ENGINES = ("quickjs", "v8")
# Where each engine's class is (imported only in its worker process).
# What to install when an engine's package is missing (the lean install has no V8).
INSTALL_HINTS = {
    "v8": "the V8 engine is not installed: pip install 'codemode[v8]' (or use the "
    "default engine, quickjs)",
}
ENGINE_CLASSES = {
    "quickjs": ("codemode.js_runtime.quickjs_engine", "QuickJSEngine"),
    "v8": ("codemode.js_runtime.v8_engine", "V8Engine"),
}
