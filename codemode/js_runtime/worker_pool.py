"""The warm workers: one spare per (engine, memory) in use, started ahead of need, so
a program rarely waits for a worker to boot (``worker_process.Worker``)."""

from __future__ import annotations

import atexit
import os
import threading

from codemode.js_runtime import prestart
from codemode.js_runtime.worker_process import Worker


class Pool:
    """Warm workers, one spare per (engine, memory) in use, started ahead of need."""

    def __init__(self) -> None:
        self._spares: dict[tuple[str, int], list[Worker]] = {}
        self._lock = threading.Lock()
        self._owner = os.getpid()

    def _forked(self) -> None:
        # In a forked child the spares are the parent's: forget them, start our own.
        if os.getpid() != self._owner:
            self._owner = os.getpid()
            self._spares = {}
            self._lock = threading.Lock()

    def prestart(self, engine: str, memory_bytes: int) -> None:
        self._forked()
        key = (engine, memory_bytes)
        with self._lock:
            spares = self._spares.setdefault(key, [])
            spares[:] = [w for w in spares if w.alive()]
            if spares:
                return
        worker = Worker(engine, memory_bytes, prestart.adopt(engine, memory_bytes))
        with self._lock:
            self._spares[key].append(worker)

    def take(self, engine: str, memory_bytes: int) -> Worker:
        """A started worker (booting, or booted and waiting), and a new spare behind it."""
        self._forked()
        key = (engine, memory_bytes)
        worker = None
        with self._lock:
            spares = self._spares.get(key, [])
            while spares:
                candidate = spares.pop()
                if candidate.alive():
                    worker = candidate
                    break
        if worker is None:
            worker = Worker(engine, memory_bytes, prestart.adopt(engine, memory_bytes))
        # A spare behind it, except in a process that runs one program and exits
        # (the Codex host's warm spare), where a spare's boot would only compete for the CPU.
        if not prestart.one_program:
            self.prestart(engine, memory_bytes)
        return worker

    def close(self) -> None:
        self._forked()
        with self._lock:
            workers = [w for spares in self._spares.values() for w in spares]
            self._spares.clear()
        for worker in workers:
            worker.kill()


POOL = Pool()
atexit.register(POOL.close)
