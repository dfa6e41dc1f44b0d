"""The code-mode contract, run against both engines."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from runtime_support import registry_session, run_program

from codemode.js_runtime import CodeSession, ExecResult, Limits, LogEvent, ToolCallFinished
from codemode.tools.registry import ToolRegistry

ENGINES = ["quickjs", "v8"]


def make_registry(seen_logs: list[str] | None = None) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool
    async def sleep(ms: int) -> dict:
        """Sleep for ms milliseconds."""
        began = time.monotonic()
        await asyncio.sleep(ms / 1000)
        return {"slept": ms, "began": began, "at": time.monotonic()}

    @reg.tool
    async def noop() -> dict:
        """Do nothing."""
        return {}

    @reg.tool
    async def boom(message: str = "kaboom") -> dict:
        """Always fails with a Python exception."""
        raise RuntimeError(message)

    @reg.tool
    async def shell(command: str, timeout_ms: int = 1000) -> dict:
        """A stand-in with the real shell tool's argument names, for validation tests."""
        return {"command": command}

    @reg.tool
    async def logs_seen() -> list:
        """What the on_event callback has received so far."""
        return list(seen_logs or [])

    return reg


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


def session(engine: str, tmp_path: Path, **kw) -> CodeSession:
    """A code session over ``make_registry()``'s tools, not persistent unless asked."""
    limits = kw.pop("limits", Limits(timeout_s=5, memory_mb=64))
    registry = kw.pop("registry", make_registry())
    return registry_session(registry, tmp_path, engine=engine, limits=limits, **kw)


async def run(engine: str, tmp_path: Path, code: str, **kw) -> ExecResult:
    """``code`` run to its end in a session of its own."""
    s = session(engine, tmp_path, **kw)
    try:
        return await run_program(s, code)
    finally:
        await s.close()


# -- async program, return value --------------------------------------------------


async def test_top_level_await_and_return(engine, tmp_path):
    r = await run(engine, tmp_path, "const a = await tools.sleep({ms: 1});\nreturn a.slept + 41")
    assert r.ok, r.error
    assert r.value == 42


async def test_bare_expression_is_its_own_value(engine, tmp_path):
    r = await run(engine, tmp_path, "await tools.sleep({ms: 1})")
    assert r.ok and r.value["slept"] == 1
    r = await run(engine, tmp_path, "[1, 2, 3].map(x => x * 2)")
    assert r.value == [2, 4, 6]


async def test_markdown_fences_are_stripped(engine, tmp_path):
    r = await run(engine, tmp_path, "```javascript\nconst x = 2;\nreturn x * 3;\n```\n")
    assert r.ok and r.value == 6
    r = await run(engine, tmp_path, "```js\n\nfoo()\n```")
    # line numbers refer to the text as sent, fence line included
    assert r.error.line == 3


async def test_tool_results_are_objects(engine, tmp_path):
    code = "const r = await tools.sleep({ms: 1}); return [typeof r, r.slept, Array.isArray(r)]"
    r = await run(engine, tmp_path, code)
    assert r.value == ["object", 1, False]


async def test_promise_all_runs_tools_concurrently(engine, tmp_path, burners):
    # Beside CPU burners: the calls overlap (all four started before any finished),
    # and the program takes less than the four sleeps one after another would.
    ms = 400
    code = f"""
    const t0 = Date.now();
    const rs = await Promise.all([1, 2, 3, 4].map(() => tools.sleep({{ms: {ms}}})));
    return {{elapsed: Date.now() - t0, n: rs.length, spans: rs.map(r => [r.began, r.at])}};
    """
    s = session(engine, tmp_path, persistent=True)
    try:
        # The worker's boot and the isolate's set-up (seconds, on a busy machine) are
        # not what is measured.
        assert (await run_program(s, "return 1")).ok
        r = await run_program(s, code)
    finally:
        await s.close()
    assert r.ok, r.error
    assert r.value["n"] == 4
    spans = r.value["spans"]
    assert max(began for began, _ in spans) < min(at for _, at in spans), spans
    assert r.value["elapsed"] < 4 * ms  # four sequential sleeps would take 4 * ms
    assert r.duration_ms < 4 * ms
    assert [c.name for c in r.tool_calls] == ["sleep"] * 4
    assert all(c.ok and c.duration_ms >= ms - 1 for c in r.tool_calls)


async def test_timers_go_through_the_host(engine, tmp_path):
    code = (
        "const t0 = Date.now(); await new Promise(r => setTimeout(r, 60)); return Date.now() - t0"
    )
    r = await run(engine, tmp_path, code)
    assert r.ok and r.value >= 55
    assert r.tool_calls == []  # timers are not tool calls


