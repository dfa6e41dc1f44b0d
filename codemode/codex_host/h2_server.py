"""A gRPC server on HTTP/2 (RFC 9113), in this process's event loop, for the host.

Why not grpcio's server: Codex starts its host at the first exec of a turn and waits
for it, and then every nested tool call is an RPC. grpcio costs a third of the host's
start (its import and its server's threads) and, over stdio, needed a unix socket and
two relay threads, so each message crossed three threads. Here the frames are read
from stdin (or a TCP connection) and written to stdout by the loop that runs the
programs: one wake-up per message.

What a gRPC server needs and no more: one connection per transport, unary requests
(every RPC of ``codex.code_mode.v1`` has one request message) answered with one
message or a stream of them, status in trailers, the peer's flow-control windows
respected, ours kept open, PING answered. A peer that breaks the protocol gets GOAWAY
and the connection ends; a bad request gets its gRPC status and nothing else changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codemode.codex_host.h2_wire import (
    ACK,
    COMPRESSION_ERROR,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR,
    GOAWAY,
    HEADERS,
    MAX_FRAME,
    MAX_HEADER_BLOCK,
    MAX_MESSAGE,
    MAX_WINDOW,
    OK_STATUS,
    PING,
    PREFACE,
    PRIORITY_FLAG,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    RESPONSE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    Method,
    ProtocolViolation,
    RpcError,
    Status,
    failed,
    frame,
    response_headers,
    status_fields,
    unpad,
)
from codemode.codex_host.hpack import Decoder, HpackError


@dataclass(eq=False)
class _Stream:
    id: int
    window: int
    body: bytearray = field(default_factory=bytearray)
    unacknowledged: int = 0  # request bytes not yet given back as window
    path: str = ""
    answered: bool = False  # its request was read (or refused): nothing more comes in
    task: asyncio.Task[None] | None = None
    replied: bool = False  # response headers sent


class Connection(asyncio.Protocol):
    """One HTTP/2 connection's server side; ``done`` resolves when it has ended."""

    def __init__(self, methods: dict[str, Method]) -> None:
        self.methods = methods
        self.decoder = Decoder()
        self.buffer = bytearray()
        self.started = False  # the client's preface arrived
        self.streams: dict[int, _Stream] = {}
        self.last_stream = 0
        self.out_window = 65535  # what we may still send, connection-wide
        self.initial_window = 65535  # the peer's window for each new stream
        self.peer_max_frame = MAX_FRAME
        self.unacknowledged = 0  # DATA bytes received, not yet given back as window
        self.continued: tuple[int, int, bytearray] | None = None
        self.waiting: list[asyncio.Future[None]] = []
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.pending: list[bytes] = []  # written at the end of the loop's turn
        self.ended = False
        self._write: Callable[[bytes], object] = lambda data: None
        self._close: Callable[[], object] = lambda: None

    # -- transport -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A socket writes back on itself; stdin's read end leaves the writer as attached.
        if isinstance(transport, asyncio.WriteTransport):
            self.attach(transport.write, transport.close)

    def attach(self, write: Callable[[bytes], object], close: Callable[[], object]) -> None:
        """Where frames go (the connection's writer) and how it is closed; sends our SETTINGS."""
        self._write, self._close = write, close
        settings = (4).to_bytes(2, "big") + MAX_WINDOW.to_bytes(4, "big")  # initial window
        self._write(
            frame(SETTINGS, 0, 0, settings)
            + frame(WINDOW_UPDATE, 0, 0, (MAX_WINDOW - 65535).to_bytes(4, "big"))
        )

    def data_received(self, data: bytes) -> None:
        if self.ended:
            return
        self.buffer += data
        try:
            self._parse()
        except ProtocolViolation as exc:
            self._go_away(exc.code, str(exc))
        except HpackError as exc:
            self._go_away(COMPRESSION_ERROR, str(exc))

    def eof_received(self) -> bool:
        self.connection_lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ended:
            return
        self.ended = True
        for stream in list(self.streams.values()):
            if stream.task is not None:
                stream.task.cancel()
        self.streams.clear()
        self._wake()
        if not self.done.done():
            self.done.set_result(None)

    def _go_away(self, code: int, message: str) -> None:
        payload = self.last_stream.to_bytes(4, "big") + code.to_bytes(4, "big")
        with contextlib.suppress(Exception):
            self._flush()
            self._write(frame(GOAWAY, 0, 0, payload + message.encode()[:200]))
            self._close()
        self.connection_lost(None)

    def _emit(self, data: bytes) -> None:
        """Write ``data`` at the end of this turn of the event loop, with whatever else
        is written in the same turn: the tool calls of a ``Promise.all`` (or the answers
        to a batch of completions) leave in one write, one wake-up of the client."""
        if not self.pending:
            self.loop.call_soon(self._flush)
        self.pending.append(data)

    def _flush(self) -> None:
        if self.pending and not self.ended:
            data = b"".join(self.pending)
            self.pending.clear()
            self._write(data)

    # -- reading ---------------------------------------------------------------------------

    def _parse(self) -> None:
        buf = self.buffer
        if not self.started:
            if len(buf) < len(PREFACE):
                if not PREFACE.startswith(bytes(buf)):
                    raise ProtocolViolation(PROTOCOL_ERROR, "not an HTTP/2 client preface")
                return
            if buf[: len(PREFACE)] != PREFACE:
                raise ProtocolViolation(PROTOCOL_ERROR, "not an HTTP/2 client preface")
            del buf[: len(PREFACE)]
            self.started = True
        at = 0
        while len(buf) - at >= 9 and not self.ended:
            length = int.from_bytes(buf[at : at + 3], "big")
            if length > MAX_FRAME:
                raise ProtocolViolation(FRAME_SIZE_ERROR, f"a frame of {length} bytes")
            if len(buf) - at - 9 < length:
                break
            kind, flags = buf[at + 3], buf[at + 4]
            stream = int.from_bytes(buf[at + 5 : at + 9], "big") & 0x7FFFFFFF
            payload = bytes(buf[at + 9 : at + 9 + length])
            at += 9 + length
            self._onframe(kind, flags, stream, payload)
        del buf[:at]

    def _onframe(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self.continued is not None and (kind != CONTINUATION or sid != self.continued[0]):
            raise ProtocolViolation(PROTOCOL_ERROR, "a header block was interrupted")
        if kind == DATA:
            self._on_data(flags, sid, payload)
        elif kind == HEADERS:
            if sid == 0 or sid % 2 == 0:
                raise ProtocolViolation(PROTOCOL_ERROR, f"HEADERS on stream {sid}")
            block = unpad(flags, payload)
            if flags & PRIORITY_FLAG:
                block = block[5:]
            if flags & END_HEADERS:
                self._on_headers(sid, flags, block)
            else:
                self.continued = (sid, flags, bytearray(block))
        elif kind == CONTINUATION:
            if self.continued is None:
                raise ProtocolViolation(PROTOCOL_ERROR, "CONTINUATION without HEADERS")
            cont_sid, cont_flags, pieces = self.continued
            pieces += payload
            if len(pieces) > MAX_HEADER_BLOCK:
                raise ProtocolViolation(PROTOCOL_ERROR, "a header block too large")
            if flags & END_HEADERS:
                self.continued = None
                self._on_headers(cont_sid, cont_flags, bytes(pieces))
        elif kind == RST_STREAM:
            stream = self.streams.pop(sid, None)
            if stream is not None and stream.task is not None:
                stream.task.cancel()
        elif kind == SETTINGS:
            if not flags & ACK:
                self._on_settings(sid, payload)
        elif kind == PING:
            if len(payload) != 8 or sid:
                raise ProtocolViolation(FRAME_SIZE_ERROR, "a bad PING")
            if not flags & ACK:
                self._emit(frame(PING, ACK, 0, payload))
        elif kind == WINDOW_UPDATE:
            self._on_window_update(sid, payload)
        elif kind == PUSH_PROMISE:
            raise ProtocolViolation(PROTOCOL_ERROR, "a client may not push")
        # PRIORITY, GOAWAY (the client ends: its streams still get their answers) and
        # frame types this server does not know are ignored, as HTTP/2 allows.

    def _on_data(self, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0:
            raise ProtocolViolation(PROTOCOL_ERROR, "DATA on stream 0")
        # Every byte counts against the window, padding too; give it back in batches.
        self.unacknowledged += len(payload)
        if self.unacknowledged >= 1 << 20:
            self._emit(frame(WINDOW_UPDATE, 0, 0, self.unacknowledged.to_bytes(4, "big")))
            self.unacknowledged = 0
        stream = self.streams.get(sid)
        if stream is None or stream.answered:
            return  # a stream already answered or reset: its data goes nowhere
        stream.body += unpad(flags, payload)
        stream.unacknowledged += len(payload)
        if len(stream.body) > MAX_MESSAGE + 5:
            self._refuse(stream, Status.RESOURCE_EXHAUSTED, "the request is too large")
            return
        if flags & END_STREAM:
            self._dispatch(stream)
        elif stream.unacknowledged >= 1 << 15:
            self._emit(frame(WINDOW_UPDATE, 0, sid, stream.unacknowledged.to_bytes(4, "big")))
            stream.unacknowledged = 0

    def _on_headers(self, sid: int, flags: int, block: bytes) -> None:
        headers = self.decoder.decode(block)  # always: the table must follow the client
        stream = self.streams.get(sid)
        if stream is not None or sid <= self.last_stream:
            if stream is not None and not stream.answered and flags & END_STREAM:
                self._dispatch(stream)  # trailers from the client end its request
            return
        self.last_stream = sid
        path = next((value for name, value in headers if name == ":path"), "")
        stream = _Stream(sid, self.initial_window, path=path)
        self.streams[sid] = stream
        if path not in self.methods:
            self._refuse(stream, Status.UNIMPLEMENTED, f"unknown method {path[:200]}")
        elif flags & END_STREAM:
            self._dispatch(stream)

    def _on_settings(self, sid: int, payload: bytes) -> None:
        if sid or len(payload) % 6:
            raise ProtocolViolation(FRAME_SIZE_ERROR, "a bad SETTINGS frame")
        for at in range(0, len(payload), 6):
            key = int.from_bytes(payload[at : at + 2], "big")
            value = int.from_bytes(payload[at + 2 : at + 6], "big")
            if key == 4:  # INITIAL_WINDOW_SIZE: every open stream's window moves with it
                if value > MAX_WINDOW:
                    raise ProtocolViolation(FLOW_CONTROL_ERROR, "initial window too large")
                for stream in self.streams.values():
                    stream.window += value - self.initial_window
                self.initial_window = value
            elif key == 5:  # MAX_FRAME_SIZE
                if not MAX_FRAME <= value <= (1 << 24) - 1:
                    raise ProtocolViolation(PROTOCOL_ERROR, "a bad frame size")
                self.peer_max_frame = value
        self._emit(frame(SETTINGS, ACK, 0))
        self._wake()

    def _on_window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ProtocolViolation(FRAME_SIZE_ERROR, "a bad WINDOW_UPDATE")
        increment = int.from_bytes(payload, "big") & 0x7FFFFFFF
        if sid == 0:
            self.out_window += increment
            if self.out_window > MAX_WINDOW:
                raise ProtocolViolation(FLOW_CONTROL_ERROR, "the window overflowed")
        elif (stream := self.streams.get(sid)) is not None:
            stream.window += increment
        self._wake()

    # -- answering -------------------------------------------------------------------------

    def _dispatch(self, stream: _Stream) -> None:
        method = self.methods[stream.path]
        stream.answered = True
        body = stream.body
        if len(body) < 5 or int.from_bytes(body[1:5], "big") != len(body) - 5:
            self._refuse(stream, Status.INTERNAL, "the request is not one gRPC message")
            return
        if body[0]:
            self._refuse(stream, Status.UNIMPLEMENTED, "compressed requests are not supported")
            return
        request = method.deserialize(bytes(body[5:]))
        stream.body = bytearray()
        if method.immediate:
            self._answer_now(stream, method, request)
            return
        stream.task = asyncio.ensure_future(self._run(stream, method, request))

    def _answer_now(self, stream: _Stream, method: Method, request: Any) -> None:
        """An RPC that never waits, answered without a task: one write, or a status."""
        try:
            reply = method.handler(request).SerializeToString()
        except RpcError as exc:
            self._trailers(stream, exc.code, str(exc))
        except Exception as exc:  # a bug: a status, never a traceback on the wire
            self._trailers(stream, Status.INTERNAL, failed(exc))
        else:
            data = b"\x00" + len(reply).to_bytes(4, "big") + reply
            if len(data) <= min(self.out_window, stream.window, self.peer_max_frame):
                self.out_window -= len(data)
                stream.window -= len(data)
                frames = response_headers(stream.id) + frame(DATA, 0, stream.id, data)
                self._emit(frames + frame(HEADERS, END_HEADERS | END_STREAM, stream.id, OK_STATUS))
            else:  # no room in the window now: sent as the window opens
                stream.task = asyncio.ensure_future(self._send(stream, reply, last=True))
                stream.task.add_done_callback(lambda _: self.streams.pop(stream.id, None))
                return
        self.streams.pop(stream.id, None)

    def _refuse(self, stream: _Stream, code: Status, message: str) -> None:
        """Answer with a status alone (trailers-only), before the request is read."""
        self.streams.pop(stream.id, None)
        stream.answered = True
        self._emit(
            frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                stream.id,
                RESPONSE + status_fields(code, message),
            )
        )

    async def _run(self, stream: _Stream, method: Method, request: Any) -> None:
        replies: Any = None
        try:
            if not method.streaming:
                reply = (await method.handler(request)).SerializeToString()
                await self._send(stream, reply, last=True)
                return
            replies = await method.handler(request)
            self._emit(frame(HEADERS, END_HEADERS, stream.id, RESPONSE))
            stream.replied = True
            async for message in replies:
                await self._send(stream, message.SerializeToString())
            self._trailers(stream, Status.OK, "")
        except RpcError as exc:
            self._trailers(stream, exc.code, str(exc))
        except asyncio.CancelledError:
            pass  # reset by the client, or the connection ended: nobody to tell
        except Exception as exc:  # a bug: a status, never a traceback on the wire
            self._trailers(stream, Status.INTERNAL, failed(exc))
        finally:
            if replies is not None:
                with contextlib.suppress(Exception):
                    await replies.aclose()
            self.streams.pop(stream.id, None)

    async def _send(self, stream: _Stream, message: bytes, last: bool = False) -> None:
        """One gRPC message on ``stream`` (with headers and OK trailers when ``last``,
        in one write when the windows allow, as they nearly always do)."""
        data = b"\x00" + len(message).to_bytes(4, "big") + message
        head = b"" if stream.replied else frame(HEADERS, END_HEADERS, stream.id, RESPONSE)
        stream.replied = True
        tail = (
            frame(HEADERS, END_HEADERS | END_STREAM, stream.id, status_fields(0, ""))
            if last
            else b""
        )
        size = len(data)
        if size <= min(self.out_window, stream.window, self.peer_max_frame):
            self.out_window -= size
            stream.window -= size
            self._emit(head + frame(DATA, 0, stream.id, data) + tail)
            return
        if head:
            self._emit(head)
        view = memoryview(data)
        while view:
            room = min(len(view), self.out_window, stream.window, self.peer_max_frame)
            if room <= 0:
                await self._window()
                continue
            self.out_window -= room
            stream.window -= room
            self._emit(frame(DATA, 0, stream.id, view[:room]))
            view = view[room:]
        if tail:
            self._emit(tail)

    def _trailers(self, stream: _Stream, code: Status, message: str) -> None:
        if self.ended or stream.id not in self.streams:
            return
        head = b"" if stream.replied else RESPONSE
        fields = head + status_fields(code, message)
        self._emit(frame(HEADERS, END_HEADERS | END_STREAM, stream.id, fields))

    async def _window(self) -> None:
        if self.ended:
            raise asyncio.CancelledError
        waiter = asyncio.get_running_loop().create_future()
        self.waiting.append(waiter)
        await waiter
        if self.ended:
            raise asyncio.CancelledError

    def _wake(self) -> None:
        waiting, self.waiting = self.waiting, []
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(None)
