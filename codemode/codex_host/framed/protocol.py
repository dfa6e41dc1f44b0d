"""The framed stdio protocol (version 1), as Codex 0.148 speaks it to a host it starts with
no arguments: JSON messages, each after its length as four little-endian bytes.

The client says ``connection/hello`` (versions, required and optional capabilities), the
host answers ``connection/ready`` or ``connection/rejected``; then ``operation/request``
frames (``session/open``, ``session/execute``, ``session/wait``, ``session/terminate``,
``session/shutdown``) are answered by ``operation/response`` (and, for an execute, an
``execute/initialResponse`` with the first outcome), while the host sends
``delegate/request`` frames (``tool/invoke``, ``notification/send``) that the client
answers with ``delegate/response``. Field names follow Codex's message definitions
(``codex-rs/code-mode-protocol/src/host/``): camelCase in the envelopes, snake_case in
the payloads.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from typing import Any

from codemode.codex_host.framed.frames import (
    MAX_FRAME,
    FrameError,
    Unreadable,
    encode_frame,
    read_frame,
)
from codemode.codex_host.framed.session import (
    OVER_CAPACITY,
    FramedExecution,
    FramedSession,
    OverCapacity,
)
from codemode.codex_host.session.limits import (
    ClientBounds,
    ConnectionCells,
    HeldForClient,
    LimitReached,
    admit_session,
)
from codemode.codex_host.session.model import ImageItem
from codemode.codex_host.session.runtime import CellBusy, CodexSession, Reported, SessionLimits
from codemode.codex_host.wire.stdio import Write, pump, through_loop, writer

VERSION = 1
_KIND = {"yielded": "Yielded", "terminated": "Terminated", "completed": "Result"}
# The optional capabilities of the protocol's revision that added the outcome timings
# (``code_mode_host_duration_ns``, ``result_buffered_for_ns``) with ``yield-observation``.
# Both revisions say version 1, and each client refuses the other's outcomes: Codex 0.171
# one without the timings ("missing field"), 0.148 one with them ("unknown field"). 0.148
# offers only ``session-cell-execution-resource-limits``; a client that offers any of
# these knows the timings.
TIMED_REVISION = frozenset(
    {"yield-observation", "bounded-output-v1", "delegate-capacity-4096", "tool-catalog-revision-v1"}
)


def _ok(value: Any) -> dict[str, Any]:
    return {"status": "ok", "value": value}


def _err(message: str) -> dict[str, Any]:
    return {"status": "error", "message": message}


# The optional capabilities the host grants a client that offers them: output bounded as
# Codex's host bounds it (``session/bounded_output.py``, with the host truncating), the
# client's word that it takes 4,096 delegate requests at once, and tool catalog
# revisions (``session/catalog.py``; an execute's sixth field, ``catalog_revision``).
GRANTED = ("bounded-output-v1", "delegate-capacity-4096", "tool-catalog-revision-v1")
# Delegate requests (tool calls and notifications) the host leaves unanswered with its
# client at once, across the connection's sessions, as Codex 0.171's host holds them:
# 4,096 for a client granted ``delegate-capacity-4096``, else 1,024.
CAPACITY_GRANTED = 4096
CAPACITY = 1024


def knows_timings(hello: dict[str, Any]) -> bool:
    """Whether the client's hello shows it knows the outcome timings (``TIMED_REVISION``)."""
    offered = hello.get("optionalCapabilities")
    return isinstance(offered, list) and any(
        isinstance(c, str) and c in TIMED_REVISION for c in offered
    )


def wire_outcome(
    code: CodexSession, reported: Reported, started_ns: int, timed: bool = False
) -> dict[str, Any]:
    outcome, content = reported.outcome, reported.items
    items: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, ImageItem):
            image: dict[str, Any] = {"type": "input_image", "image_url": item.image_url}
            if item.detail is not None:
                image["detail"] = item.detail
            items.append(image)
        else:
            items.append({"type": "input_text", "text": item.text})
    body: dict[str, Any] = {"cell_id": outcome.cell_id, "content_items": items}
    if outcome.kind == "completed":
        body["error_text"] = code.error_text(outcome)
        if timed:
            # Since the request that reports it came (0 when it was there first).
            body["result_buffered_for_ns"] = reported.buffered_ns(started_ns)
    if timed:
        body["code_mode_host_duration_ns"] = max(1, time.monotonic_ns() - started_ns)
    return {_KIND[outcome.kind]: body}