# -- console ----------------------------------------------------------------------


async def test_console_levels_in_order_and_objects_as_node_shows_them(engine, tmp_path):
    code = """
    console.log("one", 1);
    console.info({a: [1, 2]});
    console.warn("three");
    console.error(new Error("four"));
    print("five");
    await tools.noop();
    console.log(undefined, null, [undefined]);
    """
    r = await run(engine, tmp_path, code)
    assert r.ok, r.error
    assert [e.level for e in r.logs] == ["log", "info", "warn", "error", "log", "log"]
    assert r.logs[0].text == "one 1"
    assert r.logs[1].text == "{ a: [ 1, 2 ] }"
    assert "four" in r.logs[3].text
    assert r.logs[4].text == "five"
    assert r.logs[5].text == "undefined null [ undefined ]"


async def test_output_streams_while_the_program_runs(engine, tmp_path):
    seen: list[str] = []

    def on_event(ev):
        if isinstance(ev, LogEvent):
            seen.append(ev.text)

    code = (
        'console.log("before"); const s = await tools.logs_seen(); console.log("after"); return s'
    )
    r = await run(engine, tmp_path, code, registry=make_registry(seen), on_event=on_event)
    assert r.ok, r.error
    assert r.value == ["before"]  # delivered before the program reached its tool call
    assert seen == ["before", "after"]


async def test_tool_call_events(engine, tmp_path):
    events = []
    await run(
        engine, tmp_path, "await tools.sleep({ms: 5}); await tools.boom()", on_event=events.append
    )
    finished = [e.call for e in events if isinstance(e, ToolCallFinished)]
    assert [(c.name, c.ok) for c in finished] == [("sleep", True), ("boom", False)]
    assert [e.type for e in events].count("tool_call.started") == 2


async def test_output_cap_keeps_head_and_tail(engine, tmp_path):
    limits = Limits(timeout_s=5, memory_mb=64, output_chars=1000)
    code = "for (let i = 0; i < 1000; i++) console.log(`line ${i}`)"
    r = await run(engine, tmp_path, code, limits=limits)
    assert r.ok
    assert r.output_truncated
    assert r.output.startswith("line 0\nline 1\n")
    assert r.output.endswith("line 998\nline 999")
    assert "characters of output elided" in r.output
    assert len(r.output) < 1200
    assert any(e.level == "elided" for e in r.logs)


# -- limits -----------------------------------------------------------------------


def _cpu_burn_after(seconds: float) -> float:
    before = time.process_time()
    time.sleep(seconds)
    return time.process_time() - before


