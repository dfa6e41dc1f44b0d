"""An engine worker: the process a program's isolate lives in.

Started by ``prestart.py`` as ``python -I -S -c ...`` with the parent's ``sys.path``;
it closes every file descriptor it inherited but its own, imports its engine,
confines itself (``worker_confine.py``: memory backstop, seccomp), evaluates the
JavaScript every isolate's setup begins with in an isolate of its own
(``setup_head.py``) and only then reads its first request. File descriptors:
0 requests, 1 replies (``protocol.py``), 2 diagnostics (read by the parent after a
crash), and a control pipe named in argv: any byte is a stop request (send the output
printed so far, then ``STOPPED``); its end of file means the parent is gone, and the
worker exits whatever its program is doing.

Tool-call settles are served one after another by the engine (``settle_chain``); V8
serves them from its own thread once a program waits on calls: no thread hand-over
per call.

The worker keeps no state but its isolate; it never decides a limit. The parent
measures time, counts tool calls and output, and kills the worker when it must.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from codemode.js_runtime import protocol as p
from codemode.js_runtime.engine import (
    ENGINE_CLASSES,
    INSTALL_HINTS,
    Engine,
    EngineOutOfMemory,
    EngineTimeout,
    ScriptError,
)
from codemode.js_runtime.setup_head import Primed, head
from codemode.js_runtime.spin import RUN_QUEUE, Spinner

_FLUSH_S = 0.02  # how often console output leaves while a step runs
# How long a worker waits for a request before its flusher stops waking (``Requests.park``):
# a warm spare's worker can wait 15 minutes, and 50 wake-ups a second for nothing.
_PARK_S = 1.0
_FLUSH_BYTES = 64 * 1024
# How long the next request is polled for before the worker sleeps on it (``spin.py``).
# About what sleeping and being woken costs on a virtual machine (a pipe round trip
# with both ends asleep measured 70-200 us), so a poll that misses costs no more.
_SPIN_S = 150e-6
_READ_BYTES = 1 << 16  # what a pipe holds: a bigger read only allocates more


class Output:
    """Frames to the parent: console lines batched, replies written in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = bytearray()
        self.poll_live: Any = None  # V8: reads its live console (calls add)

    def add(self, level: str, text: str) -> None:
        index = p.LEVELS.index(level) if level in p.LEVELS else 0
        data = p.frame(p.LOG, bytes((index,)) + p.encode(text))
        with self._lock:
            self._pending += data
            if len(self._pending) >= _FLUSH_BYTES:
                self._write_locked(b"")

    def flush(self) -> None:
        if self.poll_live is not None:
            self.poll_live()
        with self._lock:
            self._write_locked(b"")

    def send(self, op: int, payload: bytes) -> None:
        data = p.HEADER.pack(len(payload), op) + payload
        with self._lock:
            if self._pending:
                self._write_locked(data)
            else:  # a tool call's reply: no console lines to send first, nothing to copy
                written = os.write(1, data)
                if written < len(data):
                    _write_all(memoryview(data)[written:])

    def _write_locked(self, extra: bytes) -> None:
        data = memoryview(bytes(self._pending) + extra)
        self._pending.clear()
        _write_all(data)


def _write_all(data: memoryview) -> None:
    while data:
        written = os.write(1, data)
        data = data[written:]


