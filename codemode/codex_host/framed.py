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
from typing import Any

from codemode.codex_host.framed_frames import (
    MAX_FRAME,
    FrameError,
    Unreadable,
    encode_frame,
    read_frame,
)
from codemode.codex_host.limits import ClientBounds, LimitReached, admit_session
from codemode.codex_host.model import ImageItem, NestedCall, Outcome, ToolFailed, ToolSpec
from codemode.codex_host.runtime import CellBusy, CodeSession, SessionLimits
from codemode.codex_host.stdin_reader import pollable, pump

VERSION = 1
# How long an outcome waits for the client to acknowledge the cell's notifications.
_NOTE_WAIT_S = 2.0
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


def knows_timings(hello: dict[str, Any]) -> bool:
    """Whether the client's hello shows it knows the outcome timings (``TIMED_REVISION``)."""
    offered = hello.get("optionalCapabilities")
    return isinstance(offered, list) and any(
        isinstance(c, str) and c in TIMED_REVISION for c in offered
    )


def wire_outcome(outcome: Outcome, timed: bool = False) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for item in outcome.items:
        if isinstance(item, ImageItem):
            image: dict[str, Any] = {"type": "input_image", "image_url": item.image_url}
            if item.detail is not None:
                image["detail"] = item.detail
            items.append(image)
        else:
            items.append({"type": "input_text", "text": item.text})
    body: dict[str, Any] = {"cell_id": outcome.cell_id, "content_items": items}
    if outcome.kind == "completed":
        body["error_text"] = outcome.error_text
        if timed:
            # An outcome is sent as soon as it is known: none waits for its reader.
            body["result_buffered_for_ns"] = 0
    if timed:
        body["code_mode_host_duration_ns"] = max(1, outcome.duration_ns)
    return {_KIND[outcome.kind]: body}


def tool_spec(data: dict[str, Any]) -> ToolSpec:
    name = data.get("tool_name") or {}
    return ToolSpec(
        name=str(data["name"]),
        tool_name=str(name.get("name") or data["name"]),
        namespace=name.get("namespace"),
        description=str(data.get("description") or ""),
        freeform=data.get("kind") == "freeform",
        input_schema=data.get("input_schema"),
        output_schema=data.get("output_schema"),
    )


class _Session:
    """The runtime's delegate for one framed session: calls become delegate requests."""

    def __init__(self, conn: FramedConnection, session_id: str, limits: SessionLimits) -> None:
        self.conn = conn
        self.id = session_id
        self.code = CodeSession(self, limits)
        self.notes: dict[str, list[asyncio.Future[Any]]] = {}
        # Cells that ended whose ``cell/closed`` is not sent yet (see ``cell_closed``).
        self.closing: set[str] = set()

    async def call_tool(self, call: NestedCall) -> Any:
        tool = call.tool
        invocation = {
            "cell_id": call.cell_id,
            "runtime_tool_call_id": call.runtime_call_id,
            "tool_name": {"name": tool.tool_name, "namespace": tool.namespace},
            "tool_kind": "freeform" if tool.freeform else "function",
            "input": call.input,
        }
        result = await self.conn.delegate(
            self.id, {"type": "tool/invoke", "invocation": invocation}
        )
        if result.get("status") != "ok":
            raise ToolFailed(str(result.get("message", "the tool failed")))
        value = result.get("value") or {}
        return value.get("result") if isinstance(value, dict) else None

    def notify(self, cell_id: str, execution_id: str, call_id: str, text: str) -> None:
        request = {"type": "notification/send", "callId": call_id, "cellId": cell_id, "text": text}
        # Sent now, before anything the program does next; the cell's next outcome waits
        # for the client to say it delivered it (Codex 0.148 drops a notification that
        # arrives after its exec's result).
        task = asyncio.ensure_future(self.conn.delegate(self.id, request, eager=True))
        self.notes.setdefault(cell_id, []).append(task)

    async def delivered(self, cell_id: str) -> None:
        """Until the client has answered the cell's notifications (a few seconds at most)."""
        tasks = self.notes.get(cell_id, [])
        if tasks:
            await asyncio.wait(tasks, timeout=_NOTE_WAIT_S)
            self.notes[cell_id] = [t for t in tasks if not t.done()]

    def cell_closed(self, cell_id: str, execution_id: str, final_sequence: int) -> None:
        # Not sent yet: Codex 0.148 drops a notification of a cell it has been told is
        # closed (its reader hands the notification to a task, then marks the cell
        # closed at once; the task then finds a closed cell). ``closed`` sends it once
        # the cell's notifications are answered and its outcome is sent; a cell that
        # ends with no operation observing it (a session shutdown) is closed soon.
        self.closing.add(cell_id)
        self.conn.spawn(self._close_soon(cell_id))

    def closed(self, cell_id: str) -> None:
        """Say ``cell/closed`` for a cell that ended, if not said yet."""
        if cell_id in self.closing:
            self.closing.discard(cell_id)
            self.notes.pop(cell_id, None)
            self.conn.send({"type": "cell/closed", "sessionId": self.id, "cellId": cell_id})

    async def _close_soon(self, cell_id: str) -> None:
        await self.delivered(cell_id)
        # A turn of the loop more: the operation observing the cell sends its outcome
        # first (it was waiting on the same notifications).
        await asyncio.sleep(0)
        self.closed(cell_id)