def _runs(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting to be reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


# The wall clock the limit cases run under. The memory cases get one they cannot reach
# first beside the burners (48 MB of strings takes milliseconds on a quiet machine,
# seconds with every core taken), so that hitting the memory limit is what is shown.
TIMEOUT_S = 1.0
MEMORY_CASE_TIMEOUT_S = 30.0


LIMIT_CASES = {
    "busy loop": ("while (true) {}", "timeout"),
    "loop after await": ("await tools.noop(); while (true) {}", "timeout"),
    "loop after timer": ("await new Promise(r => setTimeout(r, 5)); for(;;) {}", "timeout"),
    "allocation bomb": (
        "const a = []; while (true) a.push('x'.repeat(1000) + Math.random());",
        "memory",
    ),
    "tool call cap": ("for (let i = 0; i < 100; i++) await tools.noop();", "tool_calls"),
    "caught tool call cap": (
        "for (let i = 0; i < 100; i++) { try { await tools.noop() } catch (e) {} }",
        "tool_calls",
    ),
}


@pytest.mark.parametrize("case", list(LIMIT_CASES))
async def test_limits_stop_the_program_and_the_host_recovers(engine, tmp_path, case, burners_later):
    code, limit = LIMIT_CASES[case]
    timeout_s = MEMORY_CASE_TIMEOUT_S if limit == "memory" else TIMEOUT_S
    limits = Limits(timeout_s=timeout_s, memory_mb=48, max_tool_calls=20)
    s = session(engine, tmp_path, limits=limits, persistent=True)
    try:
        # A booted worker holding the isolate waits for the program: the boot (seconds
        # for V8 on a loaded machine) is not the program's time; the burners start after it.
        assert (await run_program(s, "globalThis.ready = 1")).ok
        worker = s._isolates._worker
        assert worker is not None
        burners_later.start()
        started = time.monotonic()
        # Bounded here too: were the limit not enforced, the test fails, not hangs.
        r = await asyncio.wait_for(run_program(s, code), 3 * timeout_s + 10)
        elapsed = time.monotonic() - started
        assert not r.ok
        assert r.error.kind == "limit" and r.error.limit == limit, r.error
        # Stopped by its limit: within its time limit plus a margin for the loaded
        # machine; the memory cap well before the long clock that case is given.
        bound = timeout_s / 2 if limit == "memory" else timeout_s + 3.0
        assert elapsed < bound, (elapsed, bound)
        words = {"timeout": "time limit", "memory": "memory limit", "tool_calls": "tool calls"}
        assert words[limit] in r.error.message
        # the host runs the next program normally
        nxt = await run_program(s, "const r = await tools.sleep({ms: 1}); return r.slept + 1")
        assert nxt.ok and nxt.value == 2, nxt.error
        # and nothing keeps burning CPU: the stopped program's worker is gone, and this
        # process is idle
        assert _cpu_burn_after(0.5) < 0.25
        assert not _runs(worker.pid)
    finally:
        await s.close()


KEPT_OUTPUT_CASES = {
    "busy loop": ('console.log("start"); while (true) {}', "timeout", ["start"]),
    "busy loop after await": (
        'console.log("start"); await tools.noop(); console.warn("again"); for (;;) {}',
        "timeout",
        ["start", "again"],
    ),
    "allocation bomb": (
        'console.log("before"); const a = []; while (true) a.push("x".repeat(1000) + a.length);',
        "memory",
        ["before"],
    ),
}


@pytest.mark.parametrize("case", list(KEPT_OUTPUT_CASES))
async def test_output_printed_before_a_limit_is_kept(engine, tmp_path, case, burners):
    # What a runaway program printed is what shows where it got to.
    code, limit, lines = KEPT_OUTPUT_CASES[case]
    seen: list[str] = []
    timeout_s = MEMORY_CASE_TIMEOUT_S if limit == "memory" else TIMEOUT_S
    r = await run(
        engine,
        tmp_path,
        code,
        limits=Limits(timeout_s=timeout_s, memory_mb=48),
        on_event=lambda e: seen.append(e.text) if e.type == "log" else None,
    )
    assert r.error is not None and r.error.limit == limit, r.error
    assert r.output.splitlines() == lines
    assert seen == lines


async def test_timeout_cancels_running_tools(engine, tmp_path, burners):
    limits = Limits(timeout_s=TIMEOUT_S)
    r = await run(engine, tmp_path, "await tools.sleep({ms: 5000})", limits=limits)
    assert r.error.limit == "timeout"
    assert r.tool_calls[0].ok is None and "cancelled" in r.tool_calls[0].error


# -- no ambient authority -----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["require", "process", "fetch", "XMLHttpRequest", "WebAssembly", "SharedArrayBuffer",
     "Atomics"],
)  # fmt: skip
async def test_no_ambient_globals(engine, tmp_path, name):
    r = await run(engine, tmp_path, f"return typeof {name}")
    assert r.ok and r.value == "undefined"
    r = await run(engine, tmp_path, f"{name}")
    assert r.error.name == "ReferenceError"


async def test_no_dynamic_import(engine, tmp_path):
    r = await run(engine, tmp_path, "const fs = await import('fs'); return typeof fs.readFileSync")
    assert not r.ok


async def test_no_static_import(engine, tmp_path):
    r = await run(engine, tmp_path, "import fs from 'fs';\nreturn 1")
    assert not r.ok and r.error.name == "SyntaxError"


async def test_function_constructor_cannot_reach_process(engine, tmp_path):
    r = await run(engine, tmp_path, "return this.constructor.constructor('return process')()")
    assert not r.ok and r.error.name == "ReferenceError"
    assert "process" in r.error.message
    r = await run(engine, tmp_path, "return Function('return typeof globalThis.process')()")
    assert r.value == "undefined"


# -- errors -----------------------------------------------------------------------


async def test_runtime_error_location_and_stack(engine, tmp_path):
    code = "const a = 1;\nfunction f() {\n  return missing.x;\n}\nf();"
    r = await run(engine, tmp_path, code)
    err = r.error
    assert err.name == "ReferenceError" and "missing" in err.message
    # QuickJS points at the identifier, V8 at the statement
    assert err.line == 3 and err.column in (3, 10)
    assert f"program.js:3:{err.column}" in err.stack and "program.js:5:" in err.stack
    assert "__cm" not in err.stack and "prelude" not in err.stack


async def test_syntax_error_location(engine, tmp_path):
    r = await run(engine, tmp_path, "const a = 1;\nconst b = = 2;")
    assert r.error.kind == "syntax" and r.error.name == "SyntaxError"
    assert r.error.line == 2
    assert r.error.column in (11, 12)
    assert r.error.one_line().startswith("SyntaxError at 2:")


