"""One reply's tool calls run in the order the model wrote them (agent/call_order.py):
reads overlap, anything that may change something runs alone between them. Real
coroutines on a real event loop, with the order of starts and ends recorded."""

from __future__ import annotations

import asyncio

from codemode.agent.call_order import run_in_order


async def test_reads_overlap_and_a_write_runs_alone_in_its_place() -> None:
    log: list[str] = []

    async def execute(call: str) -> str:
        log.append(f"start {call}")
        await asyncio.sleep(0.01 if call != "r2" else 0.03)
        log.append(f"end {call}")
        return call.upper()

    calls = ["r1", "r2", "w", "r3", "r4", "x"]
    outcomes = await run_in_order(calls, execute, lambda call: call.startswith("r"))

    assert outcomes == ["R1", "R2", "W", "R3", "R4", "X"]  # in the calls' order
    # r1 and r2 both started before either ended: they ran together.
    assert log.index("start r2") < log.index("end r1")
    # The write started only after both reads before it ended, and ended before r3.
    assert log.index("start w") > max(log.index("end r1"), log.index("end r2"))
    assert log.index("start r3") > log.index("end w")
    assert log.index("start r4") < log.index("end r3")
    # The last call, which may change anything, waited for the reads before it.
    assert log.index("start x") > max(log.index("end r3"), log.index("end r4"))


async def test_an_unknown_or_running_call_is_never_run_beside_another() -> None:
    running = 0
    most = 0

    async def execute(call: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.005)
        running -= 1
        return call

    assert await run_in_order(list(range(5)), execute, lambda call: False) == list(range(5))
    assert most == 1
