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

from codemode.codex_host.h2_streams import Answers, Stream
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
    MAX_BUFFERED,
    MAX_FRAME,
    MAX_HEADER_BLOCK,
    MAX_MESSAGE,
    MAX_STREAMS,
    MAX_WINDOW,
    PING,
    PREFACE,
    PRIORITY_FLAG,
    PROTOCOL_ERROR,
    PUSH_PROMISE,
    REFUSED_STREAM,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    Method,
    ProtocolViolation,
    Status,
    frame,
    unpad,
)
from codemode.codex_host.hpack import Decoder, HpackError


class Connection(Answers, asyncio.Protocol):
    """One HTTP/2 connection's server side; ``done`` resolves when it has ended."""

    def __init__(self, methods: dict[str, Method]) -> None:
        super().__init__()
        self.methods = methods
        self.decoder = Decoder()
        self.buffer = bytearray()
        self.started = False  # the client's preface arrived
        self.last_stream = 0
        self.initial_window = 65535  # the peer's window for each new stream
        self.unacknowledged = 0  # DATA bytes received, not yet given back as window
        self.continued: tuple[int, int, bytearray] | None = None
        self.done: asyncio.Future[None] = self.loop.create_future()
        self._reader: asyncio.ReadTransport | None = None
        self._close: Callable[[], object] = lambda: None

    # -- transport -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A socket writes back on itself; stdin's read end leaves the writer as attached.
        if isinstance(transport, asyncio.ReadTransport):
            self._reader = transport
        if isinstance(transport, asyncio.WriteTransport):
            self.attach(transport.write, transport.close)

    # A client that sends (PINGs, requests) without reading what we answer would grow our
    # write buffer without end: while the writer is over its high-water mark, we stop
    # reading, so the client waits on its own send buffer instead.
    def pause_writing(self) -> None:
        if self._reader is not None and not self.ended:
            self._reader.pause_reading()

    def resume_writing(self) -> None:
        if self._reader is not None and not self.ended:
            self._reader.resume_reading()

    def attach(self, write: Callable[[bytes], object], close: Callable[[], object]) -> None:
        """Where frames go (the connection's writer) and how it is closed; sends our SETTINGS."""
        self._write, self._close = write, close
        settings = (3).to_bytes(2, "big") + MAX_STREAMS.to_bytes(4, "big")  # concurrent streams
        settings += (4).to_bytes(2, "big") + MAX_WINDOW.to_bytes(4, "big")  # initial window
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
            if stream is not None:
                self._release(stream)
                if stream.task is not None:
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
        body = unpad(flags, payload)
        if self.buffered + len(body) > MAX_BUFFERED:
            self._refuse(stream, Status.RESOURCE_EXHAUSTED, "too many request bytes held at once")
            return
        stream.body += body
        self.buffered += len(body)
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
        if len(self.streams) >= MAX_STREAMS:
            self._emit(frame(RST_STREAM, 0, sid, REFUSED_STREAM.to_bytes(4, "big")))
            return
        path = next((value for name, value in headers if name == ":path"), "")
        stream = Stream(sid, self.initial_window, path=path)
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

    def _dispatch(self, stream: Stream) -> None:
        method = self.methods[stream.path]
        stream.answered = True
        body = stream.body
        self._release(stream)
        if len(body) < 5 or int.from_bytes(body[1:5], "big") != len(body) - 5:
            self._refuse(stream, Status.INTERNAL, "the request is not one gRPC message")
            return
        if body[0]:
            self._refuse(stream, Status.UNIMPLEMENTED, "compressed requests are not supported")
            return
        request = method.deserialize(bytes(body[5:]))
        if method.immediate:
            self._answer_now(stream, method, request)
            return
        stream.task = asyncio.ensure_future(self._run(stream, method, request))
