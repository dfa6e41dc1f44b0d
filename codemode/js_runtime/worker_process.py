"""The parent's side of an engine worker (``worker_pool.py`` keeps them warm).

``Worker.request`` sends one frame and returns the reply, passing console lines to
``on_log`` as they arrive. Everything that comes back is untrusted: frame sizes are
bounded, text is decoded without raising, and a worker that dies mid-request becomes
``WorkerCrashed`` with one line saying why. ``stop`` asks the worker for the output
printed so far, then kills it, within ``STOP_GRACE_S`` whatever the program does.

A reply is waited for first by reading the pipe without blocking, again and again, for
up to ``SPIN_S`` while that pays (``spin.py``), then with a blocking ``select`` on the
loop's thread for up to ``BLOCK_S``, and then through the event loop, so the loop is
never held much longer. Requests are written without blocking as well: a worker that
stops reading (a compromised engine) holds its own program, up to that program's
deadline, never the loop (``tests/test_engine_stops_reading.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
from collections.abc import Callable

from codemode.js_runtime import protocol as p
from codemode.js_runtime.prestart import Spawned, spawn
from codemode.js_runtime.spin import RUN_QUEUE, Spinner

BLOCK_S = 300e-6
# How long a reply is polled for before this process sleeps on it (``spin.py``).
# About what sleeping and being woken costs on a virtual machine (a pipe round trip
# with both ends asleep measured 70-200 us), so a poll that misses costs no more.
SPIN_S = 150e-6
# How long a stopped worker gets to send the output it has buffered before it is killed.
STOP_GRACE_S = 0.08
# The largest frame read from a worker: a return value or one console line.
MAX_FRAME = 64 * 1024 * 1024
# What one read asks for: what a pipe holds. (More gains nothing, and costs a fresh
# memory mapping and its unmapping on every read: glibc maps allocations over 128 KiB.)
_READ_BYTES = 64 * 1024
_STDERR_KEEP = 4096
LogSink = Callable[[str, str], None]


class WorkerCrashed(Exception):
    """The worker died or misbehaved; ``out_of_memory`` when that is what killed it."""

    def __init__(
        self, message: str, *, out_of_memory: bool = False, too_large: bool = False
    ) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory
        self.too_large = too_large


class Worker:
    """One engine worker process (one isolate at a time), used from one event loop."""

    def __init__(self, engine: str, memory_bytes: int, spawned: Spawned | None = None) -> None:
        self.engine = engine
        self.memory_bytes = memory_bytes
        # A reply can hold a value as large as the isolate's memory, in UTF-8; but this
        # process must not be made to hold more than MAX_FRAME of it at once.
        self.max_frame = min(3 * memory_bytes + (1 << 20), MAX_FRAME)
        self.proc = spawned if spawned is not None else spawn(engine, memory_bytes)
        self._in = self.proc.requests
        self._out = self.proc.replies
        self._control = self.proc.control
        # Requests are written without blocking too: a worker that stops reading its
        # pipe (a compromised engine) must not hold this process's event loop, only
        # its own program, until that program's deadline.
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        os.set_blocking(self.proc.errors, False)
        self._spinner = Spinner(SPIN_S, busy=RUN_QUEUE.busy)
        self._buffer = bytearray()
        self._ended = False  # the worker's end of the reply pipe is closed
        self._unsent = False  # a request could not be written: the worker is gone
        self._rest: memoryview | None = None  # what the worker has not taken of a request
        self._spun = False  # the reply was polled for in vain: its wait sleeps at once
        # A forked child (a batch pool's worker) inherits this object; the worker
        # process is still its parent's to use and to kill.
        self._owner = os.getpid()
        self.dead = False
        self.has_isolate = False  # set by the execution once an OPEN succeeded
        self.configured: str | None = None  # the prelude's configure call it last ran
        _reap()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return not self.dead and os.getpid() == self._owner and self.proc.poll() is None

    async def request(self, op: int, text: str, on_log: LogSink | None) -> tuple[int, bytes]:
        """Send one request; the reply's (op, payload), STATE or ERROR."""
        got = self.request_now(op, text, on_log)
        return got if got is not None else await self.reply(on_log)

    def request_now(self, op: int, text: str, on_log: LogSink | None) -> tuple[int, bytes] | None:
        """Send one request, and return its reply when it comes while this process polls
        for it (``spin.py``: a tool call's usual case, which then costs no coroutine);
        None: the reply is ``await reply(on_log)``'s."""
        return self.poll(on_log) if self.send(op, text) else None

    def prime(self) -> None:
        """Tell a worker that waits idle for its next program to make that program's
        isolate ready now (``protocol.PRIME``). Never blocks, and is not answered."""
        if self.dead or self._rest is not None:
            return
        self.has_isolate = False  # the worker drops it
        self._tell(p.PRIME)

    def _tell(self, op: int) -> None:
        """An unanswered frame with no payload, written whole (under PIPE_BUF) or not at
        all: a worker whose pipe is full (it stopped reading) is not told."""
        with contextlib.suppress(OSError):
            os.write(self._in, p.HEADER.pack(0, op))

    def send(self, op: int, text: str) -> bool:
        """Send one request, or begin to: what the pipe does not take now follows as the
        worker reads (``poll``, ``reply``). False: the pipe is broken (``reply`` says why)."""
        if self.dead:
            raise WorkerCrashed("the engine process is gone")
        payload = p.encode(text)
        data = p.HEADER.pack(len(payload), op) + payload
        try:
            written = os.write(self._in, data)
        except BlockingIOError:
            written = 0
        except OSError:
            self._unsent = True
            return False
        if written < len(data):  # the rest as the worker takes it (``_push``)
            self._rest = memoryview(data)[written:]
        return True

    def _push(self) -> bool:
        """Write what the pipe takes now of the request's rest; whether none is left."""
        rest = self._rest
        while rest:
            try:
                rest = rest[os.write(self._in, rest) :]
            except BlockingIOError:
                self._rest = rest
                return False
            except OSError:
                self._unsent = True
                break
        self._rest = None
        return True

    def poll(self, on_log: LogSink | None) -> tuple[int, bytes] | None:
        """The reply to the request just sent, if it comes while this process polls for
        it; None: it is ``await reply(on_log)``'s."""
        if self._rest is not None and not self._push():
            self._spun = True
            return None  # the worker has not even taken the request yet
        while True:
            got = self._take_frame()
            if got is None:
                if self._ended or not self._spinner.wait(self._read):
                    self._spun = True  # the reply's wait sleeps at once
                    return None
                continue
            if got[0] in (p.STATE, p.ERROR):
                return got
            _log_frame(got, on_log)

    async def reply(self, on_log: LogSink | None) -> tuple[int, bytes]:
        """The reply to the request ``send`` (or ``request_now``) sent, the console lines
        before it passed to ``on_log``; the rest of the request is written first, as the
        worker takes it."""
        while self._rest is not None and not self._push():
            await _ready(self._in, write=True)
        if self._unsent:
            raise await self._crashed()
        while True:
            got = await self._frame()
            if got[0] in (p.STATE, p.ERROR):
                return got
            _log_frame(got, on_log)

    def _take_frame(self) -> tuple[int, bytes] | None:
        buffer = self._buffer
        if len(buffer) < p.HEADER.size:
            return None
        length, op = p.HEADER.unpack_from(buffer)
        if length > self.max_frame:
            self.kill()
            raise WorkerCrashed(
                f"program stopped: it sent more than {self.max_frame >> 20} MB at once "
                "(a return value or a console line)",
                too_large=True,
            )
        end = p.HEADER.size + length
        if len(buffer) < end:
            return None
        payload = bytes(memoryview(buffer)[p.HEADER.size : end])  # one copy, not two
        del buffer[:end]
        return op, payload

    def _read(self) -> bool:
        """One read that does not block: whether it got anything, bytes or the end of
        the pipe (``_ended``)."""
        try:
            chunk = os.read(self._out, _READ_BYTES)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if chunk:
            self._buffer += chunk
        else:
            self._ended = True
        return True

    async def _frame(self) -> tuple[int, bytes]:
        while True:
            got = self._take_frame()
            if got is not None:
                return got
            if self._ended:
                raise await self._crashed()
            # What the worker sends within the spin budget is read at once (``spin.py``:
            # the read is the poll); else it is waited for on this thread for up to
            # BLOCK_S, then through the event loop. (``_spun``: ``request_now`` has
            # polled for it already.)
            if self._spun or not self._spinner.wait(self._read):
                self._spun = False
                if not select.select([self._out], [], [], BLOCK_S)[0]:
                    await _ready(self._out)
                self._read()
                self._spinner.woke()

    async def stop(self, on_log: LogSink | None) -> None:
        """Collect the output printed so far (for ``STOP_GRACE_S`` at most), then kill."""
        if self.dead:
            return
        try:
            with contextlib.suppress(OSError):
                os.write(self._control, b"x")
            async with asyncio.timeout(STOP_GRACE_S):
                while True:
                    got = await self._frame()
                    if got[0] == p.STOPPED:
                        break
                    _log_frame(got, on_log)
        except (TimeoutError, WorkerCrashed):
            pass
        finally:
            self.kill()  # even when cancelled again while waiting

    async def _crashed(self) -> WorkerCrashed:
        """Why the worker is gone: waits for its exit (briefly) and reads its stderr."""
        self.dead = True
        for _ in range(40):
            if self.proc.poll() is not None:
                break
            await asyncio.sleep(0.005)
        else:
            self.kill()
        code = self.proc.returncode
        err = b""
        with contextlib.suppress(OSError, ValueError):
            err = os.read(self.proc.errors, 1 << 16)
        text = err[-_STDERR_KEEP:].decode("utf-8", "replace")
        said = [ln for ln in text.splitlines() if ln.startswith("codemode worker: cannot start")]
        if said:
            return WorkerCrashed(said[-1].removeprefix("codemode worker: "))
        lowered = text.lower()
        if any(
            k in lowered
            for k in (
                "out of memory",
                "allocation failed",
                "invalid size",
                "invalid array length",
                "memoryerror",
            )
        ):
            return WorkerCrashed("out of memory", out_of_memory=True)
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return WorkerCrashed(f"the JavaScript engine crashed ({name})")
        return WorkerCrashed(f"the JavaScript engine exited (status {code})")

    def kill(self) -> None:
        self.dead = True
        self._rest = None
        if os.getpid() != self._owner:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            # Not waited for: a SIGKILLed process is gone at once, and its zombie is
            # reaped later (``_reap``), so nobody's exit or next program waits on the
            # kernel's teardown.
            if self.proc.poll() is None:
                _UNREAPED.append(self.proc)
        for fd in (self.proc.requests, self.proc.replies, self.proc.errors, self._control):
            with contextlib.suppress(OSError):
                if fd >= 0:
                    os.close(fd)
        self.proc.requests = self.proc.replies = self.proc.errors = self._control = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self.dead:
                self.kill()


