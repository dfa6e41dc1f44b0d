"""The answering half of ``h2_server.Connection``: its streams, and how answers leave
(batched per turn of the event loop, within the peer's flow-control windows, with the
gRPC status in trailers). The reading half (frames, headers, settings) is the
connection itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from codemode.codex_host.h2_wire import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    MAX_FRAME,
    OK_STATUS,
    RESPONSE,
    Method,
    RpcError,
    Status,
    failed,
    frame,
    response_headers,
    status_fields,
)


class Stream:
    """One request stream: what has come in, what the peer lets us send. (A plain class,
    not a dataclass: see ``model.py``.)"""

    __slots__ = ("answered", "body", "id", "path", "replied", "task", "unacknowledged", "window")

    def __init__(self, id: int, window: int, path: str = "") -> None:
        self.id = id
        self.window = window
        self.body = bytearray()
        self.unacknowledged = 0  # request bytes not yet given back as window
        self.path = path
        self.answered = False  # its request was read (or refused): nothing more comes in
        self.task: asyncio.Task[None] | None = None
        self.replied = False  # response headers sent


class Answers:
    """Streams and the write side of one connection."""

    def __init__(self) -> None:
        self.streams: dict[int, Stream] = {}
        self.out_window = 65535  # what we may still send, connection-wide
        self.peer_max_frame = MAX_FRAME
        self.waiting: list[asyncio.Future[None]] = []  # answers waiting for window
        self.loop = asyncio.get_running_loop()
        self.pending: list[bytes] = []  # written at the end of the loop's turn
        self.buffered = 0  # request bytes held for streams not yet dispatched
        self.ended = False
        self._write: Callable[[bytes], object] = lambda data: None

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

    def _answer_now(self, stream: Stream, method: Method, request: Any) -> None:
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

    def _refuse(self, stream: Stream, code: Status, message: str) -> None:
        """Answer with a status alone (trailers-only), before the request is read."""
        self.streams.pop(stream.id, None)
        stream.answered = True
        self._release(stream)
        self._emit(
            frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                stream.id,
                RESPONSE + status_fields(code, message),
            )
        )

    def _release(self, stream: Stream) -> None:
        """The stream's request bytes no longer count against ``MAX_BUFFERED``."""
        self.buffered -= len(stream.body)
        stream.body = bytearray()

    async def _run(self, stream: Stream, method: Method, request: Any) -> None:
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

    async def _send(self, stream: Stream, message: bytes, last: bool = False) -> None:
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

    def _trailers(self, stream: Stream, code: Status, message: str) -> None:
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
