"""Programs that outlive their yield time hand back control; ``wait`` comes back to them."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from codemode.agent.events import ItemCompleted, ItemUpdated
from codemode.agent.runner import ToolRunner
from codemode.harnesses.render import render_exec_result
from codemode.js_runtime import Completed, Limits, Terminated, Yielded
from codemode.js_runtime.cells import yield_time_ms
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.registry import ToolRegistry
from codemode_testkit.scripted_server import RecordedRequest

ENGINES = ["quickjs", "v8"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


def runner(engine: str, tmp_path: Path, events: list[BaseModel], **kw: object) -> ToolRunner:
    return ToolRunner(
        ToolRegistry(), ToolContext(workspace=tmp_path), events.append, engine=engine,
        limits=Limits(timeout_s=kw.pop("timeout_s", 30.0)),  # type: ignore[arg-type]
        yield_time_ms=kw.pop("yield_ms", 300),  # type: ignore[arg-type]
    )


# A first program that may take as long as it needs: the engine process is up (V8's
# boot alone can outlast a 300 ms yield on a busy machine) before any clock that a
# test asserts on starts.
WARM_UP = '// @exec: {"yield_time_ms": 120000}\nreturn "ready"'


async def warm(r: ToolRunner) -> None:
    result = await r.run_program(WARM_UP)
    assert isinstance(result, Completed) and result.result.value == "ready", result


def test_the_pragma_sets_the_yield_time() -> None:
    assert yield_time_ms('// @exec: {"yield_time_ms": 1500}\nreturn 1', 20_000) == 1500
    assert yield_time_ms("return 1", 20_000) == 20_000
    assert yield_time_ms('// @exec: {"yield_time_ms": "soon"}\n', 7) == 7
    assert yield_time_ms("// @exec: not json\n", 7) == 7


async def test_a_long_program_yields_and_wait_returns_on_new_output(
    engine: str, tmp_path: Path
) -> None:
    events: list[BaseModel] = []
    r = runner(engine, tmp_path, events)
    try:
        await warm(r)
        code = (
            "console.log('one');\n"
            "await new Promise(r => setTimeout(r, 1000)); console.log('two');\n"
            "await new Promise(r => setTimeout(r, 1000)); return 'done'"
        )
        first = await r.run_program(code)
        assert isinstance(first, Yielded) and first.cell_id and first.output == "one"
        assert "still running as cell" in render_exec_result(first)
        assert any(isinstance(e, ItemUpdated) for e in events)  # shown as still running
        # Another program is refused while the cell runs (it would wait on the isolate).
        with pytest.raises(ToolError, match="still running"):
            await r.run_program("return 1")
        started = time.monotonic()
        second = await r.wait_program(first.cell_id, 10_000)
        # Back on the new line, long before the 10 s the model allowed.
        assert isinstance(second, Yielded) and second.output == "two"
        assert time.monotonic() - started < 5
        last = await r.wait_program(first.cell_id, 10_000)
        assert isinstance(last, Completed) and last.ok and last.output == ""
        assert last.result.value == "done" and last.result.output == "one\ntwo"
        done = [e for e in events if isinstance(e, ItemCompleted)]
        assert done[-1].item.status == "completed"
        with pytest.raises(ToolError, match="no running cell"):
            await r.wait_program(first.cell_id)
    finally:
        r.close()


async def test_wait_with_nothing_new_returns_at_its_yield_time(engine: str, tmp_path: Path) -> None:
    r = runner(engine, tmp_path, [])
    try:
        await warm(r)
        first = await r.run_program("while (true) {}")
        assert isinstance(first, Yielded)
        started = time.monotonic()
        still = await r.wait_program(first.cell_id, 500)
        assert isinstance(still, Yielded) and still.output == ""
        assert 0.4 < time.monotonic() - started < 3
        stopped = await r.wait_program(first.cell_id, terminate=True)
        assert isinstance(stopped, Terminated) and stopped.cell_id == first.cell_id
        assert "terminated" in render_exec_result(stopped)
        after = await r.run_program("return 'next'")
        assert isinstance(after, Completed) and after.result.value == "next"
    finally:
        r.close()


async def test_the_wall_clock_limit_holds_across_yields(engine: str, tmp_path: Path) -> None:
    r = runner(engine, tmp_path, [], timeout_s=1.5, yield_ms=200)
    try:
        await warm(r)
        first = await r.run_program("console.log('x'); while (true) {}")
        assert isinstance(first, Yielded)
        started = time.monotonic()
        result = first
        while isinstance(result, Yielded):
            result = await r.wait_program(first.cell_id, 10_000)
        assert isinstance(result, Completed)
        assert result.error is not None and result.error.limit == "timeout"
        assert time.monotonic() - started < 3
    finally:
        r.close()


async def test_a_quick_program_does_not_yield(engine: str, tmp_path: Path) -> None:
    r = runner(engine, tmp_path, [])
    try:
        await warm(r)
        code = (
            '// @exec: {"yield_time_ms": 5000}\n'
            "await new Promise(r => setTimeout(r, 500)); return 7"
        )
        result = await r.run_program(code)
        assert isinstance(result, Completed) and result.ok and result.result.value == 7
    finally:
        r.close()


@pytest.mark.timing
async def test_cancelling_a_turn_stops_its_cell(engine: str, tmp_path: Path) -> None:
    r = runner(engine, tmp_path, [], yield_ms=60_000)
    try:
        await warm(r)
        task = asyncio.create_task(r.run_program("globalThis.k = 1; while (true) {}"))
        await asyncio.sleep(1.0)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 0.5
        after = await r.run_program("return typeof k")
        assert isinstance(after, Completed) and after.result.value == "undefined"
    finally:
        r.close()


def test_exec_json_shows_a_yielded_program_and_wait_finishes_it(
    home: Path, work: Path
) -> None:
    from agent_support import call, provider_flags, run_cli

    from codemode_testkit.scripted_server import ScriptedModelServer

    program = (
        '// @exec: {"yield_time_ms": 300}\n'
        "console.log('early'); await new Promise(r => setTimeout(r, 2000)); return 'late'"
    )
    # The first program only starts the engine, as long as that takes; the 300 ms yield
    # is measured on the second. Each reply answers the request that came.
    replies = iter([
        lambda _: {"tool_calls": [call("exec", {"code": WARM_UP})]},
        lambda _: {"tool_calls": [call("exec", {"code": program})]},
        lambda r: {"tool_calls": [call("wait", {"cell_id": _cell_id(r), "yield_time_ms": 20000})]},
        lambda _: {"text": "done"},
    ])

    def script(request: RecordedRequest) -> object:
        return next(replies)(request)

    with ScriptedModelServer(script) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--code-mode", "--json", "go"],
            home=home, cwd=work,
        )
        bodies = [r.body for r in server.requests]
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert "ready" in json.dumps(bodies[1]["messages"][-1])  # the warm-up finished
    updated = [e for e in events if e["type"] == "item.updated"]
    assert updated and updated[0]["item"]["status"] == "in_progress"
    assert updated[0]["item"]["output"] == "early"
    first_result = json.dumps(bodies[2]["messages"][-1])
    cell = _cell_id_in(first_result)
    assert cell and "early" in first_result
    second_result = json.dumps(bodies[3]["messages"][-1])
    assert "late" in second_result
    completed = [e["item"] for e in events if e["type"] == "item.completed"
                 and e["item"]["type"] == "code_execution"]
    assert [c["value"] for c in completed] == ["ready", "late"]


def _cell_id_in(text: str) -> str | None:
    match = re.search(r"still running as cell (\w+)", text)
    return match.group(1) if match else None


def _cell_id(request: RecordedRequest) -> str:
    """The cell id the last tool result named (the wait call's argument)."""
    return _cell_id_in(json.dumps(request.body["messages"][-1])) or "missing"


@pytest.mark.parametrize("as_json", [True, False])
def test_a_session_that_ends_with_a_cell_running_closes_it_cleanly(
    home: Path, work: Path, as_json: bool
) -> None:
    """The model answers while its program still runs: `exec` ends, the cell and the
    command it started stop, and nothing reports after the session has closed (once a
    traceback: "I/O operation on closed file")."""
    from agent_support import call, provider_flags, run_cli, session_files

    from codemode_testkit.scripted_server import ScriptedModelServer

    marker = work / "still-running"
    program = (
        '// @exec: {"yield_time_ms": 300}\n'
        "console.log('started');\n"
        f"await tools.shell({{command: 'sleep 30; touch {marker}'}});"
    )
    replies = iter([
        lambda _: {"tool_calls": [call("exec", {"code": WARM_UP})]},
        lambda _: {"tool_calls": [call("exec", {"code": program})]},
        lambda _: {"text": "leaving it running"},
    ])
    with ScriptedModelServer(lambda request: next(replies)(request)) as server:
        flags = ["--json"] if as_json else []
        started = time.monotonic()
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--code-mode", *flags, "go"],
            home=home, cwd=work,
        )
        elapsed = time.monotonic() - started
        bodies = [r.body for r in server.requests]
    assert run.code == 0, run.stderr
    assert "still running as cell" in json.dumps(bodies[2]["messages"][-1])
    assert "Traceback" not in run.stderr and "closed file" not in run.stderr, run.stderr
    assert "Traceback" not in run.stdout
    assert elapsed < 25  # the 30 s command did not hold the exit
    time.sleep(0.5)
    assert not marker.exists()  # the command was stopped, not left behind
    # The session file records the program as ended by the session's end.
    recorded = [json.loads(line) for line in session_files(home)[-1].read_text().splitlines()]
    programs = [r for r in recorded if "code_execution" in json.dumps(r)
                and "item.completed" in json.dumps(r)]
    assert programs and "interrupted" in json.dumps(programs[-1])
