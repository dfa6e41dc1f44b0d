"""An engine worker evaluates the head of every isolate's setup (inspect.js, prelude.js)
before its first request, and the first OPEN that begins with it takes that isolate
(codemode/js_runtime/setup_head.py). Real workers, both engines."""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

import pytest
from test_runtime import ENGINES

from codemode.js_runtime import protocol as p
from codemode.js_runtime.delegate import ToolSet
from codemode.js_runtime.isolates import PRIME_AFTER_S, Isolates, configure_call
from codemode.js_runtime.models import Limits
from codemode.js_runtime.setup_head import Primed, head
from codemode.js_runtime.worker_process import Worker


def _setup(engine: str, extra: str = "") -> str:
    script = Isolates(engine, persistent=False).setup_script(configure_call(ToolSet(), 10))
    return script + extra


async def _logs(worker: Worker, op: int, text: str) -> list[str]:
    lines: list[str] = []
    got, payload = await asyncio.wait_for(
        worker.request(op, text, lambda level, line: lines.append(line)), 60
    )
    assert got == p.STATE, payload
    return lines


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


async def _open_cpu_ns(script: str, *, after_a_program: bool = False, prime: bool = False) -> int:
    """The CPU a fresh worker spends on one OPEN of ``script``, once it has booted
    (``after_a_program``: and run one program; ``prime``: then been told PRIME)."""
    worker = Worker("quickjs", 64 << 20)
    try:
        await asyncio.wait_for(worker.request(p.STEP, "1", None), 60)  # booted (no isolate)
        if after_a_program:
            await _logs(worker, p.OPEN, _setup("quickjs"))
            await _logs(worker, p.STEP, "globalThis.before = 1;")
        if prime:
            worker.prime()
        await asyncio.sleep(0.1)
        before = _cpu_ns(worker.pid)
        op, payload = await asyncio.wait_for(worker.request(p.OPEN, script, None), 60)
        assert op == p.STATE, payload
        return _cpu_ns(worker.pid) - before
    finally:
        worker.kill()


