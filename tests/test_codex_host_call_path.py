"""The order of work on a nested call's path, which decides how long a program that
awaits its calls one by one waits for this process (docs/codex-host.md, "Each nested
call"): the tool's result reaches the engine worker before anything else its arrival set
going, and the client's ``CompleteToolCall`` is answered after that, while the worker
runs the program on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection

from codemode.codex_host.framed.protocol import ArrivalReader, FramedConnection
from codemode.codex_host.framed.session import FramedSession
from codemode.codex_host.grpc.service import CodeModeHostService
from codemode.codex_host.grpc.session import GrpcSession
from codemode.codex_host.session.runtime import CodexSession, SessionLimits
from codemode.codex_host.wire.grpc_status import Method
from codemode.codex_host.wire.h2_connection import Connection
from codemode.host.sessions import delegated_session
from codemode.js_runtime import protocol as p
from codemode.js_runtime.delegate import NestedCall, ToolSet
from codemode.js_runtime.models import Limits
from codemode.js_runtime.nested import NestedCalls
from codemode.js_runtime.outcome import Completed
from codemode.js_runtime.worker_process import Worker

PATH = "/test.Service/Complete"


def _one_call_waiting_on_a_gate() -> tuple[NestedCalls, asyncio.Future[object]]:
    """A program's one call, whose tool waits on the gate returned (the client's answer)."""
    gate: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    async def call_tool(call: NestedCall) -> object:
        return await gate

    calls = NestedCalls("1", call_tool, None, max_calls=10)
    calls.start([], [[1, "t", "{}"]])
    return calls, gate


async def test_a_result_is_sent_in_the_step_of_the_call_that_finished() -> None:
    loop = asyncio.get_running_loop()
    calls, gate = _one_call_waiting_on_a_gate()
    order: list[object] = []

    def send(results: list[list[object]]) -> str:
        order.append(("sent", results))
        return "sent"

    waiting = asyncio.ensure_future(calls.settled(send))
    await asyncio.sleep(0)  # the program now waits on its call
    gate.set_result(42)
    # Queued behind the call's own wake-up: the results must be out before it runs
    # (a turn of the loop later, in the waiting program's task, was the old way).
    loop.call_soon(order.append, "next turn")
    assert await waiting == "sent"
    assert order == [("sent", [[1, True, 42]]), "next turn"]


async def test_results_ready_before_the_program_waits_go_at_once() -> None:
    async def call_tool(call: NestedCall) -> object:
        return call.args

    calls = NestedCalls("1", call_tool, None, max_calls=10)
    calls.start([], [[1, "t", '{"a": 1}'], [2, "t", "{}"]])  # both finish eagerly
    sent: list[list[list[object]]] = []
    assert await calls.settled(lambda results: sent.append(results) or len(results)) == 2
    assert sent == [[[1, True, {"a": 1}], [2, True, {}]]]


async def test_a_broken_engine_pipe_reaches_the_waiting_program() -> None:
    calls, gate = _one_call_waiting_on_a_gate()

    def send(results: list[list[object]]) -> bool:
        raise BrokenPipeError("the engine is gone")

    waiting = asyncio.ensure_future(calls.settled(send))
    await asyncio.sleep(0)
    gate.set_result(1)
    try:
        await waiting
    except BrokenPipeError as exc:
        assert "engine is gone" in str(exc)
    else:
        raise AssertionError("the send's failure was lost")


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        pass


async def test_an_immediate_rpcs_answer_is_made_after_what_its_handler_woke() -> None:
    loop = asyncio.get_running_loop()
    result: asyncio.Future[object] = loop.create_future()
    order: list[str] = []

    def complete(request: Any) -> Any:
        result.set_result(request)

        class Reply:
            def SerializeToString(self) -> bytes:
                return b""

        return Reply()

    async def program() -> None:
        await result  # as a nested call's task waits on the client's completion
        order.append("result delivered")

    methods = {PATH: Method(deserialize=bytes, handler=complete, streaming=False, immediate=True)}
    conn = Connection(methods)
    transport = _Transport()
    conn.attach(transport.write, transport.close)
    made = conn.h2.send_headers

    def send_headers(stream_id: int, headers: Any, end_stream: bool = False) -> None:
        order.append("trailers made" if end_stream else "answer made")
        made(stream_id, headers, end_stream=end_stream)

    conn.h2.send_headers = send_headers  # type: ignore[method-assign]
    waiter = asyncio.ensure_future(program())
    await asyncio.sleep(0)

    client = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    client.initiate_connection()
    client.send_headers(
        1,
        [
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", PATH.encode()),
            (b":authority", b"test"), (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ],
    )  # fmt: skip
    client.send_data(1, b"\x00\x00\x00\x00\x02hi", end_stream=True)
    client.receive_data(b"".join(transport.written))  # the server's SETTINGS
    seen = len(transport.written)
    conn.data_received(client.data_to_send())
    await waiter
    for _ in range(3):
        await asyncio.sleep(0)
    assert order == ["result delivered", "answer made", "trailers made"]
    # ... and the answer did go out, whole.
    events = client.receive_data(b"".join(transport.written[seen:]))
    kinds = [type(e).__name__ for e in events]
    assert "ResponseReceived" in kinds and "TrailersReceived" in kinds
    assert any(
        getattr(e, "headers", None) and (b"grpc-status", b"0") in e.headers for e in events
    )


# -- WAKE: the engine worker is told a result is coming ---------------------------------


def _cpu_ns(pid: int) -> int:
    """The time ``pid`` has run on a CPU (``/proc/PID/schedstat``, nanoseconds)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


