"""The runtime's one API, ``CodeSession``: every outcome of execute/wait/terminate on
both engines, nested calls through a delegate, limits beside CPU burners, bad cell ids,
and close with a cell still running."""

from __future__ import annotations

import asyncio
import time

import pytest
from cpu_burners import Burners

from codemode.js_runtime import (
    AlreadyWaiting,
    CellBusy,
    CodeSession,
    Completed,
    ExecEvent,
    Limits,
    NestedCall,
    Terminated,
    ToolSet,
    UnknownCell,
    Yielded,
)
from codemode.tool_terms.errors import ToolError

ENGINES = ["quickjs", "v8"]
# Generous: the first program also waits for its engine process to boot, which on a
# loaded machine (V8) can take seconds.
WARM_UP_S = 120.0


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


class Delegate:
    """Runs ``echo``, ``fail`` and ``slow``; records every call and notification."""

    def __init__(self) -> None:
        self.calls: list[NestedCall] = []
        self.events: list[tuple[str, ExecEvent]] = []
        self.cancelled: list[str] = []

    async def call_tool(self, call: NestedCall) -> object:
        self.calls.append(call)
        if call.name == "fail":
            raise ToolError("the tool said no")
        if call.name == "slow":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled.append(call.cell_id)
                raise
        return {"echo": call.args}

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        self.events.append((cell_id, event))

    def kinds(self, cell_id: str) -> list[str]:
        return [e.type for c, e in self.events if c == cell_id]


