"""The runtime's per-execution delegate and yield rule: each program's nested calls and
notifications reach the delegate of the execution that started it (two owners side by
side in one session, none routed by the session's caller), and a cell whose rule is
``"request"`` hands control back only when asked, when its yield time passes, or when it
ends — never for output alone."""

from __future__ import annotations

import asyncio
import time

import pytest

from codemode.js_runtime import (
    CodeSession,
    Completed,
    ExecEvent,
    Limits,
    NestedCall,
    ToolSet,
    Yielded,
)

WARM_UP_S = 120.0


class Owner:
    """One program's owner: answers ``whoami`` with its name, records what it hears."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[NestedCall] = []
        self.events: list[tuple[str, ExecEvent]] = []

    async def call_tool(self, call: NestedCall) -> object:
        self.calls.append(call)
        await asyncio.sleep(0.05)  # let the other program's calls interleave
        return self.name

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        self.events.append((cell_id, event))


def _session(**kw: object) -> CodeSession:
    return CodeSession(
        tools=ToolSet(("whoami",)),
        limits=Limits(timeout_s=60),
        persistent=False,
        **kw,  # type: ignore[arg-type]
    )


async def test_each_execution_reaches_its_own_delegate_side_by_side() -> None:
    s = _session()
    try:
        warm = await s.execute("return 1", delegate=Owner("warm"), yield_time=WARM_UP_S)
        assert isinstance(warm, Completed)
        a, b = Owner("a"), Owner("b")
        code = (
            "const seen = [];"
            " for (let i = 0; i < 5; i++) { const w = await tools.whoami({i}); console.log(w);"
            " seen.push(w); } return seen.join('')"
        )
        out_a, out_b = await asyncio.gather(
            s.execute(code, delegate=a), s.execute(code, delegate=b)
        )
        assert isinstance(out_a, Completed) and out_a.result.value == "aaaaa", out_a
        assert isinstance(out_b, Completed) and out_b.result.value == "bbbbb", out_b
        # Every call and every notification of a program carried its own cell's id and
        # went to its own owner, and nowhere else.
        assert {c.cell_id for c in a.calls} == {out_a.cell_id} and len(a.calls) == 5
        assert {c.cell_id for c in b.calls} == {out_b.cell_id} and len(b.calls) == 5
        assert {cell for cell, _ in a.events} == {out_a.cell_id}
        assert {cell for cell, _ in b.events} == {out_b.cell_id}
        kinds = [e.type for _, e in a.events]
        assert kinds[0] == "cell.started" and kinds[-1] == "cell.finished", kinds
        assert kinds.count("log") == 5
    finally:
        await s.close()


async def test_an_execution_without_any_delegate_is_refused() -> None:
    s = _session()
    try:
        with pytest.raises(ValueError, match="delegate"):
            await s.execute("return 1")
    finally:
        await s.close()


async def test_the_session_default_delegate_serves_executions_that_name_none() -> None:
    default = Owner("default")
    s = _session(delegate=default)
    try:
        out = await s.execute("return await tools.whoami({})", yield_time=WARM_UP_S)
        assert isinstance(out, Completed) and out.result.value == "default"
        own = Owner("own")
        out = await s.execute("return await tools.whoami({})", delegate=own)
        assert isinstance(out, Completed) and out.result.value == "own"
        assert len(default.calls) == 1 and len(own.calls) == 1
    finally:
        await s.close()


async def test_a_request_rule_cell_yields_when_asked_not_for_output() -> None:
    s = _session()
    owner = Owner("o")
    try:
        warm = await s.execute("return 1", delegate=owner, yield_time=WARM_UP_S)
        assert isinstance(warm, Completed)
        code = (
            "for (let i = 0; i < 400; i++) { console.log('tick ' + i);"
            " await new Promise(r => setTimeout(r, 25)); } return 'end'"
        )
        started = time.monotonic()
        first = await s.execute(code, delegate=owner, yield_time=0.6, yield_when="request")
        # Output came all along; control came back only when the yield time passed.
        assert isinstance(first, Yielded), first
        assert time.monotonic() - started >= 0.55
        assert "tick 0" in first.output
        # With a long yield time and output streaming, a wait returns once asked.
        waiting = asyncio.ensure_future(s.wait(first.cell_id, yield_time=60))
        await asyncio.sleep(0.5)
        assert not waiting.done(), "a request-rule wait returned on output alone"
        s.request_yield(first.cell_id)
        second = await asyncio.wait_for(waiting, 30)
        assert isinstance(second, Yielded) and "tick" in second.output
        # The request was answered: the next wait does not return at once.
        waiting = asyncio.ensure_future(s.wait(first.cell_id, yield_time=0.5))
        started = time.monotonic()
        third = await waiting
        assert isinstance(third, Yielded) and time.monotonic() - started >= 0.45
        terminated = await s.terminate(first.cell_id)
        assert terminated.kind == "terminated"
    finally:
        await s.close()


async def test_an_output_rule_cell_still_yields_on_new_output() -> None:
    s = _session()
    owner = Owner("o")
    try:
        warm = await s.execute("return 1", delegate=owner, yield_time=WARM_UP_S)
        assert isinstance(warm, Completed)
        code = "await new Promise(r => setTimeout(r, 300)); console.log('late');"
        code += " await new Promise(r => setTimeout(r, 60000));"
        first = await s.execute(code, delegate=owner, yield_time=0.05)
        assert isinstance(first, Yielded)
        started = time.monotonic()
        second = await s.wait(first.cell_id, yield_time=60)
        assert isinstance(second, Yielded) and second.output == "late"
        assert time.monotonic() - started < 30
        await s.terminate(first.cell_id)
    finally:
        await s.close()


async def test_a_program_asking_to_yield_in_its_first_wait_comes_back_early() -> None:
    s = _session()
    owner = Owner("o")
    try:
        warm = await s.execute("return 1", delegate=owner, yield_time=WARM_UP_S)
        assert isinstance(warm, Completed)
        code = "console.log('a'); await tools.whoami({});"
        code += " await new Promise(r => setTimeout(r, 60000));"

        class Asking(Owner):
            async def call_tool(self, call: NestedCall) -> object:
                s.request_yield(call.cell_id)  # as a host does on the program's request
                return "x"

        started = time.monotonic()
        first = await s.execute(code, delegate=Asking("q"), yield_time=60, yield_when="request")
        assert isinstance(first, Yielded) and first.output == "a"
        assert time.monotonic() - started < 30
        await s.terminate(first.cell_id)
    finally:
        await s.close()
