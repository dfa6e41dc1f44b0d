"""console.log shows values as Node's util.inspect does, in both engines: the lossy
JSON rendering printed a Set as [1], a Map as {"a":1}, a RegExp as {}, undefined as
null and 1n as 1. Each case is what Node prints for the same call."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_runtime import ENGINES, run

CASES = {
    "new Set([1])": "Set(1) { 1 }",
    "new Map([['a', 1]])": "Map(1) { 'a' => 1 }",
    "new Map()": "Map(0) {}",
    "/re/g": "/re/g",
    "undefined": "undefined",
    "[undefined, null]": "[ undefined, null ]",
    "1n": "1n",
    "-0": "-0",
    "Symbol('s')": "Symbol(s)",
    "{u: undefined, n: null}": "{ u: undefined, n: null }",
    "function f() {}": "[Function: f]",
    "() => 1": "[Function (anonymous)]",
    "async function g() {}": "[AsyncFunction: g]",
    "class A {}": "[class A]",
    "new (class Foo { constructor() { this.a = 1; } })()": "Foo { a: 1 }",
    "Object.create(null)": "[Object: null prototype] {}",
    "new Date(0)": "1970-01-01T00:00:00.000Z",
    "{a: {b: {c: {d: 1}}}}": "{ a: { b: { c: [Object] } } }",
    "[[1, [2, [3, [4]]]]]": "[ [ 1, [ 2, [Array] ] ] ]",
    "{s: \"it's\", n: 'a\\nb', 'a-b': 2}": "{ s: \"it's\", n: 'a\\nb', 'a-b': 2 }",
    "[ , 1]": "[ <1 empty item>, 1 ]",
    "new Uint8Array([1, 2])": "Uint8Array(2) [ 1, 2 ]",
    "new Number(3)": "[Number: 3]",
    "({get g() { return 1; }})": "{ g: [Getter] }",
    "(() => { const o = {name: 'x'}; o.self = o; return o; })()":
        "<ref *1> { name: 'x', self: [Circular *1] }",
    "Array.from({length: 120}, () => 0).length": "120",
}


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_values_print_as_node_prints_them(engine: str, tmp_path: Path) -> None:
    code = "\n".join(f"console.log({expr});" for expr in CASES)
    r = await run(engine, tmp_path, code)
    assert r.ok, r.error
    got = [e.text for e in r.logs]
    assert got == list(CASES.values())


async def test_big_objects_break_into_lines_and_long_arrays_into_columns(
    engine: str, tmp_path: Path
) -> None:
    code = """
    console.log({long: "x".repeat(50), other: "y".repeat(40), third: 1});
    console.log(Array.from({length: 30}, (_, i) => i));
    console.log(Array.from({length: 101}, (_, i) => "item"));
    """
    r = await run(engine, tmp_path, code)
    assert r.ok, r.error
    assert r.logs[0].text == (
        "{\n  long: '" + "x" * 50 + "',\n  other: '" + "y" * 40 + "',\n  third: 1\n}"
    )
    assert r.logs[1].text.splitlines() == [
        "[",
        "   0,  1,  2,  3,  4,  5,  6,  7,  8,",
        "   9, 10, 11, 12, 13, 14, 15, 16, 17,",
        "  18, 19, 20, 21, 22, 23, 24, 25, 26,",
        "  27, 28, 29",
        "]",
    ]
    assert r.logs[2].text.endswith("  ... 1 more item\n]")


async def test_format_strings_and_errors(engine: str, tmp_path: Path) -> None:
    code = """
    console.log("%s is %d, %i%% sure: %o %j", "Bob", 42, 99.5, {x: 1}, {y: [2]});
    console.log("100%", "literal");
    const e = new Error("boom");
    console.log(e);
    console.log({err: new TypeError("inner")});
    """
    r = await run(engine, tmp_path, code)
    assert r.ok, r.error
    assert r.logs[0].text == 'Bob is 42, 99% sure: { x: 1 } {"y":[2]}'
    assert r.logs[1].text == "100% literal"
    lines = r.logs[2].text.splitlines()
    assert lines[0] == "Error: boom"
    # The stack is in the program's own lines: `new Error` is on line 4 of the program.
    assert lines[1].startswith("    at program.js:4:"), lines
    assert "codemode-prelude" not in r.logs[2].text and "__cm" not in r.logs[2].text
    assert r.logs[3].text == "{ err: [TypeError: inner] }"


async def test_a_program_cannot_break_the_console_by_patching_builtins(
    engine: str, tmp_path: Path
) -> None:
    code = """
    Array.prototype.join = function () { return {not: "a string"}; };
    console.log({a: 1}, [1, 2]);
    return "still running";
    """
    r = await run(engine, tmp_path, code)
    assert r.ok, r.error
    assert r.value == "still running"
    assert all(isinstance(e.text, str) for e in r.logs)
