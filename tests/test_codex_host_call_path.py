"""The order of work on a nested call's path, which decides how long a program that
awaits its calls one by one waits for this process (docs/codex-host.md, "Each nested
call"): the tool's result reaches the engine worker before anything else its arrival set
going, and the client's ``CompleteToolCall`` is answered after that, while the worker
runs the program on."""

from __future__ import annotations

import asyncio
from typing import Any

from h2.config import H2Configuration
from h2.connection import H2Connection

from codemode.codex_host.wire.grpc_status import Method
from codemode.codex_host.wire.h2_connection import Connection
from codemode.js_runtime.delegate import NestedCall
from codemode.js_runtime.nested import NestedCalls

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
