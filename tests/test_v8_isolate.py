"""The V8 binding under the V8 engine: ordering, outcomes, the event loop, cleanup."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from runtime_support import loop_ticks, registry_session, run_program

from codemode.js_runtime import CodeSession, ExecEvent, Limits, LogEvent
from codemode.js_runtime.v8_isolate import Isolate, V8Error
from codemode.js_runtime.worker_process import BLOCK_S
from codemode.tools.registry import ToolRegistry


def _v8(tmp_path: Path, on_event: Callable[[ExecEvent], None] | None = None, **kw) -> CodeSession:
    """A V8 code session with no tools, not persistent."""
    return registry_session(ToolRegistry(), tmp_path, engine="v8", on_event=on_event, **kw)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_posted_scripts_run_in_order_and_each_outcome_comes_back() -> None:
    isolate = Isolate(64 * 1024 * 1024)
    try:
        outcomes = isolate.finish(
            [
                isolate.post("globalThis.trail = ['a']; 'first'"),
                isolate.post("throw new TypeError('second failed')"),
                isolate.post("trail.push('c'); trail.join('')"),
                isolate.post("({not: 'a string'})"),
                isolate.post("let = ;"),
            ]
        )
    finally:
        isolate.close()
    first, second, third, fourth, fifth = outcomes
    assert first == "first"
    assert isinstance(second, V8Error) and second.kind == "execute"
    assert "TypeError: second failed" in str(second)
    assert third == "ac"  # the failure in between did not stop the queue
    assert fourth is None  # only strings are converted; the handle is freed
    assert isinstance(fifth, V8Error) and fifth.kind == "parse"


def test_kept_functions_are_called_in_order_with_posted_scripts() -> None:
    # What every tool call runs: functions taken once as values, called again and
    # again (no script compiled), in order with scripts posted around them.
    from codemode.js_runtime.v8_abi import ARRAY, FUNCTION

    isolate = Isolate(64 * 1024 * 1024)
    try:
        kept = [
            isolate.post("globalThis.n = 0; () => `n=${++n}`"),
            isolate.post("() => { throw new RangeError('kept and failing'); }"),
            isolate.post("[]"),
        ]
        isolate.wait(kept[-1])
        (count, count_kind), (fail, fail_kind), (no_args, args_kind) = (
            isolate.take_value(evaluation) for evaluation in kept
        )
        assert (count_kind, fail_kind, args_kind) == (FUNCTION, FUNCTION, ARRAY)
        outcomes = isolate.finish(
            [
                isolate.call(count, no_args),
                isolate.post("n += 10; 'posted'"),
                isolate.call(fail, no_args),
                isolate.call(count, no_args, isolate.reserve()),
            ]
        )
    finally:
        isolate.close()
    first, posted, failed, last = outcomes
    assert (first, posted, last) == ("n=1", "posted", "n=12")
    assert isinstance(failed, V8Error) and "RangeError: kept and failing" in str(failed)


def test_text_crosses_intact_both_ways() -> None:
    isolate = Isolate(64 * 1024 * 1024)
    try:
        (echoed,) = isolate.finish([isolate.post("'héllo ✓ 😀 ' + 'x'.repeat(100000)")])
        (empty,) = isolate.finish([isolate.post("''")])
    finally:
        isolate.close()
    assert echoed == "héllo ✓ 😀 " + "x" * 100000
    assert empty == ""


async def test_a_closed_isolate_refuses_work() -> None:
    isolate = Isolate(64 * 1024 * 1024)
    isolate.close()
    isolate.close()  # twice is fine
    with pytest.raises(RuntimeError, match="after close"):
        isolate.post("1")


async def test_the_event_loop_keeps_running_while_v8_computes(tmp_path: Path) -> None:
    # The loop's thread blocks on V8 for at most BLOCK_S per step; a long computation
    # is awaited, so other tasks (output, a TUI, other sessions) keep running. A loop
    # blocked for the computation would show one gap of 600 ms; the bound leaves room
    # for a loaded machine descheduling the loop now and then.
    session = _v8(tmp_path)
    try:
        with loop_ticks(0.01) as ticks:
            result = await run_program(
                session,
                "const end = Date.now() + 600; let n = 0; while (Date.now() < end) n++; "
                "return n > 0",
            )
    finally:
        await session.close()
    assert result.ok and result.value is True, result.error
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) >= 10, ticks
    assert max(gaps) < 0.3, max(gaps)
    assert BLOCK_S < 0.01


async def test_isolates_leave_no_threads_behind(tmp_path: Path) -> None:
    session = _v8(tmp_path)
    try:
        await run_program(session, "1")  # the library and V8 itself are loaded once per process
        before = _threads()
        for _ in range(15):
            result = await run_program(session, "return 6 * 7")
            assert result.value == 42
        timed_out = await run_program(session, "while (true) {}", limits=Limits(timeout_s=0.2))
        assert timed_out.error is not None and timed_out.error.limit == "timeout"
        assert _threads() <= before
    finally:
        await session.close()


async def test_console_output_streams_while_synchronous_code_runs(tmp_path: Path) -> None:
    # No await between the lines: only the live console can show them before the end.
    arrived: list[tuple[str, float]] = []

    def on_event(event: object) -> None:
        if isinstance(event, LogEvent):
            arrived.append((event.text, time.monotonic()))

    session = _v8(tmp_path, on_event)
    program = (
        "for (let i = 0; i < 4; i++) {\n"
        "  console.log(`tick ${i}`, {i});\n"
        "  const end = Date.now() + 150; while (Date.now() < end) {}\n"
        "}\n"
        "console.warn('\\uD800 lone'); return 'done'"
    )
    try:
        result = await run_program(session, program)
        finished = time.monotonic()
    finally:
        await session.close()
    assert result.ok and result.value == "done", result.error
    texts = [text for text, _ in arrived]
    assert texts[:4] == [f"tick {i} {{ i: {i} }}" for i in range(4)]
    assert texts[4] == "\ufffd lone"
    assert finished - arrived[0][1] > 0.3  # the first line came while the loop ran
    assert [e.level for e in result.logs] == ["log"] * 4 + ["warn"]
    assert result.output.splitlines()[0] == "tick 0 { i: 0 }"


async def test_more_console_output_than_the_live_buffer_holds(tmp_path: Path) -> None:
    # 400 lines of 2,000 characters overflow the 512 KB buffer within one step: the
    # rest waits for the drain, and nothing is lost or reordered.
    seen: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, LogEvent):
            seen.append(event.text)

    limits = Limits(output_chars=10_000_000)
    session = _v8(tmp_path, on_event, limits=limits)
    program = (
        "for (let i = 0; i < 400; i++) console.log(String(i).padStart(4, '0') + 'x'.repeat(1996));"
        "await new Promise((r) => setTimeout(r, 1));"  # a step boundary: the buffer starts over
        "for (let i = 0; i < 3; i++) console.log('after ' + i)"
    )
    try:
        result = await run_program(session, program)
    finally:
        await session.close()
    assert result.ok, result.error
    assert [line[:4] for line in seen[:400]] == [f"{i:04d}" for i in range(400)]
    assert all(len(line) == 2000 for line in seen[:400])
    assert seen[400:] == ["after 0", "after 1", "after 2"]


def test_without_a_log_sink_live_lines_come_back_in_the_state() -> None:
    from codemode.js_runtime.setup_head import head as _prelude
    from codemode.js_runtime.v8_engine import V8Engine

    engine = V8Engine(64 * 1024 * 1024)
    try:
        engine.step(_prelude() + "\n__cm.configure([], 10, {});")
        state = engine.step("console.log('a'); console.error('b')")
    finally:
        engine.close()
    assert json.loads(state)["logs"] == [["log", "a"], ["error", "b"]]


def test_preloading_overlaps_and_yields_the_same_library() -> None:
    # In a fresh process: the preload thread maps the library and starts V8 while the
    # main thread goes on; library() then waits for it and both see one library.
    code = (
        "import threading, time\n"
        "from codemode.js_runtime import v8_abi\n"
        "v8_abi.preload()\n"
        "started = time.perf_counter(); spins = 0\n"
        "while any(t.name == 'codemode-v8-preload' for t in threading.enumerate()):\n"
        "    spins += 1\n"  # the main thread kept running while the library loaded
        "lib = v8_abi.library()\n"
        "assert lib is v8_abi.library()\n"
        "print(spins > 1000, 'libmini_racer' in open('/proc/self/maps').read())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


async def test_a_settle_filed_before_its_post_returns_is_still_served(tmp_path: Path) -> None:
    # V8 can finish a short settle before the worker's main thread has recorded what it
    # posted; the chain must still serve it (it used to wait forever, about one program
    # in five of these: a step that fills the live buffer, then a timer's settle).
    session = _v8(tmp_path, lambda event: None, limits=Limits(timeout_s=10))
    program = (
        "for (let i = 0; i < 400; i++) console.log('x'.repeat(2000));"
        "await new Promise((r) => setTimeout(r, 1)); return 'served'"
    )
    try:
        for _ in range(30):
            result = await run_program(session, program)
            assert result.ok and result.value == "served", result.error
    finally:
        await session.close()


def test_the_v8_thread_keeps_one_python_thread_state_until_close() -> None:
    # Thread-local data lives in the thread state: without the hold ``_on_result``
    # takes, each callback would run under a new one and see none of it.
    local = threading.local()
    seen: list[int] = []

    def on_filed(callback_id: int) -> None:
        seen.append(getattr(local, "calls", 0))
        local.calls = getattr(local, "calls", 0) + 1

    isolate = Isolate(64 * 1024 * 1024)
    isolate.on_filed = on_filed
    try:
        for i in range(5):
            assert isolate.finish([isolate.post(f"'{i}'")]) == [str(i)]
        assert seen == [0, 1, 2, 3, 4]
    finally:
        isolate.close()
    # close gave the hold back, from a callback on that thread, and did not wait for it
    # in vain
    assert isolate._pin is None and isolate._unpinned.is_set()