class Requests:
    """Frames from the parent on fd 0, read in as few system calls as they allow."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        os.set_blocking(0, False)  # read without blocking while spinning (``spin.py``)
        self._poll = select.poll()
        self._poll.register(0, select.POLLIN)
        self._spinner = Spinner(_SPIN_S, busy=RUN_QUEUE.busy)
        self._ended = False
        self._whole = b""  # what ``_read_whole`` read
        # When ``next`` began to wait (None: a request is being served), and whether the
        # flusher sleeps on ``_wake`` until one comes (``park``).
        self._waiting_since: float | None = None
        self._parked = False
        self._wake = threading.Event()

    def next(self) -> tuple[int, bytes] | None:
        """The next request's (op, payload); None at end of file."""
        self._waiting_since = time.monotonic()
        try:
            return self._next()
        finally:
            # Written before ``_parked`` is read, as ``park`` writes ``_parked`` before
            # it reads this: one of the two sees the other's write, so a flusher never
            # sleeps through a request.
            self._waiting_since = None
            if self._parked:
                self._wake.set()

    def park(self) -> None:
        """(The flusher's thread) Sleep until the next request comes, if the worker has
        waited for one ``_PARK_S`` already; else return at once."""
        since = self._waiting_since
        if since is None or time.monotonic() - since < _PARK_S:
            return
        self._wake.clear()
        self._parked = True
        if self._waiting_since is not None:
            self._wake.wait()
        self._parked = False

    def _next(self) -> tuple[int, bytes] | None:
        buffer = self._buffer
        if not buffer:
            # A new request is read at once when it comes within the spin budget (the
            # read is the poll), else waited for in ``poll``.
            if self._spinner.wait(self._read_whole):
                whole, self._whole = self._whole, b""
                if len(whole) > p.HEADER.size:
                    length, op = p.HEADER.unpack_from(whole)
                    if len(whole) == p.HEADER.size + length:
                        return op, whole[p.HEADER.size :]  # read whole: no buffer copies
                buffer += whole
            else:
                while not self._read():
                    self._poll.poll()
                self._spinner.woke()
            if self._ended and not buffer:
                return None
        while len(buffer) < p.HEADER.size:
            if not self._fill():
                return None
        length, op = p.HEADER.unpack_from(buffer)
        end = p.HEADER.size + length
        while len(buffer) < end:
            if not self._fill():
                return None
        payload = bytes(buffer[p.HEADER.size : end])
        del buffer[:end]
        return op, payload

    def _read_whole(self) -> bool:
        """``_read``, its bytes kept apart (``_whole``) for ``next`` to look at first."""
        try:
            chunk = os.read(0, _READ_BYTES)
        except BlockingIOError:
            return False
        if not chunk:
            self._ended = True
        self._whole = chunk
        return True

    def _fill(self) -> bool:
        """Read at least one more byte of a request that has begun; False at end of
        file."""
        while not self._read():
            self._poll.poll()
        return not self._ended

    def _read(self) -> bool:
        """One read that does not block: whether it got anything (bytes, or the end)."""
        try:
            chunk = os.read(0, _READ_BYTES)
        except BlockingIOError:
            return False
        if chunk:
            self._buffer += chunk
        else:
            self._ended = True
        return True


def _flusher(out: Output, requests: Requests) -> None:
    """Every ``_FLUSH_S``, send what the running step printed; parked while the worker
    waits for a request (no step runs then, so nothing is printed)."""
    while True:
        time.sleep(_FLUSH_S)
        try:
            out.flush()
        except OSError:
            return
        requests.park()


