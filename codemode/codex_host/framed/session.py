"""A framed session's Codex side: its runtime session, the notifications its cells sent
(an outcome waits until the client answered them), when it says ``cell/closed``, and
each exec's delegate (``FramedExecution``: calls and notifications become
``delegate/request`` frames). ``framed/protocol.py`` serves the protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Protocol

from codemode.codex_host.session.execution import CodexExecution
from codemode.codex_host.session.limits import ConnectionCells
from codemode.codex_host.session.model import ToolFailed, ToolSpec
from codemode.codex_host.session.runtime import CodexSession, SessionLimits
from codemode.codex_host.session.truncation import DEFAULT_MAX_TOKENS


class FramedConnection(Protocol):
    """What a session needs of its connection (``framed.FramedConnection``)."""

    cells: ConnectionCells  # what its sessions' cells hold, across them

    def send(self, message: dict[str, Any]) -> None: ...

    def spawn(self, coro: Any) -> None: ...

    def delegate(
        self, session_id: str, request: dict[str, Any], *, eager: bool = False
    ) -> Awaitable[dict[str, Any]]: ...


# What a program's call past the connection's delegate capacity fails with (the
# capacity: ``framed/protocol.py``): Codex's host's words.
OVER_CAPACITY = "code-mode host has too many pending delegate calls"


class OverCapacity(Exception):
    """The client has its capacity of delegate requests unanswered: this one is not sent."""


# How long an outcome waits for the client to acknowledge the cell's notifications.
_NOTE_WAIT_S = 2.0


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


class FramedSession:
    """One framed session: its runtime session, and the notifications its cells sent."""

    def __init__(
        self,
        conn: FramedConnection,
        session_id: str,
        limits: SessionLimits,
        truncates: bool = False,
    ) -> None:
        self.conn = conn
        self.id = session_id
        # session/open's "outputTruncation": "server": the host cuts each report to its
        # execute's max_output_tokens.
        self.truncates = truncates
        self.code = CodexSession(limits, conn.cells)  # its cells count on the connection's too
        self.notes: dict[str, list[asyncio.Future[Any]]] = {}
        # Cells that ended whose ``cell/closed`` is not sent yet (see ``cell_closed``).
        self.closing: set[str] = set()

    async def delivered(self, cell_id: str) -> None:
        """Until the client has answered the cell's notifications (a few seconds at most)."""
        tasks = self.notes.get(cell_id, [])
        if tasks:
            await asyncio.wait(tasks, timeout=_NOTE_WAIT_S)
            self.notes[cell_id] = [t for t in tasks if not t.done()]

    def cell_closed(self, cell_id: str) -> None:
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


class FramedExecution(CodexExecution):
    """One exec's delegate: its calls and notifications become delegate requests."""

    def __init__(self, session: FramedSession, body: dict[str, Any]) -> None:
        call_id = str(body.get("tool_call_id", ""))
        revision = body.get("catalog_revision")
        tools = session.code.catalog.tools(
            revision if isinstance(revision, int) and not isinstance(revision, bool) else None,
            [tool_spec(t) for t in body.get("enabled_tools") or []],
        )
        super().__init__(session.code, call_id, call_id, tools)
        self.framed = session
        if session.truncates:
            limit = body.get("max_output_tokens")
            if isinstance(limit, int) and not isinstance(limit, bool):
                self.cut_to = max(0, limit)
            else:
                self.cut_to = DEFAULT_MAX_TOKENS

    async def invoke(self, tool: ToolSpec, sequence: int, input: Any) -> Any:
        invocation = {
            "cell_id": self.cell_id,
            "runtime_tool_call_id": f"tool-{sequence}",
            "tool_name": {"name": tool.tool_name, "namespace": tool.namespace},
            "tool_kind": "freeform" if tool.freeform else "function",
            "input": input,
        }
        session = self.framed
        try:
            answer = session.conn.delegate(
                session.id, {"type": "tool/invoke", "invocation": invocation}
            )
        except OverCapacity as exc:
            raise ToolFailed(str(exc)) from None
        result = await answer
        if result.get("status") != "ok":
            raise ToolFailed(str(result.get("message", "the tool failed")))
        value = result.get("value") or {}
        return value.get("result") if isinstance(value, dict) else None

    def send_notification(self, text: str) -> None:
        session = self.framed
        request = {
            "type": "notification/send",
            "callId": self.tool_call_id,
            "cellId": self.cell_id,
            "text": text,
        }
        # Sent now, before anything the program does next; the cell's next outcome waits
        # for the client to say it delivered it (Codex 0.148 drops a notification that
        # arrives after its exec's result).
        try:
            answer = session.conn.delegate(session.id, request, eager=True)
        except OverCapacity as exc:
            # Not queued: the client has its capacity of requests unanswered (Codex's host
            # stops the program here; this one goes on, and its report says so).
            why = "the client has not answered the host's earlier requests"
            self.unsent_notification(why if str(exc) == OVER_CAPACITY else str(exc))
            return
        task = asyncio.ensure_future(answer)
        session.notes.setdefault(self.cell_id, []).append(task)

    def closed(self) -> None:
        self.framed.cell_closed(self.cell_id)