async def test_thrown_non_error_value(engine, tmp_path):
    r = await run(engine, tmp_path, "throw {code: 7}")
    assert not r.ok and "code" in r.error.message


async def test_python_exception_reaches_js_as_error(engine, tmp_path):
    code = """
    try { await tools.boom({message: "disk on fire"}); }
    catch (e) { return {isError: e instanceof Error, isToolError: e instanceof ToolError,
                        name: e.name, message: e.message, tool: e.tool}; }
    """
    r = await run(engine, tmp_path, code)
    assert r.value == {
        "isError": True,
        "isToolError": True,
        "name": "ToolError",
        "message": "tools.boom failed: RuntimeError: disk on fire",
        "tool": "boom",
    }


async def test_uncaught_tool_error_points_at_the_call(engine, tmp_path):
    r = await run(engine, tmp_path, "const x = 1;\nawait tools.boom();")
    assert r.error.name == "ToolError" and r.error.line == 2
    assert "Traceback" not in r.error.stack and ".py" not in r.error.stack


async def test_validation_errors_name_the_field(engine, tmp_path):
    r = await run(engine, tmp_path, "await tools.shell({})")
    assert r.error.message == 'tools.shell: "command" is required'
    code = "try { await tools.shell({command: 1}) } catch (e) { return e.message }"
    r = await run(engine, tmp_path, code)
    assert r.value == 'tools.shell: "command" must be a string, got number'
    r = await run(engine, tmp_path, "await tools.shell({command: 'ls', cwd: '/'})")
    assert 'unknown field "cwd"' in r.error.message


async def test_unknown_tool_suggests_the_closest(engine, tmp_path):
    r = await run(engine, tmp_path, "\nawait tools.shel({command: 'ls'})")
    assert r.error.name == "TypeError"
    assert "tools.shel is not a function — did you mean tools.shell?" in r.error.message
    assert r.error.line == 2


async def test_hint_for_tool_called_as_a_global(engine, tmp_path):
    r = await run(engine, tmp_path, "await shell({command: 'ls'})")
    assert r.error.hint and "tools.shell" in r.error.hint


async def test_promise_that_never_settles_is_reported(engine, tmp_path):
    r = await run(engine, tmp_path, "await new Promise(() => {})")
    assert not r.ok and "never" not in r.error.message and "nothing will settle" in r.error.message


# -- persistence --------------------------------------------------------------------


async def test_persistent_globals_survive(engine, tmp_path):
    s = session(engine, tmp_path, persistent=True)
    try:
        assert (await run_program(s, "globalThis.counter = 41; seen = 'yes'")).ok
        r = await run_program(s, "return [++counter, seen]")
        assert r.value == [42, "yes"]
    finally:
        await s.close()


async def test_without_persistence_each_program_starts_fresh(engine, tmp_path):
    s = session(engine, tmp_path)
    try:
        await run_program(s, "globalThis.counter = 41")
        r = await run_program(s, "return typeof counter")
        assert r.value == "undefined"
    finally:
        await s.close()


async def test_lone_surrogates_become_replacement_characters(engine, tmp_path):
    r = await run(
        engine, tmp_path, 'console.log("a\\uD800b"); return {k: "\\uDFFFx", ok: "\\uD83D\\uDE00"}'
    )
    assert r.ok, r.error
    assert r.output == "a\ufffdb"
    assert r.value == {"k": "\ufffdx", "ok": "😀"}
    r.to_json().encode("utf-8")  # printable and storable as UTF-8


async def test_lone_surrogates_in_the_source_itself_do_not_crash_the_host(engine, tmp_path):
    # A model's JSON arguments can decode to a source holding a raw lone surrogate.
    r = await run(engine, tmp_path, 'return "x\ud800y"')
    assert r.ok, r.error
    assert r.value == "x\ufffdy"


async def test_a_hand_started_coroutine_resumes_in_a_task_or_an_await():
    from codemode.js_runtime.eager import resume

    loop = asyncio.get_running_loop()

    async def doubled(fut):
        return 2 * await fut

    for via_task in (True, False):
        fut = loop.create_future()
        coro = doubled(fut)
        waiting_on = coro.send(None)
        assert waiting_on is fut
        loop.call_soon(fut.set_result, 21)
        resumed = resume(coro, waiting_on)
        assert (await (asyncio.ensure_future(resumed) if via_task else resumed)) == 42

    # Cancelled before its Task ever ran: the future it waited on is cancelled too.
    fut = loop.create_future()
    coro = doubled(fut)
    task = asyncio.ensure_future(resume(coro, coro.send(None)))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fut.cancelled()
