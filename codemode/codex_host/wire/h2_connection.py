"""A gRPC server on HTTP/2, in this process's event loop, for the host: ``h2`` (the
sans-IO HTTP/2 stack httpx uses) reads and writes the frames; this module turns its
events into RPCs.

Why ``h2``: HTTP/2's stream states, flow control, HPACK (with its header-list limit)
and the CONTINUATION and SETTINGS rules are h2's, kept as the protocol moves; what
stays here is gRPC's part and the bounds on one client. Why not grpcio's server: over
stdio it needed a unix socket and relay threads (a message crossed three threads); here
the loop that runs the programs reads and writes the frames, one wake-up per message.

What one client can hold is bounded: open streams, a header list and what answers
waiting on it hold (``MAX_STREAMS``, ``MAX_HEADER_LIST``, ``MAX_UNSENT``: h2_config.py),
``MAX_MESSAGE`` bytes a request, ``MAX_BUFFERED`` for all unanswered requests, resets
(``wire/reset_budget.py``), and what it has to write back (it stops reading, and its
messages wait, while the client does not read). A request's fields are counted before
it is decoded (``wire/decode_budget.py``). A peer that breaks HTTP/2 gets GOAWAY and the
connection ends; a bad request gets its gRPC status and nothing else changes;
``grpc-timeout`` ends an RPC with DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from h2.connection import ConnectionState
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.exceptions import H2Error

from codemode.codex_host.wire import h2_config as config
from codemode.codex_host.wire.grpc_status import (
    MAX_MESSAGE,
    RESPONSE,
    Headers,
    Method,
    Status,
    response_headers,
    status_headers,
    timeout_s,
)
from codemode.codex_host.wire.h2_stream import Stream, answer, answer_now, serve
from codemode.codex_host.wire.reset_budget import ResetBudget


class Connection(asyncio.Protocol):
    """One HTTP/2 connection's server side; ``done`` resolves when it has ended."""

    def __init__(self, methods: dict[str, Method]) -> None:
        self.methods = methods
        self.h2 = config.server_h2()
        self.streams: dict[int, Stream] = {}
        self.buffered = 0  # request bytes held for streams not yet dispatched
        self.ended = False
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.waiting: list[asyncio.Future[None]] = []  # answers waiting for window
        self.unsent = 0  # what those answers hold, against MAX_UNSENT
        self.resets = ResetBudget()  # of streams not yet answered
        self._flushing = False
        # The writer holds more than its high-water mark (the client does not read):
        # messages wait, as for a closed window, instead of growing its buffer.
        self._paused = False
        self._unwritten = 0  # message bytes handed to h2 since the last write
        self._owed: list[tuple[Stream, bytes]] = []  # answers made at a later write (owe)
        self._owed_waited = False  # the owed answers have let a turn of the loop pass
        self._reader: asyncio.ReadTransport | None = None
        self._write: Callable[[bytes], object] = lambda data: None
        self._close: Callable[[], object] = lambda: None

    # -- transport -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A socket writes back on itself; stdin's read end leaves the writer as attached.
        if isinstance(transport, asyncio.ReadTransport):
            self._reader = transport
        if isinstance(transport, asyncio.WriteTransport):
            self.attach(transport.write, transport.close)

    # A client that sends (PINGs, SETTINGS, requests) without reading what we answer
    # would grow our write buffer without end: while the writer is over its high-water
    # mark, we stop reading, so the client waits on its own send buffer instead.
    # Nor may a client that opened its flow-control windows wide (2 GiB) and then stopped
    # reading: while the writer is over its mark, messages wait as for a closed window.
    def pause_writing(self) -> None:
        self._paused = True
        if self._reader is not None and not self.ended:
            self._reader.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        if self._reader is not None and not self.ended:
            self._reader.resume_reading()
        self._wake()

    def attach(self, write: Callable[[bytes], object], close: Callable[[], object]) -> None:
        """Where frames go (the connection's writer) and how it is closed; sends our SETTINGS."""
        self._write, self._close = write, close
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(config.MAX_WINDOW - 65535)
        self._write(self.h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        if self.ended:
            return
        try:
            events = self.h2.receive_data(data)
        except H2Error as exc:  # ProtocolError and its kinds: the peer broke HTTP/2
            self._go_away(exc)
            return
        for event in events:
            if self.ended:
                return
            self._on_event(event)
        self.emit()

    def eof_received(self) -> bool:
        self.connection_lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ended:
            return
        self.ended = True
        for stream in list(self.streams.values()):
            stream.cancel()
        self.streams.clear()
        self._wake()
        if not self.done.done():
            self.done.set_result(None)

    def _go_away(self, exc: H2Error) -> None:
        # h2 has queued GOAWAY with the error's code for most violations; not for a
        # client preface that is not one.
        if self.h2.state_machine.state is not ConnectionState.CLOSED:
            code = getattr(exc, "error_code", None) or ErrorCodes.PROTOCOL_ERROR
            with contextlib.suppress(H2Error):
                self.h2.close_connection(error_code=code, additional_data=str(exc).encode()[:200])
        with contextlib.suppress(Exception):
            self._write(self.h2.data_to_send())
            self._close()
        self.connection_lost(None)

    # -- events ----------------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        if isinstance(event, DataReceived):
            self._on_data(event)
        elif isinstance(event, RequestReceived):
            self._on_request(event.stream_id, event.headers or [])
        elif isinstance(event, StreamEnded):
            stream = self.streams.get(event.stream_id)
            if stream is not None and not stream.answered:
                self._dispatch(stream)
        elif isinstance(event, StreamReset):
            self._on_reset(event.stream_id)
        elif isinstance(event, WindowUpdated | RemoteSettingsChanged):
            self._wake()
        elif isinstance(event, ConnectionTerminated):
            pass  # the client's GOAWAY: its open streams still get their answers
        # PING and SETTINGS are acknowledged by h2; trailers from the client end its
        # request (StreamEnded); what else a client sends changes nothing here.

    def _on_request(self, sid: int, headers: Headers) -> None:
        fields = dict(headers)
        path = fields.get(b":path", b"").decode("utf-8", "replace")
        stream = Stream(sid, path)
        self.streams[sid] = stream
        if path not in self.methods:
            self._refuse(stream, Status.UNIMPLEMENTED, f"unknown method {path[:200]}")
            return
        deadline = timeout_s(fields.get(b"grpc-timeout", b""))
        if deadline is not None:
            stream.timer = self.loop.call_later(deadline, self._deadline, stream)

    def _on_data(self, event: DataReceived) -> None:
        sid, body = event.stream_id, event.data or b""
        # Every byte counts against the windows, padding too: given back as it arrives
        # (h2 sends WINDOW_UPDATE once enough has gathered).
        self.h2.acknowledge_received_data(event.flow_controlled_length or 0, sid)
        stream = self.streams.get(sid)
        if stream is None or stream.answered:
            return  # a stream already answered or reset: its data goes nowhere
        if self.buffered + len(body) > config.MAX_BUFFERED:
            self._refuse(stream, Status.RESOURCE_EXHAUSTED, "too many request bytes held at once")
            return
        stream.body += body
        self.buffered += len(body)
        if len(stream.body) > MAX_MESSAGE + 5:
            self._refuse(stream, Status.RESOURCE_EXHAUSTED, "the request is too large")

    def _on_reset(self, sid: int) -> None:
        stream = self.streams.pop(sid, None)
        if stream is None:
            return
        self._release(stream)
        stream.cancel()
        if not self.resets.spend():
            self.h2.close_connection(
                error_code=ErrorCodes.ENHANCE_YOUR_CALM, additional_data=b"too many resets"
            )
            self._flush()
            with contextlib.suppress(Exception):
                self._close()
            self.connection_lost(None)

    def _deadline(self, stream: Stream) -> None:
        stream.timer = None
        if self.live(stream):
            self.trailers(stream, Status.DEADLINE_EXCEEDED, "the deadline passed")
            stream.cancel()
            self.emit()

    # -- answering -------------------------------------------------------------------------

    def _dispatch(self, stream: Stream) -> None:
        method = self.methods[stream.path]
        stream.answered = True
        body = bytes(stream.body)
        self._release(stream)
        if len(body) < 5 or int.from_bytes(body[1:5], "big") != len(body) - 5:
            self._refuse(stream, Status.INTERNAL, "the request is not one gRPC message")
            return
        if body[0]:
            self._refuse(stream, Status.UNIMPLEMENTED, "compressed requests are not supported")
            return
        request = method.deserialize(body[5:])
        if method.immediate:
            answer_now(self, stream, method, request)
        else:
            stream.task = asyncio.ensure_future(serve(self, stream, method, request))

    def _refuse(self, stream: Stream, code: Status, message: str) -> None:
        """Answer with a status alone (trailers-only), before the request is read whole;
        a client still sending is asked to stop (RST_STREAM NO_ERROR, RFC 9113 8.1), so
        the stream no longer counts against its open streams."""
        stream.answered = True
        self._release(stream)
        self.trailers(stream, code, message)
        state = self.h2.streams.get(stream.id)
        if state is not None and not state.closed:
            with contextlib.suppress(H2Error):
                self.h2.reset_stream(stream.id, ErrorCodes.NO_ERROR)

    def _release(self, stream: Stream) -> None:
        """The stream's request bytes no longer count against ``MAX_BUFFERED``."""
        self.buffered -= len(stream.body)
        stream.body = bytearray()

    def trailers(self, stream: Stream, code: Status, message: str) -> None:
        """End ``stream`` with a status (trailers-only when nothing was sent yet)."""
        if self.ended or self.streams.pop(stream.id, None) is None:
            return
        head = [] if stream.replied else RESPONSE
        stream.replied = True
        with contextlib.suppress(H2Error):
            self.h2.send_headers(stream.id, head + status_headers(code, message), end_stream=True)
        stream.finish()
        self.emit()

    def headers(self, stream: Stream) -> None:
        """The response headers, once, before the first message."""
        if not stream.replied and self.live(stream):
            stream.replied = True
            with contextlib.suppress(H2Error):
                self.h2.send_headers(stream.id, response_headers(stream.metadata))
            self.emit()

    def live(self, stream: Stream) -> bool:
        """Whether ``stream`` can still be answered (not reset, timed out or ended)."""
        return self.streams.get(stream.id) is stream

    def send_whole(self, stream: Stream, message: bytes) -> bool:
        """One gRPC message on ``stream`` in one DATA frame, if the peer's windows have
        room for it now (as they nearly always do); False, with nothing sent, if not."""
        data = b"\x00" + len(message).to_bytes(4, "big") + message
        if not self.live(stream):
            return True  # reset or ended meanwhile: nobody to send it to
        if self._paused:
            return False
        try:
            room = min(
                self.h2.local_flow_control_window(stream.id), self.h2.max_outbound_frame_size
            )
            if len(data) > room:
                return False
            self.headers(stream)
            self.h2.send_data(stream.id, data)
        except H2Error:
            return True  # the stream closed under us: the message has nowhere to go
        self._unwritten += len(data)
        if self._unwritten > config.WRITE_SOON:
            self._write_queued()  # now: the writer may say it is full
        self.emit()
        return True

    async def send(self, stream: Stream, message: bytes, last: bool = False) -> None:
        """One gRPC message on ``stream`` (then OK trailers when ``last``), within the
        peer's windows: waits while they are closed."""
        if not self.send_whole(stream, message):
            data = memoryview(b"\x00" + len(message).to_bytes(4, "big") + message)
            self.headers(stream)
            while data:
                if not self.live(stream):
                    return  # reset, past its deadline, or the connection ended
                try:
                    room = 0 if self._paused else min(
                        len(data), self.h2.local_flow_control_window(stream.id),
                        self.h2.max_outbound_frame_size,
                    )  # fmt: skip
                    if room > 0:
                        self.h2.send_data(stream.id, data[:room].tobytes())
                except H2Error:
                    return  # the stream closed under us: the rest has nowhere to go
                if room <= 0:
                    if not await self._window(config.UNSENT_COPIES * len(data)):
                        self.streams.pop(stream.id, None)
                        with contextlib.suppress(H2Error):
                            self.h2.reset_stream(stream.id, ErrorCodes.ENHANCE_YOUR_CALM)
                        return self.emit()
                    continue
                data = data[room:]
                self._write_queued()  # frame by frame: the writer may say it is full
            self.emit()
        if last:
            self.trailers(stream, Status.OK, "")

    async def _window(self, held: int) -> bool:
        """Until the windows or the writer may have room, holding ``held`` bytes; False
        at once when others wait and that would pass ``MAX_UNSENT`` (the stream is then
        reset)."""
        if self.ended:
            raise asyncio.CancelledError
        if self.unsent and self.unsent + held > config.MAX_UNSENT:
            return False  # (one answer may always wait: a report of any size the host allows)
        self.emit()
        waiter = self.loop.create_future()
        self.waiting.append(waiter)
        self.unsent += held
        try:
            await waiter
        finally:
            self.unsent -= held
        if self.ended:
            raise asyncio.CancelledError
        return True

    def _wake(self) -> None:
        waiting, self.waiting = self.waiting, []
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(None)

    def emit(self) -> None:
        """Write what h2 has queued at the end of this turn of the loop, with what else
        the turn queues: a ``Promise.all``'s tool calls leave in one write."""
        if not self._flushing:
            self._flushing = True
            self.loop.call_soon(self._flush)

    def owe(self, stream: Stream, reply: bytes) -> None:
        """Answer ``stream`` with ``reply`` a turn of the loop after the write it came
        with, behind that turn's frames: a ``CompleteToolCall`` handed a program its
        result, and the program's next ``ToolCall`` (made in its own step, which polls the
        engine worker briefly) need not wait while this answer is made (docs/codex-host.md)."""
        self._owed.append((stream, reply))
        self.emit()

    def _write_queued(self) -> None:
        self._unwritten = 0
        data = self.h2.data_to_send()
        if data and not self.ended:
            self._write(data)

    def _flush(self) -> None:
        self._flushing = False
        self._write_queued()
        if not self._owed or self.ended:
            return
        if not self._owed_waited:  # the program's turn first
            self._owed_waited = self._flushing = True
            self.loop.call_soon(self._flush)
            return
        owed, self._owed, self._owed_waited = self._owed, [], False
        self._flushing = True  # their emit()s find this flush under way
        for stream, reply in owed:
            answer(self, stream, reply)
        self._flushing = False
        self._write_queued()
