"""A lean binding to the V8 library that mini-racer ships, for an engine worker.

We drive its C API (``v8_abi.py``) directly instead of going through the MiniRacer
class, for the one thing a worker does thousands of times a program: evaluate a short
script and get back a string. Two differences matter for speed:

- A result comes back through our own callback, which only files it; no Future, handle
  wrapper or object factory per evaluation.
- What runs again and again (each tool call settles and drains) is a function kept as
  a value and called (``call``): no script compiled, no source value made and freed.
- After posting work, the worker's thread waits for it on a plain lock, with the GIL
  released: settling a tool call takes V8 a few tens of microseconds, and handing the
  result to a thread blocked on a lock costs one wake-up. (The worker has nothing else
  to do meanwhile: its flusher thread reads the live console.)
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from codemode.js_runtime.v8_abi import (
    ARRAY_BUFFER,
    CALLBACK,
    ERRORS,
    STRING,
    UNDEFINED,
    Value,
    library,
)

# How often ``finish`` calls its ``tick`` while a long evaluation runs.
TICK_S = 0.05
# How long ``close`` waits for the V8 thread to give back its thread state.
_UNPIN_S = 1.0

# ctypes runs a callback from a thread Python does not know under a thread state made
# for that one call and torn down after it (with, since 3.11, a 16 KiB frame stack
# mapped and unmapped each time): two of each per tool call. So the V8 thread's first
# callback takes a second hold on its thread state, which then outlives every call;
# ``close`` gives it back from a last callback on that thread.
_gil_ensure = ctypes.pythonapi.PyGILState_Ensure
_gil_ensure.restype = ctypes.c_int
_gil_release = ctypes.pythonapi.PyGILState_Release
_gil_release.argtypes = [ctypes.c_int]
_gil_release.restype = None


class V8Error(Exception):
    """An evaluation ended in an exception; ``kind`` says which (``v8_abi.ERRORS``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message or f"JavaScript {kind} error")
        self.kind = kind


@dataclass(frozen=True)
class Memory:
    """Where an ArrayBuffer's bytes are. They stay put while the isolate lives and
    JavaScript holds the buffer; reading them races with JavaScript writing them."""

    address: int
    size: int


Outcome = str | V8Error | Memory | None


@dataclass
class Evaluation:
    """One script posted to the isolate's thread (or one function called there)."""

    callback_id: int
    # The source's value, alive until the result arrives; None for a script posted
    # with ``keep`` (its value lives as long as the context) and for a call.
    code_handle: int | None