def _log_frame(frame: tuple[int, bytes], on_log: LogSink | None) -> None:
    """A console line (LOG) to ``on_log``; anything else (STOPPED, a stop request that
    raced with a reply) is dropped."""
    op, payload = frame
    if op == p.LOG and on_log is not None and payload:
        level = payload[0]
        name = p.LEVELS[level] if level < len(p.LEVELS) else "log"
        on_log(name, p.decode(payload[1:]))


async def _ready(fd: int, write: bool = False) -> None:
    """Until the event loop finds ``fd`` readable (or writable)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    (loop.add_writer if write else loop.add_reader)(fd, _settle_once, ready)
    try:
        await ready
    finally:
        (loop.remove_writer if write else loop.remove_reader)(fd)


def _settle_once(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


# Killed workers not yet reaped (their zombies), tried again whenever a worker starts.
_UNREAPED: list[Spawned] = []


def _reap() -> None:
    _UNREAPED[:] = [proc for proc in _UNREAPED if proc.poll() is None]


async def reap_killed(within_s: float = 0.5) -> None:
    """Reap the workers killed so far, waiting up to ``within_s`` for their exits: a
    server whose client went leaves no zombie of it behind until the next program."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    _reap()
    while _UNREAPED and loop.time() < deadline:
        await asyncio.sleep(0.01)
        _reap()
