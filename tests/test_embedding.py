"""The embedding API as a framework author meets it: tools from plain and async
functions, their declarations, results that are not JSON, syntax errors, cells, calls the
caller runs, and the model-facing tool. Real isolates, real worker processes."""

from __future__ import annotations

import datetime as dt
import enum
import sys
import threading
import time
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel
from runtime_support import loop_ticks
from typing_extensions import TypedDict as TypedDictExt

from codemode import ToolHost
from codemode.js_runtime import Completed, Outcome, Terminated, Yielded


@pytest.fixture
def host(tmp_path: Path) -> typing.Iterator[ToolHost]:
    with ToolHost(tmp_path) as h:
        yield h


class Point(TypedDictExt):
    x: float
    y: float


class Ticket(BaseModel):
    id: int
    title: str


async def test_plain_functions_run_off_the_event_loop(host: ToolHost) -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    @host.tool
    def slow_price(sku: str) -> float:
        """A blocking lookup (a database call, say)."""
        seen.append(threading.get_ident())
        time.sleep(0.3)
        return 9.5 if sku == "A1" else 1.0

    @host.tool
    async def fast(n: int) -> int:
        """An async one."""
        return n * 2

    with loop_ticks(0.01) as ticks:
        result = await host.execute(
            "const [a, b] = await Promise.all([tools.slow_price({sku: 'A1'}),"
            " tools.fast({n: 21})]); return [a, b]"
        )
    assert result.ok, result.error
    assert result.value == [9.5, 42]
    assert seen and seen[0] != loop_thread
    assert len(ticks) >= 6  # the loop kept running while the plain function slept


def test_result_declarations_from_return_annotations(host: ToolHost) -> None:
    @host.tool
    def total() -> float:
        "A sum."
        return 1.0

    @host.tool
    def names() -> list[str]:
        "Some names."
        return []

    @host.tool
    def settings() -> dict:  # type: ignore[type-arg]
        "Anything."
        return {}

    @host.tool
    def where() -> Point:
        "A point."
        return {"x": 0, "y": 0}

    @host.tool
    async def tickets() -> list[Ticket]:
        "Tickets."
        return []

    @host.tool
    def nothing() -> None:
        "Returns nothing."

    dts = host.typescript()
    assert "total(args?: TotalArgs): Promise<number>;" in dts
    assert "names(args?: NamesArgs): Promise<string[]>;" in dts
    assert "settings(args?: SettingsArgs): Promise<Record<string, unknown>>;" in dts
    assert "x: number;" in dts and "y: number;" in dts
    assert "where(args?: WhereArgs): Promise<" in dts and "Promise<unknown>" not in dts.split(
        "where(args?: WhereArgs)"
    )[1].split("\n")[0]
    assert "interface Ticket {" in dts
    assert "tickets(args?: TicketsArgs): Promise<Ticket[]>;" in dts
    assert "nothing(args?: NothingArgs): Promise<unknown>;" in dts
    # argv is `interpreter run`'s, not an embedder's
    assert "argv" not in dts


class Legacy(typing.TypedDict):  # pydantic refuses it on Python < 3.12
    a: int


class Opaque:
    pass


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="typing.TypedDict works on 3.12+")
def test_bad_annotation_is_refused_when_registered(host: ToolHost) -> None:
    with pytest.raises(TypeError, match=r"tool 'move'.*parameter 'to'.*typing_extensions"):

        @host.tool
        def move(to: Legacy) -> None:
            "Move."

    with pytest.raises(TypeError, match=r"tool 'locate'.*return annotation"):

        @host.tool
        def locate() -> Legacy:
            "Locate."
            return {"a": 1}

    assert host.registry.get("move") is None and host.registry.get("locate") is None
    host.typescript()  # the host still declares its other tools


def test_an_arbitrary_class_is_refused_when_registered(host: ToolHost) -> None:
    with pytest.raises(TypeError, match=r"tool 'give'.*return annotation Opaque"):

        @host.tool
        def give() -> Opaque:
            "Give."
            return Opaque()


class Colour(enum.Enum):
    RED = "red"


@dataclass
class Stamp:
    at: dt.datetime
    path: Path


async def test_non_json_values_follow_the_stated_rule(host: ToolHost) -> None:
    when = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)

    @host.tool
    def stamp() -> dict:  # type: ignore[type-arg]
        "A stamp."
        return {
            "stamp": Stamp(when, Path("a/b")),
            "day": dt.date(2024, 5, 2),
            "colour": Colour.RED,
            "tags": {"x"},
            "span": dt.timedelta(minutes=1),
        }

    @host.tool
    def raw() -> dict:  # type: ignore[type-arg]
        "Bytes."
        return {"blob": b"\x00\x01"}

    @host.tool
    def odd() -> object:
        "An object."
        return {"thing": threading.Lock()}

    result = await host.execute("return await tools.stamp()")
    assert result.ok, result.error
    assert result.value == {
        "stamp": {"at": "2024-05-01T12:00:00+00:00", "path": "a/b"},
        "day": "2024-05-02",
        "colour": "red",
        "tags": ["x"],
        "span": 60.0,
    }
    for name, where in (("raw", "result.blob"), ("odd", "result.thing")):
        result = await host.execute(f"return await tools.{name}()")
        assert result.error is not None
        message = result.error.message
        assert f"tools.{name} returned" in message and where in message, message
        assert "no JSON form" in message
    result = await host.execute("return await tools.raw()")
    assert result.error is not None and "base64" in result.error.message


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
@pytest.mark.parametrize(
    ("source", "line", "column"),
    [("return (", 1, 9), ("const a = 1;\nfoo(a,", 2, 7), ("x = {", 1, 6), ("1 +", 1, 4)],
)
async def test_syntax_errors_point_into_the_program(
    tmp_path: Path, engine: str, source: str, line: int, column: int
) -> None:
    with ToolHost(tmp_path, engine=engine) as host:
        result = await host.execute(source)
    error = result.error
    assert error is not None and error.kind == "syntax"
    assert (error.line, error.column) == (line, column), error
    assert "}" not in error.message and ")" not in error.message  # the wrapper's, not its
    assert "end of the program" in error.message