class FramedConnection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        write: Write,
        limits: SessionLimits,
        bounds: ClientBounds | None = None,
    ) -> None:
        self.reader = reader
        self.write = write
        self.limits = limits
        self.bounds = bounds or ClientBounds()
        self.sessions: dict[str, FramedSession] = {}
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        # The bytes of the delegate requests in ``waiting``, bounded across the sessions.
        self.held = HeldForClient()
        self.costs: dict[int, int] = {}
        self.cells = ConnectionCells(self.bounds.max_connection_cells)  # across the sessions
        self.ids = itertools.count(1)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.timed = False  # outcomes carry the timings (``knows_timings``)
        self.capacity = CAPACITY  # delegate requests unanswered at once (``delegate``)

    def send(self, message: dict[str, Any]) -> None:
        self.write(encode_frame(message))

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def delegate(self, session_id: str, request: dict[str, Any], *, eager: bool = False) -> Any:
        """The client's answer to a delegate request; ``eager``: the request is sent
        now, not when the returned coroutine first runs. ``OverCapacity`` (at once) when
        the client already has ``capacity`` requests unanswered: nothing more is queued."""
        if len(self.waiting) >= self.capacity:
            raise OverCapacity(OVER_CAPACITY)
        delegate_id = next(self.ids)
        frame = encode_frame(
            {
                "type": "delegate/request",
                "id": delegate_id,
                "sessionId": session_id,
                "request": request,
            }
        )
        # Held until answered, written or not (a client that does not read leaves them
        # in the writer): bounded in bytes as well as in count.
        cost = self.held.take(len(frame))
        if not cost:
            raise OverCapacity(self.held.refusal())
        future = asyncio.get_running_loop().create_future()
        self.waiting[delegate_id] = future
        self.costs[delegate_id] = cost
        if eager:
            self.write(frame)
        return self._answer(delegate_id, future, None if eager else frame)

    def settle(self, delegate_id: Any) -> asyncio.Future[dict[str, Any]] | None:
        """The delegate request's future, no longer waiting (None if it was not)."""
        if type(delegate_id) is not int:  # a client's id may be any JSON value: ours are ints
            return None
        future = self.waiting.pop(delegate_id, None)
        if future is not None:
            self.held.give(self.costs.pop(delegate_id))
        return future

    async def _answer(
        self,
        delegate_id: int,
        future: asyncio.Future[dict[str, Any]],
        frame: bytes | None,
    ) -> dict[str, Any]:
        if frame is not None:
            self.write(frame)
        try:
            result: dict[str, Any] = await future
            return result
        except asyncio.CancelledError:
            if self.settle(delegate_id) is not None:
                self.send({"type": "delegate/cancel", "id": delegate_id})
            raise

    async def run(self) -> int:
        try:
            hello = await read_frame(self.reader)
        except FrameError as exc:
            self._reject("invalidHello", message=str(exc))
            return 1
        if hello is None:
            return 0
        if isinstance(hello, Unreadable):
            self._reject("invalidHello", message=hello.reason)
            return 1
        if not self._handshake(hello):
            return 1
        try:
            while (message := await read_frame(self.reader)) is not None:
                if isinstance(message, Unreadable):
                    self._refuse(message)
                else:
                    self._dispatch(message)
        except FrameError:
            return 1
        finally:
            for session in list(self.sessions.values()):
                await session.code.close()
            for task in list(self.tasks):
                task.cancel()
        return 0

    def _refuse(self, frame: Unreadable) -> None:
        """An unreadable frame: its request (or the tool result it carried) fails with
        the reason, where its id could be read; the connection goes on either way."""
        print(f"code-mode host: refused a frame: {frame.reason}", file=sys.stderr, flush=True)
        if frame.id is None:
            return
        if frame.kind == "operation/request":
            self._respond(frame.id, _err(f"refused: {frame.reason}"))
        elif frame.kind == "delegate/response":
            future = self.settle(frame.id)
            if future is not None and not future.done():
                future.set_result(_err(f"the tool's result was refused: {frame.reason}"))

    def _reject(self, kind: str, **fields: Any) -> None:
        self.send({"type": "connection/rejected", "reason": {"type": kind, **fields}})

    def _handshake(self, hello: Any) -> bool:
        if not isinstance(hello, dict) or hello.get("type") != "connection/hello":
            self._reject("invalidHello", message="the first frame must be connection/hello")
            return False
        versions = hello.get("supportedVersions")
        if not isinstance(versions, list) or VERSION not in versions:
            self._reject("noCompatibleVersion", supportedVersions=[VERSION])
            return False
        for capability in hello.get("requiredCapabilities") or []:
            self._reject("missingRequiredCapability", capability=capability)
            return False
        self.timed = knows_timings(hello)
        offered = hello.get("optionalCapabilities")
        granted = [c for c in GRANTED if isinstance(offered, list) and c in offered]
        if "delegate-capacity-4096" in granted:
            self.capacity = CAPACITY_GRANTED
        self.send({"type": "connection/ready", "selectedVersion": VERSION, "capabilities": granted})
        return True

    def _dispatch(self, message: Any) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "delegate/response":
            future = self.settle(message.get("id"))
            if future is not None and not future.done():
                result = message.get("result")
                future.set_result(result if isinstance(result, dict) else _err("bad response"))
        elif kind == "operation/request":
            self.spawn(self._operation(message.get("id"), message.get("request")))

    def _missing(self, cell_id: str, started_ns: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "Result": {
                "cell_id": cell_id,
                "content_items": [],
                "error_text": f"exec cell {cell_id} not found",
            }
        }
        if self.timed:
            body["Result"]["result_buffered_for_ns"] = 0
            body["Result"]["code_mode_host_duration_ns"] = max(1, time.monotonic_ns() - started_ns)
        return body

    def _respond(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"type": "operation/response", "id": request_id, "result": result})

    async def _operation(self, request_id: Any, request: Any) -> None:
        try:
            await self._operate(request_id, request if isinstance(request, dict) else {})
        except (CellBusy, LimitReached) as exc:
            self._respond(request_id, _err(str(exc)))
        except (KeyError, TypeError, ValueError) as exc:
            self._respond(request_id, _err(f"bad request: {exc}"))
        except Exception as exc:  # a field of an unexpected type: an answer, not a traceback
            self._respond(request_id, _err(f"bad request: {type(exc).__name__}: {exc}"))

    async def _operate(self, request_id: Any, request: dict[str, Any]) -> None:
        method = request.get("method")
        session_id = str(request.get("sessionId", ""))

        def respond(value: Any) -> None:
            self.send({"type": "operation/response", "id": request_id, "result": _ok(value)})

        if method == "session/open":
            if not session_id or session_id in self.sessions:
                raise ValueError(f"session {session_id!r} cannot be opened")
            mode = request.get("outputTruncation")
            if mode not in (None, "client", "server"):
                raise ValueError(f"unknown code-mode output truncation mode {mode!r}")
            admit_session(len(self.sessions), self.bounds)
            self.sessions[session_id] = FramedSession(
                self, session_id, self.limits, truncates=mode == "server"
            )
            respond({"type": "session/ready", "sessionId": session_id})
            return
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(f"unknown session {session_id!r}")
        code = session.code
        if method == "session/execute":
            started = time.monotonic_ns()
            body = request["request"]
            execution = FramedExecution(session, body)
            task = code.start(execution, str(body["source"]), body.get("yield_time_ms"))
            try:
                await code.opened(execution, task)
                respond({"type": "execution/started", "cellId": execution.cell_id})
                reported = await code.first(execution, task)
            finally:
                task.cancel()  # the connection ended first: the program with it
            cell_id = execution.cell_id
            await session.delivered(cell_id)
            self.send(
                {
                    "type": "execute/initialResponse",
                    "id": request_id,
                    "result": _ok(wire_outcome(code, reported, started, self.timed)),
                }
            )
            session.closed(cell_id)
        elif method in ("session/wait", "session/terminate"):
            started = time.monotonic_ns()
            if method == "session/wait":
                body = request["request"]
                cell_id = str(body["cell_id"])
                got = await code.wait(cell_id, int(body.get("yield_time_ms") or 0))
            else:
                cell_id = str(request["cellId"])
                got = await code.terminate(cell_id)
            await session.delivered(cell_id)
            if got is None:
                outcome_json = {"MissingCell": self._missing(cell_id, started)}
            else:
                outcome_json = {"LiveCell": wire_outcome(code, got, started, self.timed)}
            respond({"type": "wait/completed", "outcome": outcome_json})
            session.closed(cell_id)
        elif method == "session/shutdown":
            self.sessions.pop(session_id, None)
            await code.close()
            respond({"type": "session/closed", "sessionId": session_id})
        else:
            raise ValueError(f"unknown method {method!r}")


async def serve_framed(
    in_fd: int, out_fd: int, limits: SessionLimits, bounds: ClientBounds | None = None
) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_FRAME + 4)
    reading: list[asyncio.ReadTransport] = []

    # A client that does not read its answers is not read from until it does; the loop
    # goes on meanwhile (its programs' time limits, its other sessions): ``wire/stdio.py``.
    def pause() -> None:
        for transport in reading:
            transport.pause_reading()

    def resume() -> None:
        for transport in reading:
            transport.resume_reading()

    # (The client closing its end ends the connection.)
    out = await writer(out_fd, lambda exc: reader.feed_eof(), pause, resume)
    connection = FramedConnection(reader, out.write, limits, bounds)
    if through_loop(in_fd):
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", buffering=0)
        )
        reading.append(transport)
    else:  # a regular file, /dev/null or a terminal: read on a thread
        pump(loop, in_fd, reader.feed_data, reader.feed_eof)
    status = await connection.run()
    await out.flushed()  # (its end of input came first: what it was answered still goes)
    return status