class FramedConnection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        out_fd: int,
        limits: SessionLimits,
        bounds: ClientBounds | None = None,
    ) -> None:
        self.reader = reader
        self.out_fd = out_fd
        self.limits = limits
        self.bounds = bounds or ClientBounds()
        self.sessions: dict[str, _Session] = {}
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.timed = False  # outcomes carry the timings (``knows_timings``)

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode_frame(message))
        while data:
            data = data[os.write(self.out_fd, data) :]

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def delegate(self, session_id: str, request: dict[str, Any], *, eager: bool = False) -> Any:
        """The client's answer to a delegate request; ``eager``: the request is sent
        now, not when the returned coroutine first runs."""
        delegate_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[delegate_id] = future
        frame = {
            "type": "delegate/request",
            "id": delegate_id,
            "sessionId": session_id,
            "request": request,
        }
        if eager:
            self.send(frame)
        return self._answer(delegate_id, future, None if eager else frame)

    async def _answer(
        self,
        delegate_id: int,
        future: asyncio.Future[dict[str, Any]],
        frame: dict[str, Any] | None,
    ) -> dict[str, Any]:
        if frame is not None:
            self.send(frame)
        try:
            result: dict[str, Any] = await future
            return result
        except asyncio.CancelledError:
            if self.waiting.pop(delegate_id, None) is not None:
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
            future = self.waiting.pop(frame.id, None)
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
        self.send({"type": "connection/ready", "selectedVersion": VERSION, "capabilities": []})
        return True

    def _dispatch(self, message: Any) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "delegate/response":
            future = self.waiting.pop(message.get("id"), None)
            if future is not None and not future.done():
                result = message.get("result")
                future.set_result(result if isinstance(result, dict) else _err("bad response"))
        elif kind == "operation/request":
            self.spawn(self._operation(message.get("id"), message.get("request")))

    def _respond(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"type": "operation/response", "id": request_id, "result": result})

    async def _operation(self, request_id: Any, request: Any) -> None:
        try:
            await self._operate(request_id, request if isinstance(request, dict) else {})
        except (CellBusy, LimitReached) as exc:
            self._respond(request_id, _err(str(exc)))
        except (KeyError, TypeError, ValueError) as exc:
            self.send(
                {
                    "type": "operation/response",
                    "id": request_id,
                    "result": _err(f"bad request: {exc}"),
                }
            )

    async def _operate(self, request_id: Any, request: dict[str, Any]) -> None:
        method = request.get("method")
        session_id = str(request.get("sessionId", ""))

        def respond(value: Any) -> None:
            self.send({"type": "operation/response", "id": request_id, "result": _ok(value)})

        if method == "session/open":
            if not session_id or session_id in self.sessions:
                raise ValueError(f"session {session_id!r} cannot be opened")
            admit_session(len(self.sessions), self.bounds)
            self.sessions[session_id] = _Session(self, session_id, self.limits)
            respond({"type": "session/ready", "sessionId": session_id})
            return
        session = self.sessions.get(session_id)
        if session is None:
            raise KeyError(f"unknown session {session_id!r}")
        code = session.code
        if method == "session/execute":
            body = request["request"]
            cell = code.start(
                str(body["source"]),
                [tool_spec(t) for t in body.get("enabled_tools") or []],
                execution_id=str(body.get("tool_call_id", "")),
                tool_call_id=str(body.get("tool_call_id", "")),
                max_output_tokens=body.get("max_output_tokens"),
                cell_id=request.get("cellId"),
            )
            respond({"type": "execution/started", "cellId": cell.id})
            outcome = await code.observe(cell, code.yield_ms(body.get("yield_time_ms")))
            await session.delivered(cell.id)
            self.send(
                {
                    "type": "execute/initialResponse",
                    "id": request_id,
                    "result": _ok(wire_outcome(outcome, self.timed)),
                }
            )
            session.closed(cell.id)
        elif method in ("session/wait", "session/terminate"):
            if method == "session/wait":
                body = request["request"]
                cell_id = str(body["cell_id"])
                got = await code.wait(cell_id, int(body.get("yield_time_ms") or 0))
            else:
                cell_id = str(request["cellId"])
                got = await code.terminate(cell_id)
            await session.delivered(cell_id)
            if got is None:
                missing = Outcome("completed", cell_id, [], f"exec cell {cell_id} not found")
                outcome_json = {"MissingCell": wire_outcome(missing, self.timed)}
            else:
                outcome_json = {"LiveCell": wire_outcome(got, self.timed)}
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
    if pollable(in_fd):
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", buffering=0)
        )
    else:  # a regular file or /dev/null: read on a thread
        pump(loop, in_fd, reader.feed_data, reader.feed_eof)
    return await FramedConnection(reader, out_fd, limits, bounds).run()
