"""What leaves first after a client's ``CompleteToolCall`` (docs/codex-host.md, "Each
nested call"): the program's next ``ToolCall``, sent in the step that made it when its
subscription stream waits idle, then the ``CompleteToolCall``'s own answer; and that
sending a call at once never reorders or loses one (closed windows, a reset stream).

The host's own ``Connection`` and service, fed by an ``h2`` client in memory: no engine
worker, so each loop turn is the test's to count."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, ResponseReceived, StreamReset
from h2.settings import SettingCodes

from codemode.codex_host.grpc.service import CodeModeHostService
from codemode.codex_host.grpc.session import GrpcSession, _Pending
from codemode.codex_host.session.model import ToolSpec
from codemode.codex_host.session.runtime import SessionLimits
from codemode.codex_host.wire.grpc_status import Method
from codemode.codex_host.wire.h2_connection import Connection
from codemode.codex_host.wire.messages import SERVICE, pb

COMPLETE = "/test.Service/Complete"
WATCH = "/test.Service/Watch"
TOOL = ToolSpec(name="t", tool_name="t", namespace=None, description="")


class _Wire:
    """A server ``Connection`` and an ``h2`` client joined in memory; what the server
    writes is kept one write per item, read by the client when the test asks."""

    def __init__(self, methods: dict[str, Method], initial_window: int | None = None) -> None:
        self.writes: list[bytes] = []
        self.read = 0
        self.conn = Connection(methods)
        self.conn.attach(self.writes.append, lambda: None)
        self.client = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.client.initiate_connection()
        if initial_window is not None:
            self.client.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: initial_window})
        self.send()

    def send(self) -> None:
        self.conn.data_received(self.client.data_to_send())

    def request(self, sid: int, path: str, message: bytes) -> None:
        self.client.send_headers(
            sid,
            [
                (b":method", b"POST"), (b":scheme", b"http"), (b":path", path.encode()),
                (b":authority", b"test"), (b"content-type", b"application/grpc"),
                (b"te", b"trailers"),
            ],
        )  # fmt: skip
        self.client.send_data(
            sid, b"\x00" + len(message).to_bytes(4, "big") + message, end_stream=True
        )
        self.send()

    def events(self) -> list[Any]:
        """What the server wrote since the last look, as client events, in order."""
        got: list[Any] = []
        for data in self.writes[self.read :]:
            got += self.client.receive_data(data)
        self.read = len(self.writes)
        ack = self.client.data_to_send()  # SETTINGS acks, window updates
        if ack:
            self.conn.data_received(ack)
        return got


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_the_next_call_leaves_before_the_completions_answer() -> None:
    loop = asyncio.get_running_loop()
    result: asyncio.Future[object] = loop.create_future()

    class Empty:
        def SerializeToString(self) -> bytes:
            return b""

    def complete(request: Any) -> Any:
        result.set_result(request)
        return Empty()

    async def watch(request: Any) -> AsyncIterator[Any]:
        async def forever() -> AsyncIterator[Any]:
            await loop.create_future()
            yield Empty()

        return forever()

    wire = _Wire(
        {
            COMPLETE: Method(deserialize=bytes, handler=complete, streaming=False, immediate=True),
            WATCH: Method(deserialize=bytes, handler=watch, streaming=True),
        }
    )
    wire.request(1, WATCH, b"")  # the stream the next "call" goes out on
    await _turns(3)
    wire.events()
    watching = wire.conn.streams[1]

    async def program() -> None:
        await result  # as a nested call waits on the client's completion: this step
        # hands the engine worker the result, and the program's own step after it
        # takes the worker's reply, the next call (when it comes within the poll).
        await asyncio.sleep(0)
        assert wire.conn.send_whole(watching, b"next call")

    running = asyncio.ensure_future(program())
    await asyncio.sleep(0)
    wire.request(3, COMPLETE, b"done")
    await running
    await _turns(4)
    order = [
        ("call" if e.stream_id == 1 else "answer")
        for e in wire.events()
        if isinstance(e, DataReceived | ResponseReceived) and e.stream_id in (1, 3)
    ]
    # The call first; the answer still comes, whole.
    assert order[0] == "call" and "answer" in order, order


async def test_an_answer_still_leaves_when_the_program_makes_no_call() -> None:
    class Empty:
        def SerializeToString(self) -> bytes:
            return b""

    wire = _Wire(
        {
            COMPLETE: Method(
                deserialize=bytes, handler=lambda r: Empty(), streaming=False, immediate=True
            )
        }
    )
    wire.request(1, COMPLETE, b"done")
    await _turns(3)
    assert any(isinstance(e, ResponseReceived) and e.stream_id == 1 for e in wire.events())


def _subscribed(
    initial_window: int | None = None,
) -> tuple[_Wire, GrpcSession]:
    service = CodeModeHostService(SessionLimits())
    session = GrpcSession(SessionLimits(), 0, False)
    service.sessions[session.id] = session
    return _Wire(service.methods(), initial_window), session


def _subscribe(wire: _Wire, session: GrpcSession, sid: int) -> None:
    request = pb.SubscribeToToolCallsRequest(session_id=session.id)
    wire.request(sid, f"/{SERVICE}/SubscribeToToolCalls", request.SerializeToString())


def _call(session: GrpcSession, n: int) -> _Pending:
    message = pb.ToolCall(session_id=session.id, invocation_id=f"call-{n}", sequence=n)
    pending = _Pending(TOOL, message, asyncio.get_running_loop().create_future())
    session.pending[message.invocation_id] = pending
    session._route(pending)
    return pending


def _calls_seen(events: list[Any], sid: int) -> list[str]:
    seen = []
    for e in events:
        if isinstance(e, DataReceived) and e.stream_id == sid:
            body = e.data
            while body:
                size = int.from_bytes(body[1:5], "big")
                seen.append(pb.ToolCall.FromString(body[5 : 5 + size]).invocation_id)
                body = body[5 + size :]
    return seen


async def test_a_call_on_an_idle_subscription_leaves_at_the_next_write() -> None:
    wire, session = _subscribed()
    _subscribe(wire, session, 1)
    await _turns(3)
    wire.events()
    _call(session, 1)
    await asyncio.sleep(0)  # one turn: the connection's write; no turn of the stream's own
    assert _calls_seen(wire.events(), 1) == ["call-1"]
    _call(session, 2)
    _call(session, 3)  # a Promise.all's: both in the same write
    await asyncio.sleep(0)
    assert _calls_seen(wire.events(), 1) == ["call-2", "call-3"]


async def test_calls_wait_for_a_closed_window_in_order_and_none_is_lost() -> None:
    wire, session = _subscribed(initial_window=0)
    _subscribe(wire, session, 1)
    await _turns(3)
    wire.events()
    for n in range(1, 5):
        _call(session, n)
    await _turns(5)
    assert _calls_seen(wire.events(), 1) == []  # no room: queued, nothing sent
    wire.client.increment_flow_control_window(1 << 20, stream_id=1)
    wire.send()
    await _turns(10)
    _call(session, 5)  # after the queue drained: sent at once again
    await _turns(3)
    assert _calls_seen(wire.events(), 1) == [f"call-{n}" for n in range(1, 6)]


async def test_a_call_routed_after_its_stream_was_reset_goes_to_the_next_subscriber() -> None:
    wire, session = _subscribed()
    _subscribe(wire, session, 1)
    await _turns(3)
    wire.events()
    wire.client.reset_stream(1)
    wire.send()
    _call(session, 1)  # in the same step as the reset: the stream is gone, not its task
    await _turns(5)
    events = wire.events()
    assert not any(isinstance(e, StreamReset) for e in events)
    assert _calls_seen(events, 1) == []
    _subscribe(wire, session, 3)
    await _turns(5)
    assert _calls_seen(wire.events(), 3) == ["call-1"]