def session(engine: str, delegate: Delegate, **kw: object) -> CodeSession:
    return CodeSession(
        delegate,
        tools=ToolSet(("echo", "fail", "slow")),
        engine=engine,
        limits=kw.pop("limits", Limits(timeout_s=30)),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


async def warm(s: CodeSession) -> None:
    outcome = await s.execute("return 'ready'", yield_time=WARM_UP_S)
    assert isinstance(outcome, Completed) and outcome.result.value == "ready", outcome


async def test_completed_with_a_value_and_nested_calls_through_the_delegate(
    engine: str,
) -> None:
    d = Delegate()
    s = session(engine, d)
    try:
        outcome = await s.execute(
            "console.log('hi'); const [a, b] = await Promise.all("
            "[tools.echo({n: 1}), tools.echo({n: 2})]); return [a.echo.n, b.echo.n]",
            yield_time=WARM_UP_S,
        )
    finally:
        await s.close()
    assert isinstance(outcome, Completed) and outcome.ok
    assert outcome.result.value == [1, 2] and outcome.output == "hi"
    assert sorted(c.args["n"] for c in d.calls) == [1, 2]  # type: ignore[index]
    assert {c.cell_id for c in d.calls} == {outcome.cell_id}
    kinds = d.kinds(outcome.cell_id)
    assert kinds[0] == "cell.started" and kinds[-1] == "cell.finished"
    assert kinds.count("tool_call.started") == 2 and "log" in kinds


async def test_completed_with_an_error_a_tool_error_and_a_thrown_one(engine: str) -> None:
    d = Delegate()
    s = session(engine, d)
    try:
        await warm(s)
        caught = await s.execute("try { await tools.fail({}) } catch (e) { return e.message }")
        thrown = await s.execute("const x = 1;\nthrow new Error('boom-42')")
    finally:
        await s.close()
    assert isinstance(caught, Completed) and caught.result.value == "the tool said no"
    assert isinstance(thrown, Completed) and not thrown.ok
    assert thrown.error is not None and thrown.error.message == "boom-42"
    assert thrown.error.line == 2


async def test_yielded_then_waited_to_completion(engine: str) -> None:
    d = Delegate()
    s = session(engine, d)
    try:
        await warm(s)
        code = (
            "console.log('one'); await new Promise(r => setTimeout(r, 800));"
            " console.log('two'); await new Promise(r => setTimeout(r, 800)); return 'done'"
        )
        first = await s.execute(code, yield_time=0.3)
        assert isinstance(first, Yielded) and first.output == "one"
        assert s.running() == [first.cell_id]
        # A persistent session runs one program at a time.
        with pytest.raises(CellBusy):
            await s.execute("return 1", yield_time=1)
        started = time.monotonic()
        second = await s.wait(first.cell_id, yield_time=20)
        # Back as soon as there is new output, long before the 20 s allowed.
        assert isinstance(second, Yielded) and second.output == "two"
        assert time.monotonic() - started < 10
        last = await s.wait(first.cell_id, yield_time=20)
        assert isinstance(last, Completed) and last.ok and last.output == ""
        assert last.result.value == "done" and last.result.output == "one\ntwo"
        with pytest.raises(UnknownCell):
            await s.wait(first.cell_id)
        assert s.running() == []
    finally:
        await s.close()


async def test_terminated_stops_a_busy_cell_and_its_nested_calls(engine: str) -> None:
    d = Delegate()
    s = session(engine, d)
    try:
        await warm(s)
        busy = await s.execute("globalThis.k = 1; while (true) {}", yield_time=0.3)
        assert isinstance(busy, Yielded)
        waited = await s.wait(busy.cell_id, yield_time=0.3)
        assert isinstance(waited, Yielded) and waited.output == ""
        stopped = await s.terminate(busy.cell_id)
        assert isinstance(stopped, Terminated) and stopped.cell_id == busy.cell_id
        assert "cell.finished" not in d.kinds(busy.cell_id)
        calling = await s.execute("await tools.slow({})", yield_time=0.5)
        assert isinstance(calling, Yielded)
        assert isinstance(await s.terminate(calling.cell_id), Terminated)
        assert d.cancelled == [calling.cell_id]  # the nested call was cancelled too
        with pytest.raises(UnknownCell):
            await s.terminate(calling.cell_id)
        # The session goes on (the stopped isolate's globals are gone).
        after = await s.execute("return typeof k", yield_time=WARM_UP_S)
        assert isinstance(after, Completed) and after.result.value == "undefined"
    finally:
        await s.close()


async def test_one_waiter_at_a_time_and_a_cancelled_wait_leaves_the_cell(engine: str) -> None:
    d = Delegate()
    s = session(engine, d)
    try:
        await warm(s)
        code = "await new Promise(r => setTimeout(r, 1500)); return 3"
        cell = await s.execute(code, yield_time=0.1)
        assert isinstance(cell, Yielded)
        waiter = asyncio.create_task(s.wait(cell.cell_id, yield_time=30))
        await asyncio.sleep(0.1)
        with pytest.raises(AlreadyWaiting):
            await s.wait(cell.cell_id)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        done = await s.wait(cell.cell_id, yield_time=30)
        assert isinstance(done, Completed) and done.result.value == 3
        # A waiter whose cell is terminated meanwhile hears so.
        busy = await s.execute("while (true) {}", yield_time=0.1)
        assert isinstance(busy, Yielded)
        waiting = asyncio.create_task(s.wait(busy.cell_id, yield_time=30))
        await asyncio.sleep(0.1)
        assert isinstance(await s.terminate(busy.cell_id), Terminated)
        assert isinstance(await waiting, Terminated)
    finally:
        await s.close()


async def test_cells_run_side_by_side_in_a_session_that_is_not_persistent(engine: str) -> None:
    d = Delegate()
    s = session(engine, d, persistent=False)
    try:
        await warm(s)
        slow = "await new Promise(r => setTimeout(r, 1000)); return 'slow'"
        a = await s.execute(slow, yield_time=0.1)
        b = await s.execute("return 'quick'", yield_time=WARM_UP_S)
        assert isinstance(a, Yielded)
        assert isinstance(b, Completed) and b.result.value == "quick"
        done = await s.wait(a.cell_id, yield_time=30)
        assert isinstance(done, Completed) and done.result.value == "slow"
    finally:
        await s.close()


async def test_tools_and_max_output_per_execute(engine: str) -> None:
    d = Delegate()
    s = session(engine, d)
    try:
        await warm(s)
        other = ToolSet(("only",), {"ns": {"inner": "ns__inner"}})
        names = await s.execute("return Object.keys(tools)", tools=other)
        assert isinstance(names, Completed) and names.result.value == ["only", "ns"]
        await s.execute("return await tools.ns.inner({})", tools=other)
        assert d.calls[-1].name == "ns__inner"
        # The next program without ``tools`` sees the session's own again.
        back = await s.execute("return Object.keys(tools)")
        assert isinstance(back, Completed) and back.result.value == ["echo", "fail", "slow"]
        big = await s.execute("console.log('x'.repeat(5000))", max_output=1000)
        assert isinstance(big, Completed) and big.result.output_truncated
        assert len(big.output) < 1200 and "characters of output elided" in big.output
    finally:
        await s.close()


async def test_the_time_limit_holds_across_yields_beside_cpu_burners(
    engine: str, burners_later: Burners
) -> None:
    d = Delegate()
    s = session(engine, d, limits=Limits(timeout_s=2.0))
    try:
        await warm(s)
        burners_later.start()
        started = time.monotonic()
        outcome = await s.execute("console.log('x'); while (true) {}", yield_time=0.2)
        assert isinstance(outcome, Yielded)
        while isinstance(outcome, Yielded):
            outcome = await s.wait(outcome.cell_id, yield_time=30)
        elapsed = time.monotonic() - started
        assert isinstance(outcome, Completed)
        assert outcome.error is not None and outcome.error.limit == "timeout"
        # Stopped by its own 2 s limit, not by the 30 s wait (generous: loaded machine).
        assert elapsed < 12, elapsed
    finally:
        await s.close()


async def test_close_stops_a_running_cell_and_its_calls(engine: str) -> None:
    d = Delegate()
    s = session(engine, d)
    await warm(s)
    cell = await s.execute("console.log('a'); await tools.slow({})", yield_time=0.5)
    assert isinstance(cell, Yielded)
    started = time.monotonic()
    await s.close()
    assert time.monotonic() - started < 5
    assert d.cancelled == [cell.cell_id]
    assert s.running() == []
    with pytest.raises(RuntimeError, match="closed"):
        await s.execute("return 1")