async def test_a_mid_program_syntax_error_keeps_its_own_position(host: ToolHost) -> None:
    result = await host.execute("const a = 1;\nlet b = ;\nreturn a")
    assert result.error is not None
    assert (result.error.line, result.error.column) == (2, 9)
    assert "';'" in result.error.message


async def test_cells_yield_wait_and_terminate(host: ToolHost) -> None:
    slow = (
        "console.log('started');"
        "await new Promise(r => setTimeout(r, 600));"
        "console.log('half');"
        "await new Promise(r => setTimeout(r, 600));"
        "return 'done'"
    )
    first = await host.start(slow, yield_time_ms=100)
    assert isinstance(first, Yielded)
    seen = [first.output]
    outcome: Outcome = first
    while isinstance(outcome, Yielded):
        outcome = await host.wait(first.cell_id, yield_time_ms=5_000)
        seen.append(outcome.output)
    assert isinstance(outcome, Completed)
    assert outcome.ok and outcome.result.value == "done"
    # each line handed back once, in order, across the yields
    assert "\n".join(seen).split() == ["started", "half"]
    assert len(seen) >= 2
    with pytest.raises(LookupError, match="no running cell"):
        await host.wait(first.cell_id)

    quick = await host.start("return 1 + 1", yield_time_ms=5_000)
    assert isinstance(quick, Completed) and quick.result.value == 2

    forever = await host.start(
        "console.log('spin'); while (true) { await new Promise(r => setTimeout(r, 10)) }",
        yield_time_ms=100,
    )
    assert isinstance(forever, Yielded)
    started = time.monotonic()
    stopped = await host.terminate(forever.cell_id)
    assert time.monotonic() - started < 10
    assert isinstance(stopped, Terminated) and stopped.cell_id == forever.cell_id
    # the host goes on
    again = await host.execute("return 'still here'")
    assert again.value == "still here"


async def test_the_caller_runs_the_tools(host: ToolHost) -> None:
    @host.tool
    async def price(sku: str) -> float:
        "Never run by the host in delegated mode."
        raise AssertionError("the host ran a delegated call")

    program = host.delegate(
        "const skus = ['A1', 'B2', 'C3'];"
        "const prices = await Promise.all(skus.map(sku => tools.price({sku})));"
        "let refused = null;"
        "try { await tools.price({sku: 'ZZ'}) } catch (e) { refused = e.message }"
        "let bad = null;"
        "try { await tools.price({sku: 5}) } catch (e) { bad = e.message }"
        "return {prices, refused, bad}"
    )
    handed: list[tuple[str, object]] = []
    batch_sizes: list[int] = []
    async for call in program:
        handed.append((call.name, call.args))
        batch_sizes.append(len(program.pending))
        assert isinstance(call.args, dict)
        if call.args["sku"] == "ZZ":
            call.fail("no such product")
        else:
            call.respond({"A1": 1.5, "B2": 2.5, "C3": 3.5}[call.args["sku"]])
    result = await program.result()
    assert result.ok, result.error
    assert result.value["prices"] == [1.5, 2.5, 3.5]
    assert result.value["refused"] == "tools.price: no such product"
    assert '"sku" must be a string' in result.value["bad"]  # checked before it is handed out
    assert [a for _, a in handed] == [{"sku": s} for s in ("A1", "B2", "C3", "ZZ")]
    assert batch_sizes[0] == 3  # Promise.all: all three pending at once
    assert [c.name for c in result.tool_calls] == ["price"] * 5


async def test_async_close_waits_for_a_running_cell(tmp_path: Path) -> None:
    async with ToolHost(tmp_path) as host:
        running = await host.start(
            "while (true) { await new Promise(r => setTimeout(r, 10)) }", yield_time_ms=50
        )
        assert isinstance(running, Yielded)
    assert host.session.running() == []
    with pytest.raises(RuntimeError, match="closed"):
        await host.execute("return 1")


async def test_leaving_a_delegated_program_early_stops_it(host: ToolHost) -> None:
    program = host.delegate("await tools.read_file({path: 'x'}); return 'no'")
    async for call in program:
        assert call.name == "read_file"
        break
    result = await program.result()
    assert not result.ok and result.error is not None and result.error.name == "Terminated"
    assert program.done


async def test_model_tool_describes_and_runs(host: ToolHost) -> None:
    @host.tool
    def word_count(text: str) -> int:
        "Count the words in a text."
        return len(text.split())

    tool = host.model_tool()
    assert tool.name == "execute"
    assert "word_count(args: WordCountArgs): Promise<number>;" in tool.description
    assert "console.log" in tool.description and "argv" not in tool.description
    assert tool.parameters["required"] == ["code"]
    text = await tool.handler(
        "console.log('hi'); return await tools.word_count({text: 'a b c'})"
    )
    assert text.startswith("hi\n[return value]\n3\n[1 tool call,")
    failed = await tool("const x = 1;\nx.nope()")
    assert "[error]" in failed and "TypeError" in failed and "x.nope()" in failed
    assert tool.function_schema()["function"]["name"] == "execute"
