"""Which engine worker a program runs in, and what a fresh isolate runs first.

Not persistent: every program gets a fresh isolate, and programs run at once run in
workers of their own (a few idle ones are kept warm). Persistent: one worker holds the
isolate, and globals survive from one program to the next; a program stopped by a
limit (or a crash) costs the globals, and the next one starts afresh.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from codemode.js_runtime.delegate import ToolNames
from codemode.js_runtime.models import Limits
from codemode.js_runtime.setup_head import head
from codemode.js_runtime.worker_pool import POOL
from codemode.js_runtime.worker_process import Worker

_IDLE_KEPT = 4  # not persistent: warm workers kept for the next program
# How long after its program ends a kept worker is told to prime (``Worker.prime``):
# whoever ran the program reports its end first. A pipe's write wakes its reader on the
# writer's CPU, and there the worker took the CPU from this process for the 2-4 ms that
# dropping the old isolate and priming take: in half the turns of a real Codex session,
# between the program's last reply and its outcome leaving. A program that comes sooner
# loses nothing: its OPEN would have waited behind the priming anyway.
PRIME_AFTER_S = 0.005


def memory_bytes(limits: Limits) -> int:
    return limits.memory_mb * 1024 * 1024


def configure_call(tools: ToolNames, max_tool_calls: int) -> str:
    """The prelude call that sets the tools a program sees and its call cap, then the
    tools' own JavaScript for this program when they bring some: ``program_setup()``,
    one line (a Codex session's per-exec globals, ``codex_host``)."""
    call = (
        f"__cm.configure({json.dumps(tools.flat_names())}, "
        f"{max_tool_calls}, {json.dumps(tools.namespaces())});"
    )
    extra = getattr(tools, "program_setup", None)
    return f"{call} {extra()}" if callable(extra) else call


class Isolates:
    """The workers of one session, for one engine."""

    def __init__(
        self,
        engine: str,
        *,
        persistent: bool,
        globals: dict[str, Any] | None = None,
        setup_scripts: list[str] | None = None,
        prestart_memory: int | None = None,
    ) -> None:
        from codemode.js_runtime.engine import ENGINES

        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r} (choose from: {', '.join(ENGINES)})")
        self.engine = engine
        self.persistent = persistent
        self.globals = dict(globals or {})
        # Extra JavaScript run in each new isolate after the prelude (skill loader).
        self.setup_scripts = list(setup_scripts or [])
        self._worker: Worker | None = None  # persistent: the one holding the isolate
        self._idle: list[Worker] = []  # not persistent: workers free for the next program
        self._priming: dict[Worker, asyncio.TimerHandle] = {}  # idle ones told to prime soon
        self._closed = False
        if prestart_memory is not None:
            POOL.prestart(engine, prestart_memory)

    def setup_script(self, configure: str) -> str:
        """What a fresh isolate runs first: the prelude (the head every isolate shares,
        which a worker has evaluated ahead: ``setup_head.py``), then the tools, globals,
        setup."""
        setup = [configure]
        for name, value in self.globals.items():
            setup.append(
                f"Object.defineProperty(globalThis, {json.dumps(name)}, "
                f"{{value: JSON.parse({json.dumps(json.dumps(value))}), writable: true}});"
            )
        setup.extend(self.setup_scripts)
        # The host channel is the setup scripts' to take (prelude.js): out of reach now.
        setup.append("__cm.hostChannel();")
        return head() + "\n".join(setup)

    def checkout(self, limits: Limits) -> Worker:
        memory = memory_bytes(limits)
        if self.persistent:
            worker = self._worker
            if worker is not None and worker.alive() and worker.memory_bytes == memory:
                return worker
            if worker is not None:
                worker.kill()
            self._worker = POOL.take(self.engine, memory)
            return self._worker
        while self._idle:
            worker = self._idle.pop()
            self._unprime(worker)
            if worker.alive() and worker.memory_bytes == memory:
                return worker
            worker.kill()
        return POOL.take(self.engine, memory)

    def checkin(self, worker: Worker) -> None:
        if self.persistent:
            if worker.dead and self._worker is worker:
                self._worker = None
            return
        if worker.alive() and not self._closed and len(self._idle) < _IDLE_KEPT:
            self._idle.append(worker)
            # Its next program's isolate made while it waits (setup_head.py), once the
            # end of this one has been reported.
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                worker.prime()
                return
            self._unprime(worker)
            self._priming[worker] = loop.call_later(PRIME_AFTER_S, self._prime, worker)
        else:
            worker.kill()

    def _prime(self, worker: Worker) -> None:
        self._priming.pop(worker, None)
        if worker in self._idle:  # still waiting for a program: not taken, not killed
            worker.prime()

    def _unprime(self, worker: Worker) -> None:
        handle = self._priming.pop(worker, None)
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        """Kill the workers (a persistent one holds the isolate)."""
        self._closed = True
        for worker in list(self._priming):
            self._unprime(worker)
        workers, self._idle = self._idle, []
        if self._worker is not None:
            workers.append(self._worker)
            self._worker = None
        for worker in workers:
            worker.kill()