def _controller(out: Output, fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            data = b""
        if not data:
            # The parent is gone (its end of the control pipe closed): whatever runs
            # here now has nobody to answer to.
            os._exit(0)
        try:
            out.flush()
            out.send(p.STOPPED, b"")
        except OSError:
            os._exit(0)


def _boot(engine_name: str, memory_bytes: int) -> type[Engine]:
    """Import the engine, then confine the process; returns the engine class."""
    module_name, class_name = ENGINE_CLASSES[engine_name]
    engine_class: type[Engine] = getattr(importlib.import_module(module_name), class_name)
    engine_class.boot()
    time.localtime()  # reads the time zone now: /etc/localtime cannot be opened later
    # Everything imported lazily must be imported now: no file opens once confined.
    json.loads(json.dumps({"warm": [1.5, "é"]}))
    "\ud800".encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    b"\xff".decode("utf-8", "replace")
    from codemode.js_runtime.worker_confine import confine

    RUN_QUEUE.open()  # read while waiting on the pipe (``spin.py``); no file opens later

    head()  # read now (no file opens once confined); evaluated once confined (``Primed``)

    # A throwaway isolate first, so that the memory backstop is measured with the
    # engine's own start-up already counted.
    engine_class(memory_bytes).close()
    confine(memory_bytes, os.getpid())
    return engine_class


class _BootFailed(Exception):
    """The engine could not be loaded or the process not confined (fails closed)."""


def serve(engine_name: str, memory_bytes: int, control_fd: int) -> None:
    try:
        engine_class = _boot(engine_name, memory_bytes)
    except ImportError as exc:
        if engine_name in INSTALL_HINTS:  # an install without the engine's extra
            raise _BootFailed(INSTALL_HINTS[engine_name]) from None
        raise _BootFailed(f"{engine_name}: {type(exc).__name__}") from None
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        # The type only: its message could carry a host path.
        raise _BootFailed(f"{engine_name}: {type(exc).__name__}") from None
    out = Output()
    requests = Requests()
    threading.Thread(target=_flusher, args=(out, requests), daemon=True).start()
    threading.Thread(target=_controller, args=(out, control_fd), daemon=True).start()
    engine: Engine | None = None
    # The head every isolate's setup begins with, evaluated before the first request is
    # read: the parent's first OPEN then evaluates only the rest (``setup_head.py``).
    primed = Primed(partial(engine_class, memory_bytes), head())
    primed.prime()
    pending: tuple[int, bytes] | None = None
    while True:
        request, pending = pending or requests.next(), None
        if request is None:
            return
        op, payload = request
        text = p.decode(payload)
        if op in (p.OPEN, p.PRIME) and engine is not None:  # the old isolate goes
            out.poll_live = None
            engine.close()
            engine = None
        if op == p.OPEN:
            taken = primed.take(text)
            try:
                engine, text = taken or (engine_class(memory_bytes), text)
            except Exception as exc:
                out.send(*_failed(exc))
                continue
            engine.on_log = out.add
            out.poll_live = engine.read_live
            out.send(*_reply(partial(engine.step, text)))
        elif op == p.PRIME:  # idle between programs: the next OPEN's head, evaluated now
            primed.prime()
        elif engine is None or op not in (p.STEP, p.SETTLE):
            out.send(p.ERROR, bytes((p.INTERNAL,)) + b"unknown request")
        elif op == p.STEP:
            out.send(*_reply(partial(engine.step, text)))
        else:
            ended = _settle_chain(engine, text, out, requests)
            if ended is None:
                return
            pending = ended


def _reply(compute: Callable[[], str]) -> tuple[int, bytes]:
    """The reply frame to a step: its drained state, or what went wrong."""
    try:
        return p.STATE, p.encode(compute())
    except Exception as exc:
        return _failed(exc)


def _failed(exc: BaseException) -> tuple[int, bytes]:
    if isinstance(exc, ScriptError):
        return p.ERROR, bytes((p.SCRIPT,)) + p.encode(exc.text)
    if isinstance(exc, (EngineOutOfMemory, MemoryError)):
        return p.ERROR, bytes((p.MEMORY,))
    if isinstance(exc, EngineTimeout):
        return p.ERROR, bytes((p.INTERNAL,)) + b"the engine stopped itself"
    # The name only: a message could carry a host path.
    return p.ERROR, bytes((p.INTERNAL,)) + p.encode(type(exc).__name__)


def _settle_chain(
    engine: Engine, text: str, out: Output, requests: Requests
) -> tuple[int, bytes] | None:
    """Serve SETTLE after SETTLE (``Engine.settle_chain``; V8 from its own thread);
    returns the first other request, or None when the parent is gone."""
    ended: list[tuple[int, bytes] | None] = []

    def serve_one(finish: Callable[[], str]) -> str | None:
        # (V8: on its thread, inside its callback): nothing may escape from here.
        try:
            out.send(*_reply(finish))
            request = requests.next()
            if request is not None and request[0] == p.SETTLE:
                return p.decode(request[1])
            ended.append(request)
        except BaseException:  # the pipe is gone (the parent died or killed us)
            ended.append(None)
        return None

    engine.settle_chain(text, serve_one)
    return ended[0] if ended else None


def main() -> None:
    from codemode.process import entry

    entry.claim()  # a process of codemode's own: pyseccomp without ldconfig
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    engine_name, memory, control_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # Nothing the parent's parent left open comes along: only the pipes are ours.
    os.closerange(3, control_fd)
    os.closerange(control_fd + 1, os.sysconf("SC_OPEN_MAX"))
    try:
        serve(engine_name, memory, control_fd)
    except BrokenPipeError:
        pass
    except _BootFailed as exc:
        os.write(2, f"codemode worker: cannot start: {exc}\n".encode())
        os._exit(71)
    except MemoryError:
        os.write(2, b"codemode worker: out of memory\n")
        os._exit(70)
    os._exit(0)
