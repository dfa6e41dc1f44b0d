"""The engine host: programs run in confined worker processes, limits held from outside.

Every test runs real worker processes on both engines. The limit and cancellation
tests start their own CPU burners (one per core) and assert bounds with margins.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cpu_burners import Burners
from runtime_support import registry_session, run_program

from codemode.js_runtime import CodeSession, ExecEvent, Limits, LogEvent
from codemode.tools.registry import ToolRegistry

ENGINES = ["quickjs", "v8"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool
    async def noop() -> dict:
        """Do nothing."""
        return {}

    @reg.tool
    async def echo(text: str) -> dict:
        """Give the text back."""
        return {"text": text}

    @reg.tool
    async def take(value: object = None) -> object:
        """Give the value back."""
        return value

    return reg


def make(
    engine: str,
    tmp_path: Path,
    on_event: Callable[[ExecEvent], None] | None = None,
    **limits: float,
) -> CodeSession:
    """A code session over ``registry()``'s tools; not persistent (a fresh isolate per
    program, programs at once in workers of their own)."""
    values = {"timeout_s": 5.0, "memory_mb": 64, **limits}
    return registry_session(
        registry(),
        tmp_path,
        engine=engine,
        limits=Limits(**values),  # type: ignore[arg-type]
        on_event=on_event,
    )


def no_host_detail(text: str) -> None:
    assert "Traceback" not in text and ".py" not in text and str(ROOT) not in text, text


# --- the worker holds no authority ---------------------------------------------------


def _as_user(user: str) -> list[str]:
    if user == "as-is":
        return []
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the probe as an unprivileged user")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.parametrize("user", ["as-is", "nobody"])
def test_a_confined_worker_is_refused_each_forbidden_call(engine: str, user: str) -> None:
    probe = subprocess.run(
        [*_as_user(user), sys.executable, "-m", "codemode_testkit.worker_probe", engine],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert probe.returncode == 0, probe.stderr
    results = json.loads(probe.stdout)
    assert results.pop("engine works") == "42"
    assert results.pop("thread") is True  # threads still start (V8 needs them)
    assert results.pop("clone3") == 38  # ENOSYS: the C library falls back to clone
    refused = {name: code for name, code in results.items() if code == 1}  # EPERM
    assert refused == results, f"allowed: {set(results) - set(refused)}"


def test_a_system_call_through_the_x32_abi_kills_the_worker() -> None:
    probe = subprocess.run(
        [sys.executable, "-m", "codemode_testkit.worker_probe", "quickjs", "x32"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert probe.returncode == -signal.SIGSYS, (probe.returncode, probe.stdout)


async def test_programs_run_in_another_process(engine: str, tmp_path: Path) -> None:
    session = make(engine, tmp_path)
    try:
        # The isolate cannot see the host's pid, so ask the OS who the worker is.
        result = await run_program(session, "return 1")
        assert result.ok
        worker = session._isolates._idle[0]
        assert worker.pid != os.getpid() and worker.alive()
        status = Path(f"/proc/{worker.pid}/status").read_text()
        assert "Seccomp:\t2" in status  # filter mode
        # None of the host's environment (API keys) reaches the worker.
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
        names = {e.split(b"=", 1)[0] for e in environ if e}
        assert names <= {b"CODEMODE_WORKER_PATH"}, names
    finally:
        await session.close()


async def test_the_worker_keeps_no_file_it_inherited(engine: str, tmp_path: Path) -> None:
    # Whatever this process holds open and inheritable (a file, a socket a launcher
    # passed down) stays here: the worker keeps only its pipes.
    secret = tmp_path / "secret.txt"
    fd = os.open(secret, os.O_CREAT | os.O_RDWR)
    os.set_inheritable(fd, True)
    try:
        # A memory cap of its own: no spare started earlier can serve it.
        session = registry_session(
            registry(), tmp_path, engine=engine, persistent=True, limits=Limits(memory_mb=73)
        )
    finally:
        os.close(fd)
    try:
        assert (await run_program(session, "return 1")).ok  # booted, confined, serving
        assert session._isolates._worker is not None
        fds = Path(f"/proc/{session._isolates._worker.pid}/fd")
        held = {os.readlink(f) for f in fds.iterdir()}
        assert str(secret) not in held, held
        assert not [h for h in held if h.startswith("socket:")], held
    finally:
        await session.close()


# --- limits from outside ---------------------------------------------------------------

RUNAWAYS = {
    "busy loop": "console.log('start'); while (true) {}",
    "huge sort": "console.log('start'); const a = []; a.length = 2 ** 31; return a.sort().length",
    "regex": "console.log('start'); return /(a+)+$/.test('a'.repeat(40) + 'b')",
    "after an await": "console.log('start'); await tools.noop(); while (true) {}",
}


@pytest.mark.parametrize("kind", list(RUNAWAYS))
async def test_the_wall_clock_limit_holds_under_load(
    engine: str, kind: str, tmp_path: Path, burners_later: Burners
) -> None:
    seen: list[str] = []
    session = make(
        engine,
        tmp_path,
        on_event=lambda e: seen.append(e.text) if isinstance(e, LogEvent) else None,
        timeout_s=2.0,
    )
    try:
        # A booted worker waits for the program (as the pool's spares do): a busy
        # machine's boot is not the program's time and is not what is measured here.
        assert (await run_program(session, "return 1")).ok
        burners_later.start()
        started = time.monotonic()
        result = await run_program(session, RUNAWAYS[kind])
        elapsed = time.monotonic() - started
        assert result.error is not None and result.error.limit == "timeout", result.error
        # The bound: `--timeout 2` ends within 2.5 s with both cores busy.
        assert elapsed < 2.5, elapsed
        assert seen == ["start"]  # what it printed before is shown
        after = await run_program(session, "return 'next'")
        assert after.ok and after.value == "next"
    finally:
        await session.close()


async def test_the_tool_call_cap_is_counted_outside_the_isolate(
    engine: str, tmp_path: Path
) -> None:
    session = make(engine, tmp_path, max_tool_calls=3)
    try:
        result = await run_program(
            session,
            "__cm.configure(Object.keys(tools), 1e9);"
            "for (let i = 0; i < 10; i++) await tools.noop(); return 'all ten'",
        )
        assert result.error is not None and result.error.limit == "tool_calls"
        assert len(result.tool_calls) == 3
    finally:
        await session.close()


async def test_replaced_internals_give_a_clean_error(engine: str, tmp_path: Path) -> None:
    session = make(engine, tmp_path)
    programs = [
        "JSON.stringify = () => 'garbage'; await tools.noop(); return 1",
        "__cm.drain = () => '{'; await tools.noop(); return 1",
        "Map.prototype.get = () => { throw new Error('x') }; await tools.noop(); return 1",
        "Array.prototype.push = function () { return 0 }; await tools.noop(); return 2",
        "Object.defineProperty(Object.prototype, 'calls', {get() { return 5 }}); return 3",
    ]
    try:
        for program in programs:
            result = await run_program(session, program)
            text = result.error.one_line() if result.error else json.dumps(result.value)
            no_host_detail(text)
        assert (await run_program(session, "return 'fine'")).value == "fine"
    finally:
        await session.close()


async def test_the_return_value_is_capped_head_and_tail(engine: str, tmp_path: Path) -> None:
    session = make(engine, tmp_path, output_chars=1000)
    try:
        result = await run_program(session, "return 'H' + 'x'.repeat(200000) + 'T'")
        assert result.ok and result.value_truncated
        assert len(result.value) < 1200
        assert result.value.startswith("Hxx") and result.value.endswith("xxT")
        assert "elided" in result.value
    finally:
        await session.close()


async def test_typed_arrays_do_not_escape_the_memory_cap(engine: str, tmp_path: Path) -> None:
    session = make(engine, tmp_path, memory_mb=64, timeout_s=30)
    try:
        result = await run_program(
            session,
            "const kept = []; try { for (let i = 0; i < 6; i++)"
            " kept.push(new Uint8Array(256 << 20).fill(1)); }"
            " catch (e) { return 'refused after ' + kept.length } return 'held ' + kept.length",
        )
        if result.ok:
            assert result.value.startswith("refused after ") and int(result.value.split()[-1]) < 2
        else:
            assert result.error.limit == "memory", result.error
        assert (await run_program(session, "return 1")).ok
    finally:
        await session.close()


# --- crashes and hostile programs ------------------------------------------------------


async def test_an_engine_abort_fails_one_program(engine: str, tmp_path: Path) -> None:
    session = make(engine, tmp_path, memory_mb=256, timeout_s=60)
    try:
        result = await run_program(session, 'return "x".repeat(2 ** 28).split("").length')
        assert not result.ok
        assert result.error.one_line().startswith(("LimitError", "EngineCrashed")), result.error
        no_host_detail(result.error.one_line())
        assert (await run_program(session, "return 'alive'")).value == "alive"
    finally:
        await session.close()


async def test_a_segfaulting_worker_is_replaced(engine: str, tmp_path: Path) -> None:
    session = registry_session(registry(), tmp_path, engine=engine, persistent=True)
    try:
        # Booted first: the signal is for a worker running the program, not one still
        # starting (which a loaded machine can take seconds over).
        assert (await run_program(session, "return 1")).ok
        task = asyncio.create_task(run_program(session, "while (true) {}"))
        await asyncio.sleep(0.5)
        os.kill(session._isolates._worker.pid, signal.SIGSEGV)
        result = await task
        assert result.error is not None
        assert result.error.one_line() == "EngineCrashed: the JavaScript engine crashed (SIGSEGV)"
        after = await run_program(session, "return 2")
        assert after.ok and after.value == 2
    finally:
        await session.close()


HOSTILE_ARGS = {
    "throwing getter": "{get x() { throw new Error('boom') }}",
    "throwing proxy": "new Proxy({}, {ownKeys() { throw new Error('boom') }})",
    "throwing toJSON": "{toJSON() { throw new Error('boom') }}",
}


@pytest.mark.parametrize("kind", list(HOSTILE_ARGS))
async def test_hostile_arguments_throw_where_the_program_can_catch(
    engine: str, kind: str, tmp_path: Path
) -> None:
    session = make(engine, tmp_path)
    try:
        program = (
            "await tools.noop();\n"
            f"try {{ await tools.echo({HOSTILE_ARGS[kind]}); }}"
            " catch (e) { return 'caught ' + e.message }"
        )
        result = await run_program(session, program)
        assert result.ok, result.error
        assert result.value.startswith("caught tools.echo: arguments cannot be sent: boom")
        uncaught = await run_program(
            session, f"await tools.noop();\nawait tools.echo({HOSTILE_ARGS[kind]})"
        )
        assert uncaught.error is not None and uncaught.error.line == 2, uncaught.error
        no_host_detail(uncaught.error.one_line())
    finally:
        await session.close()


async def test_a_call_without_arguments_still_meets_a_planted_to_json(
    engine: str, tmp_path: Path
) -> None:
    # A call without arguments sends "{}" without serializing anything, unless the
    # program gave every object a toJSON: then it is serialized as before.
    session = make(engine, tmp_path)
    try:
        plain = await run_program(session, "await tools.take(); return 1")
        assert plain.ok and plain.tool_calls[0].args == {}, plain.error
        planted = await run_program(
            session,
            "Object.defineProperty(Object.prototype, 'toJSON', "
            "{value() { return {value: 'planted'} }});\nreturn await tools.take()",
        )
        assert planted.tool_calls and planted.tool_calls[0].args == {"value": "planted"}
    finally:
        await session.close()


async def test_deep_cyclic_and_bigint_arguments(engine: str, tmp_path: Path) -> None:
    session = make(engine, tmp_path)
    try:
        deep = await run_program(
            session,
            "let v = {}; for (let i = 0; i < 5000; i++) v = {v};\n"
            "try { await tools.echo({text: 'a', v}); return 'sent' }"
            " catch (e) { return e.message }",
        )
        assert deep.ok, deep.error
        no_host_detail(str(deep.value))
        cyclic = await run_program(
            session, "const a = {text: 'c'}; a.self = a; return (await tools.take({value: a}))"
        )
        assert cyclic.ok and cyclic.value == {"text": "c", "self": "[Circular]"}, cyclic.error
        big = await run_program(session, "return await tools.take({value: 10n ** 30n})")
        assert big.ok and big.value == "1" + "0" * 30, big.error
        deep_value = await run_program(
            session, "let v = 1; for (let i = 0; i < 5000; i++) v = [v]; return v"
        )
        # Too deep to send: a clean error, or a value saying it cannot be shown.
        no_host_detail(deep_value.error.one_line() if deep_value.error else deep_value.value)
    finally:
        await session.close()


# --- cancel means stop ---------------------------------------------------------------


@pytest.mark.parametrize("persistent", [False, True])
async def test_cancel_stops_a_busy_program_at_once(
    engine: str, persistent: bool, tmp_path: Path, burners_later: Burners
) -> None:
    printed = asyncio.Event()
    seen: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, LogEvent):
            seen.append(event.text)
            printed.set()

    session = registry_session(
        registry(),
        tmp_path,
        engine=engine,
        persistent=persistent,
        limits=Limits(timeout_s=60),
        on_event=on_event,
    )
    try:
        task = asyncio.create_task(run_program(session, "console.log('start'); while (true) {}"))
        await asyncio.wait_for(printed.wait(), 20)
        burners_later.start()
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        elapsed = time.monotonic() - cancelled_at
        # The bound: 200 ms, with both cores busy.
        assert elapsed < 0.2, elapsed
        assert seen == ["start"]
        after = await run_program(session, "return 'next'")
        assert after.ok and after.value == "next"
    finally:
        await session.close()


async def test_concurrent_programs_in_one_session_run_in_their_own_workers(
    engine: str, tmp_path: Path
) -> None:
    session = make(engine, tmp_path)
    try:
        # A worker booted and kept idle, and the pool's spare beside it: what is shown
        # is that the second program does not wait for the first, not how long a boot
        # takes on a loaded machine.
        assert (await run_program(session, "return 1")).ok
        slow = asyncio.create_task(
            run_program(
                session, "const t = Date.now(); while (Date.now() - t < 1500) {} return 'slow'"
            )
        )
        await asyncio.sleep(0.2)
        started = time.monotonic()
        quick = await run_program(session, "globalThis.mine = 1; return 'quick'")
        assert quick.value == "quick" and time.monotonic() - started < 1.0
        assert not slow.done()  # it ran beside the first, not after it
        assert (await slow).value == "slow"
    finally:
        await session.close()


async def test_the_live_console_cannot_be_aimed_elsewhere(tmp_path: Path) -> None:
    seen: list[str] = []
    session = make(
        "v8", tmp_path, on_event=lambda e: seen.append(e.text) if isinstance(e, LogEvent) else None
    )
    try:
        result = await run_program(
            session,
            "const swapped = __cm.live(new ArrayBuffer(64));\nconsole.log('after'); return swapped",
        )
        assert result.ok and result.value is None  # refused: the host keeps its own buffer
        assert seen == ["after"]
    finally:
        await session.close()


async def test_a_huge_result_is_refused_before_the_host_holds_it(tmp_path: Path) -> None:
    from codemode.js_runtime import worker_process

    session = make("quickjs", tmp_path, memory_mb=256, timeout_s=60)
    try:
        size = worker_process.MAX_FRAME + (1 << 20)
        result = await run_program(session, f"return 'z'.repeat({size})")
        assert result.error is not None and result.error.name == "LimitError", result.error
        assert "MB at once" in result.error.message
        many = await run_program(
            session,
            "for (let i = 0; i < 20000; i++) await new Promise(r => setTimeout(r, 0)); return 'ok'",
        )
        assert many.ok and many.value == "ok", many.error  # timers waiting, not timers ever
    finally:
        await session.close()


async def test_a_huge_error_message_is_clipped(engine: str, tmp_path: Path) -> None:
    session = make(engine, tmp_path)
    try:
        result = await run_program(session, "throw new Error('e'.repeat(5000000))")
        assert result.error is not None and len(result.error.one_line()) < 10_000
        assert "elided" in result.error.message
    finally:
        await session.close()