def _middle(values: list[int]) -> int:
    return sorted(values)[len(values) // 2]


def test_the_setup_script_begins_with_the_head() -> None:
    script = _setup("quickjs")
    assert script.startswith(head())
    assert "__cm.configure(" in script[len(head()) :]
    assert "sourceURL=codemode-prelude.js" in head()


async def test_an_open_that_begins_with_the_head_evaluates_only_the_rest() -> None:
    # The same JavaScript either way; a leading space is all that keeps the second
    # from beginning with the head, so its worker evaluates the head on the OPEN.
    primed = _middle([await _open_cpu_ns(_setup("quickjs")) for _ in range(3)])
    whole = _middle([await _open_cpu_ns(" " + _setup("quickjs")) for _ in range(3)])
    assert primed < 0.6 * whole, (primed, whole)


async def test_a_worker_told_prime_between_programs_has_the_next_isolate_ready() -> None:
    script = _setup("quickjs")
    primed = _middle([await _open_cpu_ns(script, after_a_program=True, prime=True)
                      for _ in range(3)])  # fmt: skip
    whole = _middle([await _open_cpu_ns(script, after_a_program=True) for _ in range(3)])
    assert primed < 0.6 * whole, (primed, whole)


@pytest.mark.parametrize("engine", ENGINES)
async def test_prime_drops_the_old_isolate_and_nothing_of_it_reaches_the_next(
    engine: str,
) -> None:
    worker = Worker(engine, 64 << 20)
    try:
        await _logs(worker, p.OPEN, _setup(engine))
        await _logs(worker, p.STEP, "globalThis.left = 42;")
        worker.prime()
        # Unanswered: the next request's reply is the next one read.
        op, payload = await asyncio.wait_for(worker.request(p.STEP, "1", None), 60)
        assert op == p.ERROR and b"unknown request" in payload, payload  # no isolate now
        await _logs(worker, p.OPEN, _setup(engine))
        assert await _logs(worker, p.STEP, "console.log(typeof left)") == ["undefined"]
    finally:
        worker.kill()


class _Idle:
    """A worker as ``Isolates.checkin`` sees it."""

    def __init__(self) -> None:
        self.primed = 0
        self.killed = False
        self.dead = False
        self.memory_bytes = 64 << 20

    def alive(self) -> bool:
        return not self.killed

    def prime(self) -> None:
        self.primed += 1

    def kill(self) -> None:
        self.killed = True


def test_a_worker_kept_between_programs_is_told_to_prime_and_only_then() -> None:
    fresh = Isolates("quickjs", persistent=False)
    kept = _Idle()
    fresh.checkin(kept)  # type: ignore[arg-type]
    assert kept.primed == 1 and not kept.killed
    # A persistent session's worker keeps its isolate (the globals live on in it).
    persistent = Isolates("quickjs", persistent=True)
    holding = _Idle()
    persistent.checkin(holding)  # type: ignore[arg-type]
    assert holding.primed == 0
    # One not kept (the session closed) is killed, not primed.
    fresh.close()
    gone = _Idle()
    fresh.checkin(gone)  # type: ignore[arg-type]
    assert gone.killed and gone.primed == 0


async def test_a_kept_worker_primes_after_its_programs_end_is_reported_not_before() -> None:
    # In an event loop, the caller reports the program's end first: the PRIME that
    # wakes the worker (and can take this process's CPU) waits PRIME_AFTER_S.
    isolates = Isolates("quickjs", persistent=False)
    kept = _Idle()
    isolates.checkin(kept)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert kept.primed == 0
    await asyncio.sleep(PRIME_AFTER_S * 4)
    assert kept.primed == 1 and not kept.killed
    # Taken for the next program before that: never told (a PRIME behind its OPEN would
    # drop the isolate that program runs in).
    taken = _Idle()
    isolates.checkin(taken)  # type: ignore[arg-type]
    assert isolates.checkout(Limits(memory_mb=64)) is taken
    await asyncio.sleep(PRIME_AFTER_S * 4)
    assert taken.primed == 0
    # Checked in again: told once, by the later check-in's timer.
    isolates.checkin(taken)  # type: ignore[arg-type]
    isolates.checkout(Limits(memory_mb=64))
    isolates.checkin(taken)  # type: ignore[arg-type]
    await asyncio.sleep(PRIME_AFTER_S * 4)
    assert taken.primed == 1
    # The session closes first: killed, never told.
    last = _Idle()
    isolates.checkin(last)  # type: ignore[arg-type]
    isolates.close()
    await asyncio.sleep(PRIME_AFTER_S * 4)
    assert last.killed and last.primed == 0


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_primed_isolate_serves_one_open_and_no_program_sees_another(engine: str) -> None:
    worker = Worker(engine, 64 << 20)
    try:
        # The first OPEN takes the primed isolate; what its program leaves there...
        await _logs(worker, p.OPEN, _setup(engine))
        await _logs(worker, p.STEP, "globalThis.left = 42;")
        assert await _logs(worker, p.STEP, "console.log(typeof left)") == ["number"]
        # ...no later OPEN sees: each one after it gets an isolate of its own.
        for script in (_setup(engine), " " + _setup(engine)):
            await _logs(worker, p.OPEN, script)
            assert await _logs(worker, p.STEP, "console.log(typeof left)") == ["undefined"]
    finally:
        worker.kill()


@pytest.mark.parametrize("engine", ENGINES)
async def test_an_open_without_the_head_gets_a_fresh_isolate(engine: str) -> None:
    worker = Worker(engine, 64 << 20)
    try:
        # No prelude at all: the primed isolate (which has it) must not be used.
        op, payload = await asyncio.wait_for(
            worker.request(p.OPEN, "typeof __cm === 'undefined' ? 1 : thrown()", None), 60
        )
        # No prelude means no drain: the step fails, and it fails for that reason.
        assert op == p.ERROR and b"__cm" in payload, payload
        await _logs(worker, p.OPEN, _setup(engine))  # the worker is still usable
        assert await _logs(worker, p.STEP, "console.log(1 + 1)") == ["2"]
    finally:
        worker.kill()


class _Engine:
    """A stand-in engine that records what it evaluates."""

    made: ClassVar[list[_Engine]] = []

    def __init__(self, fail: str = "") -> None:
        self.steps: list[str] = []
        self.closed = False
        self.fail = fail
        _Engine.made.append(self)

    def step(self, script: str) -> str:
        if self.fail and self.fail in script:
            raise RuntimeError("boom")
        self.steps.append(script)
        return json.dumps({})

    def close(self) -> None:
        self.closed = True


def test_primed_takes_only_a_script_that_begins_with_its_head() -> None:
    _Engine.made.clear()
    primed = Primed(_Engine, "HEAD;")  # type: ignore[arg-type]
    primed.prime()
    primed.prime()  # one waits already: no second one
    assert len(_Engine.made) == 1 and _Engine.made[0].steps == ["HEAD;"]
    assert primed.take("OTHER; HEAD;") is None
    assert _Engine.made[0].closed  # dropped, not kept for later
    assert primed.take("HEAD;REST") is None  # nothing primed any more
    primed.prime()
    taken = primed.take("HEAD;REST")
    assert taken is not None and taken[0] is _Engine.made[1] and taken[1] == "REST"
    assert primed.take("HEAD;REST") is None  # taken once


def test_a_head_that_fails_primes_nothing() -> None:
    _Engine.made.clear()
    primed = Primed(lambda: _Engine(fail="HEAD"), "HEAD;")  # type: ignore[arg-type,return-value]
    primed.prime()
    assert _Engine.made[0].closed
    assert primed.take("HEAD;REST") is None