async def test_a_wake_is_not_answered_and_the_request_after_it_is() -> None:
    worker = Worker("quickjs", 64 << 20)
    try:
        worker.wake()
        op, _ = await asyncio.wait_for(worker.request(p.OPEN, "1", None), 30)
        assert op in (p.STATE, p.ERROR)
        await asyncio.sleep(0.05)
        assert not worker._read(), "the worker answered its WAKE"
        worker.wake()  # a WAKE then nothing: the worker polls a while, then sleeps
        await asyncio.sleep(0.2)
        op, _ = await asyncio.wait_for(worker.request(p.STEP, "2", None), 30)
        assert op in (p.STATE, p.ERROR)
    finally:
        worker.kill()


async def test_a_wake_keeps_the_worker_polling_a_millisecond_at_most() -> None:
    worker = Worker("quickjs", 64 << 20)
    try:
        await asyncio.wait_for(worker.request(p.OPEN, "1", None), 30)
        await asyncio.sleep(0.1)
        before = _cpu_ns(worker.pid)
        worker.wake()
        await asyncio.sleep(0.3)
        # Polling for the announced request ends after 1 ms (less on a busy machine,
        # where it does not poll at all); nothing announced keeps it running.
        assert _cpu_ns(worker.pid) - before < 30_000_000
    finally:
        worker.kill()


def test_a_wake_is_sent_once_per_request_and_never_blocks() -> None:
    worker = Worker.__new__(Worker)
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)  # as a Worker's request pipe is
        worker.dead, worker._woken, worker._rest, worker._in = False, False, None, write_end
        worker.wake()
        worker.wake()
        os.set_blocking(read_end, False)
        assert os.read(read_end, 100) == p.HEADER.pack(0, p.WAKE)
        # Never in the middle of a request the worker has not taken whole.
        worker._woken, worker._rest = False, memoryview(b"rest of a request")
        worker.wake()
        with contextlib.suppress(BlockingIOError):
            assert os.read(read_end, 100) == b""
        # A worker that stopped reading, its pipe full: the WAKE is dropped, not
        # waited on (this process's event loop calls wake()).
        worker._woken, worker._rest = False, None
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(write_end, b"x" * 4096)
        started = time.monotonic()
        worker.wake()
        assert time.monotonic() - started < 1
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_a_waiting_program_is_woken_once_and_a_running_one_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    woken: list[int] = []
    real_wake = Worker.wake

    def wake(self: Worker) -> None:  # counts the WAKE frames sent
        if not self._woken:
            woken.append(self.pid)
        real_wake(self)

    monkeypatch.setattr(Worker, "wake", wake)
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[object] = loop.create_future()
    called = asyncio.Event()

    class Delegate:
        async def call_tool(self, call: NestedCall) -> object:
            called.set()
            return await gate

        def notify(self, cell_id: str, event: object) -> None:
            pass

    session = delegated_session(engine="quickjs", limits=Limits(timeout_s=60))
    try:
        running = asyncio.ensure_future(
            session.execute(
                "(await tools.t()) + 1",
                ToolSet(("t",)),
                yield_time=60,
                delegate=Delegate(),
            )
        )
        await asyncio.wait_for(called.wait(), 60)
        await asyncio.sleep(0)  # the program's step that made the call ends: it waits
        session.results_coming()
        session.results_coming()  # the same wait: told once
        assert len(woken) == 1
        gate.set_result(41)
        outcome = await asyncio.wait_for(running, 60)
        assert isinstance(outcome, Completed) and outcome.result.value == 42
        session.results_coming()  # nothing waits now
        assert len(woken) == 1
    finally:
        await session.close()


async def test_both_protocols_tell_a_session_with_calls_out_as_bytes_arrive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    told: list[CodexSession] = []
    monkeypatch.setattr(CodexSession, "results_coming", lambda self: told.append(self))
    loop = asyncio.get_running_loop()

    # gRPC: the connection says so before h2 reads the bytes; the service asks each
    # session, which passes it on only with calls out.
    service = CodeModeHostService(SessionLimits())
    session = GrpcSession(SessionLimits(), 0, False)
    service.sessions[session.id] = session
    heard: list[bytes] = []
    conn = Connection(service.methods(), lambda: (heard.append(b""), service.arriving()))
    transport = _Transport()
    conn.attach(transport.write, transport.close)
    conn.data_received(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert heard and told == []  # no call out: nobody is told
    session.pending["call"] = object()  # type: ignore[assignment]
    conn.data_received(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # SETTINGS
    assert told == [session.code]

    # Framed: the same, as the reader is fed, with delegate requests out.
    told.clear()
    reader = ArrivalReader(limit=1 << 20)
    framed = FramedConnection(reader, lambda data: None, SessionLimits())
    reader.arriving = framed.arriving
    framed.sessions["s"] = FramedSession(framed, "s", SessionLimits())
    reader.feed_data(b"{")
    assert told == []
    framed.waiting[1] = loop.create_future()
    reader.feed_data(b"}")
    assert told == [framed.sessions["s"].code]
