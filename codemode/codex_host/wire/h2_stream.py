"""One RPC on one HTTP/2 stream of ``h2_connection.Connection``: what has come in, and
how its handler's answer leaves (a message or a stream of them, then the status in
trailers; a failing handler's exception becomes its status, never a traceback on the
wire)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from codemode.codex_host.wire.grpc_status import (
    Headers,
    Method,
    RpcError,
    Status,
    WithMetadata,
    failed,
)


class Stream:
    """One request stream. (A plain class, not a dataclass: see ``session/model.py``.)"""

    __slots__ = ("answered", "body", "id", "metadata", "path", "replied", "task", "timer")

    def __init__(self, id: int, path: str) -> None:
        self.id = id
        self.path = path
        self.body = bytearray()
        self.answered = False  # its request was read (or refused): nothing more comes in
        self.replied = False  # response headers sent
        self.metadata: Headers = []  # the handler's own response headers, sent with them
        self.task: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None  # its grpc-timeout

    def finish(self) -> None:
        """The RPC has ended: its deadline no longer matters."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def cancel(self) -> None:
        """The RPC is abandoned (reset, deadline, connection gone): its handler stops."""
        self.finish()
        if self.task is not None:
            self.task.cancel()


class Sender(Protocol):
    """What an RPC needs of its connection."""

    def headers(self, stream: Stream) -> None: ...

    def send_whole(self, stream: Stream, message: bytes) -> bool: ...

    async def send(self, stream: Stream, message: bytes, last: bool = False) -> None: ...

    def trailers(self, stream: Stream, code: Status, message: str) -> None: ...

    def owe(self, stream: Stream, reply: bytes) -> None: ...

    def live(self, stream: Stream) -> bool: ...


@runtime_checkable
class Pushed(Protocol):
    """A streaming handler's replies that may also be sent as they are made: given a
    ``push`` that sends one message now, when the stream's windows have room, and says
    whether it did. A message made while the stream waits idle for its next one then
    leaves in the step that made it, not a turn of the event loop later (a nested
    call's ``ToolCall``: docs/codex-host.md)."""

    def push_with(self, push: Callable[[Any], bool]) -> None: ...


def answer_now(conn: Sender, stream: Stream, method: Method, request: Any) -> None:
    """An RPC that never waits, answered without a task: its handler runs now, its
    answer leaves with the connection's next write (``Sender.owe``), or a status."""
    try:
        reply = method.handler(request).SerializeToString()
    except RpcError as exc:
        conn.trailers(stream, exc.code, str(exc))
        return
    except Exception as exc:  # a bug: a status, never a traceback on the wire
        conn.trailers(stream, Status.INTERNAL, failed(exc))
        return
    conn.owe(stream, reply)


def answer(conn: Sender, stream: Stream, reply: bytes) -> None:
    """``reply`` and OK trailers: in one write, or sent as the peer's windows open."""
    if conn.send_whole(stream, reply):
        conn.trailers(stream, Status.OK, "")
    else:  # no room in the windows now: sent as they open
        stream.task = asyncio.ensure_future(conn.send(stream, reply, last=True))


async def serve(conn: Sender, stream: Stream, method: Method, request: Any) -> None:
    """Run ``method``'s handler on ``request`` and send what it answers."""
    replies: Any = None
    try:
        if not method.streaming:
            answer = await method.handler(request)
            if isinstance(answer, WithMetadata):
                stream.metadata, answer = answer.metadata, answer.message
            await conn.send(stream, answer.SerializeToString(), last=True)
            return
        replies = await method.handler(request)
        # The response headers leave now: a client (Codex) waits for them on a stream
        # that may carry no message for a long time (a tool-call subscription).
        conn.headers(stream)
        if isinstance(replies, Pushed):
            replies.push_with(
                lambda message: (
                    conn.live(stream) and conn.send_whole(stream, message.SerializeToString())
                )
            )
        async for message in replies:
            await conn.send(stream, message.SerializeToString())
        conn.trailers(stream, Status.OK, "")
    except RpcError as exc:
        conn.trailers(stream, exc.code, str(exc))
    except asyncio.CancelledError:
        pass  # reset by the client, past its deadline, or the connection ended
    except Exception as exc:  # a bug: a status, never a traceback on the wire
        conn.trailers(stream, Status.INTERNAL, failed(exc))
    finally:
        if replies is not None:
            with contextlib.suppress(Exception):
                await replies.aclose()