class Isolate:
    """One V8 isolate on its own thread (mini-racer runs one per context).

    Used from one thread; only ``_on_result`` runs on the V8 thread.
    """

    def __init__(self, memory_bytes: int) -> None:
        self._dll = library()
        # The two foreign functions every tool call uses, looked up once.
        self._free_value = self._dll.mr_free_value
        self._call_function = self._dll.mr_call_function
        # Results filed by the V8 thread (their values' addresses), by callback id.
        self._results: dict[int, int] = {}
        # Released by the V8 thread when the result the waiting thread blocks on is
        # filed. Only a hint: ``_results`` is the truth, so a stray release costs a
        # look and nothing else.
        self._filed = threading.Lock()
        self._filed.acquire()
        self._blocking_on: int | None = None
        self._ids = itertools.count(1)  # 0 is mini-racer's "nobody waits" id
        # Called on the V8 thread with each filed result's callback id, after filing
        # (``V8Engine.settle_chain`` serves tool calls from there). It must not raise.
        self.on_filed: Callable[[int], None] | None = None
        # The V8 thread's hold on its thread state (see ``_gil_ensure``), and the
        # callback id whose result gives it back.
        self._pin: int | None = None
        self._unpin_id: int | None = None
        self._unpinned = threading.Event()
        self._v8_thread: int | None = None
        self._kept: dict[str, int] = {}  # source values of scripts posted with ``keep``
        self._callback = CALLBACK(self._on_result)  # must live as long as the context
        self._ctx: int | None = self._dll.mr_init_context(self._callback)
        self._dll.mr_set_hard_memory_limit(self._ctx, memory_bytes)
        # ``this`` for ``call`` (made here: a value that needs no trip to the V8 thread).
        self._undefined: int = self._dll.mr_alloc_int_val(self._ctx, 0, UNDEFINED)

    def _on_result(self, callback_id: int, raw: int) -> None:
        # On the V8 thread, which is blocked until we return: file it and go.
        if self._pin is None and self._unpin_id is None:
            self._pin = _gil_ensure()
            self._v8_thread = threading.get_ident()
        self._results[callback_id] = raw
        if callback_id == self._blocking_on:
            self._blocking_on = None
            with contextlib.suppress(RuntimeError):  # still released from a lost race
                self._filed.release()
        hook = self.on_filed
        if hook is not None:
            hook(callback_id)
        if callback_id == self._unpin_id and self._pin is not None:
            pin, self._pin = self._pin, None
            _gil_release(pin)  # the thread state goes when ctypes lets go of it
            self._unpinned.set()

    def post(self, code: str, callback_id: int | None = None, *, keep: bool = False) -> Evaluation:
        """Queue ``code`` for evaluation; scripts run in the order they are posted.
        ``keep``: a script posted again and again (each tool call posts two), whose
        source value is made once and kept rather than made and freed every time."""
        ctx = self._context()
        handle = self._kept.get(code) if keep else None
        if handle is None:
            source = code.encode("utf-8", "surrogatepass")
            handle = self._dll.mr_alloc_string_val(ctx, source, len(source), STRING)
            if keep:
                self._kept[code] = handle
        if callback_id is None:
            callback_id = next(self._ids)
        self._dll.mr_eval(ctx, handle, callback_id)
        return Evaluation(callback_id, None if keep else handle)

    def call(self, function: int, arguments: int, callback_id: int | None = None) -> Evaluation:
        """Queue a call of ``function`` (a value kept with ``take_value``) with the
        elements of ``arguments`` (a kept array), in order with the posted scripts. No
        source to compile, and no source value made and freed: the cheap way to run
        the same thing again and again."""
        if callback_id is None:
            callback_id = next(self._ids)
        self._call_function(self._context(), function, self._undefined, arguments, callback_id)
        return Evaluation(callback_id, None)

    def finish(
        self, evaluations: list[Evaluation], tick: Callable[[], None] | None = None
    ) -> list[Outcome]:
        """Wait for posted evaluations (in posting order) and take their outcomes.

        A string result comes back as ``str``, an exception as a ``V8Error`` (returned,
        not raised, so that one failure does not strand the others), an ArrayBuffer as
        its ``Memory``, anything else as None. The calling thread blocks (the GIL
        released) until the last one is filed; V8 runs them in order, so the others are
        filed by then. While it waits, ``tick`` is called every ``TICK_S``.
        """
        self.wait(evaluations[-1], tick)
        return [self.take(evaluation) for evaluation in evaluations]

    def wait(self, evaluation: Evaluation, tick: Callable[[], None] | None = None) -> None:
        """Block until ``evaluation`` is filed (as ``finish``), without taking it."""
        last = evaluation.callback_id
        while last not in self._results:
            self._blocking_on = last
            if last not in self._results:  # else it was filed before we said so
                self._filed.acquire(timeout=-1 if tick is None else TICK_S)
            self._blocking_on = None
            self._filed.acquire(blocking=False)  # a release that came after the timeout
            if tick is not None and last not in self._results:
                tick()

    def reserve(self) -> int:
        """A callback id for a ``post`` or ``call`` still to come, known before it is
        made (its result may be filed on the V8 thread before the call returns)."""
        return next(self._ids)

    def take(self, evaluation: Evaluation) -> Outcome:
        """The outcome of a finished evaluation (``filed``), freeing its values.
        (Written out in one function: it runs twice per tool call.)"""
        raw = self._results.pop(evaluation.callback_id)
        value = Value.from_address(raw)
        kind = value.type
        outcome: Outcome = None
        if kind == STRING or kind in ERRORS:
            size = value.len
            text = (ctypes.string_at(value.value_ptr, size) if size else b"").decode(
                "utf-8", "replace"
            )
            outcome = text if kind == STRING else V8Error(ERRORS[kind], text)
        elif kind == ARRAY_BUFFER and value.value_ptr:
            outcome = Memory(value.value_ptr, value.len)
        ctx = self._ctx
        if ctx is not None:
            self._free_value(ctx, raw)
            if evaluation.code_handle is not None:
                self._free_value(ctx, evaluation.code_handle)
        return outcome

    def take_value(self, evaluation: Evaluation) -> tuple[int, int]:
        """The value a finished evaluation returned, kept rather than converted: its
        address and type. It lives as long as the context (for ``call``)."""
        raw = self._results.pop(evaluation.callback_id)
        if evaluation.code_handle is not None:
            self._free(evaluation.code_handle)
        return raw, Value.from_address(raw).type

    def _free(self, raw: int) -> None:
        if self._ctx is not None:
            self._free_value(self._ctx, raw)

    def memory_limit_reached(self) -> bool:
        return self._ctx is not None and bool(self._dll.mr_hard_memory_limit_reached(self._ctx))

    def _context(self) -> int:
        if self._ctx is None:
            raise RuntimeError("isolate used after close()")
        return self._ctx

    def close(self) -> None:
        """Free the context; stops JavaScript still running and frees every value."""
        if self._ctx is not None and self._pin is not None:
            self._unpin()
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            self._dll.mr_free_context(ctx)
        self._results.clear()
        self._kept.clear()  # (freed with the context)

    def _unpin(self) -> None:
        """Give back the V8 thread's thread state (from a callback on that thread),
        unless that thread is busy for longer than ``_UNPIN_S``: then it stays, a few
        kilobytes, rather than hold up the close."""
        if threading.get_ident() == self._v8_thread:
            return  # (a callback closing its own isolate: nobody else can do it)
        self._unpin_id = next(self._ids)  # set before its callback can run
        evaluation = self.post("0", self._unpin_id)
        if self._unpinned.wait(_UNPIN_S):
            self.take(evaluation)

    def __del__(self) -> None:
        # An isolate dropped without close() would keep its V8 thread and heap.
        with contextlib.suppress(Exception):
            self.close()
