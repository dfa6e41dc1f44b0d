"""One gRPC session: its event stream, its tool-call subscriptions, the calls in flight.

Each exec's delegate is a ``GrpcExecution``: a program's nested tool call becomes a
``ToolCall`` routed to exactly one matching subscription (queued until one exists) and
waits for the client's ``CompleteToolCall``; ``notify()`` and a cell's end become
session events.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from codemode.codex_host.session.execution import CodexExecution
from codemode.codex_host.session.items import well_formed
from codemode.codex_host.session.limits import ConnectionCells, HeldForClient
from codemode.codex_host.session.model import ToolFailed, ToolSpec
from codemode.codex_host.session.runtime import CodexSession, SessionLimits
from codemode.codex_host.session.truncation import DEFAULT_MAX_TOKENS
from codemode.codex_host.wire.messages import pb

FUNCTION = pb.enums["ToolKind"]["TOOL_KIND_FUNCTION"]
FREEFORM = pb.enums["ToolKind"]["TOOL_KIND_FREEFORM"]
# Notifications a session queues for a client that does not read its stream, and those
# whose ids it keeps for an acknowledgement (docs/codex-host.md, "Bounds").
QUEUED_NOTIFICATIONS = 4096
UNACKNOWLEDGED_KEPT = 4096
# Invocations cancelled or finished recently: a late CompleteToolCall for one of them is
# answered OK and ignored (it crossed the cancellation on another stream).
_RETIRED_KEPT = 4096


# Plain classes, not dataclasses: see ``session/model.py``.
class Subscription:
    """One ``SubscribeToToolCalls`` stream: the calls queued for it, and, while its
    stream waits idle on an empty queue, how a call is sent on it at once (``push``,
    from ``h2_stream.Pushed``): in the step the program made it, not a turn later."""

    __slots__ = ("filters", "idle", "push", "queue")

    def __init__(self, filters: list[tuple[str, str | None]]) -> None:
        self.filters = filters
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.idle = False  # its stream waits on the queue, with no message in flight
        self.push: Callable[[Any], bool] | None = None

    def matches(self, tool: ToolSpec) -> bool:
        return not self.filters or (tool.tool_name, tool.namespace) in self.filters


class Pushable:
    """A subscription's stream of calls (``_tool_calls``), with the way to push a call
    on it directly (``h2_stream.Pushed``) kept on its ``Subscription``."""

    def __init__(self, calls: AsyncGenerator[Any, None], sub: Subscription) -> None:
        self._calls = calls
        self._sub = sub

    def __aiter__(self) -> Pushable:
        return self

    def __anext__(self) -> Awaitable[Any]:
        return self._calls.__anext__()

    async def aclose(self) -> None:
        self._sub.push = None
        await self._calls.aclose()

    def push_with(self, push: Callable[[Any], bool]) -> None:
        self._sub.push = push


class _Pending:
    __slots__ = ("cost", "future", "message", "tool")

    def __init__(
        self, tool: ToolSpec, message: Any, future: asyncio.Future[Any], cost: int = 0
    ) -> None:
        self.tool = tool
        self.message = message  # the pb.ToolCall
        self.future = future
        self.cost = cost  # held for the client (``HeldForClient``) until it completes


class GrpcSession:
    """A session lease: lives as long as the client's OpenSession stream."""

    def __init__(
        self,
        limits: SessionLimits,
        max_pending: int = 0,
        truncates: bool = False,
        held: HeldForClient | None = None,
        cells: ConnectionCells | None = None,
    ) -> None:
        self.id = _new_id()
        # What the connection's sessions hold for its client (tool calls' inputs,
        # notifications not yet sent), bounded in bytes across them; this session's part.
        self.held = held or HeldForClient()
        self._holding = 0
        self._released = False
        self._note_costs: deque[int] = deque()  # of the notifications queued, in order
        # The client asked the host to cut each report to its execute's max_output_tokens.
        self.truncates = truncates
        # The client's max_pending_delegate_calls (0: it set none): the calls it has not
        # completed that the host holds at most; a program's call past it fails at once.
        self.max_pending = max_pending
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.subscriptions: list[Subscription] = []
        self.unrouted: list[_Pending] = []
        self.pending: dict[str, _Pending] = {}
        self.retired: dict[str, None] = {}
        # Notifications not acknowledged yet, the newest ``UNACKNOWLEDGED_KEPT`` (Codex's
        # client need not acknowledge them; an older id is then NOT_FOUND).
        self.notifications: dict[str, None] = {}
        # Notifications queued on ``events`` that its stream has not sent yet (a client
        # that does not read it): past ``QUEUED_NOTIFICATIONS`` a program's are not queued.
        self.queued_notifications = 0
        self.code = CodexSession(limits, cells)  # its cells count on the connection's too
        self.closed = asyncio.Event()
        self._closing: asyncio.Future[None] | None = None

    def execution(self, request: Any) -> GrpcExecution:
        """The delegate of one ``ExecuteRequest``'s cell, with its tools (those of the
        catalog revision it names when it carries none)."""
        revision = request.catalog_revision if request.HasField("catalog_revision") else None
        tools = self.code.catalog.tools(revision, [tool_spec(d) for d in request.enabled_tools])
        execution = GrpcExecution(self, request.execution_id, request.tool_call_id, tools)
        if self.truncates:
            execution.cut_to = (
                request.max_output_tokens
                if request.HasField("max_output_tokens")
                else DEFAULT_MAX_TOKENS
            )
        return execution

    # -- the client's side -------------------------------------------------------------------

    def subscribe(self, filters: list[tuple[str, str | None]]) -> Subscription:
        sub = Subscription(filters)
        self.subscriptions.append(sub)
        waiting, self.unrouted = self.unrouted, []
        for pending in waiting:
            self._route(pending)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """A subscription stream ended: calls it had not delivered go to another one."""
        if sub in self.subscriptions:
            self.subscriptions.remove(sub)
        while not sub.queue.empty():
            pending = sub.queue.get_nowait()
            if isinstance(pending, _Pending) and not pending.future.done():
                self._route(pending)

    def complete(self, invocation_id: str, ok: bool, value: Any) -> bool:
        """False when no such invocation was ever issued to this session.

        No ``ToolResultDelivered`` event follows: Codex 0.169 closes the session on
        receiving one for an ordinary completion."""
        pending = self.pending.pop(invocation_id, None)
        if pending is None:
            return invocation_id in self.retired
        self.let_go(pending.cost)
        self._retire(invocation_id)
        if not pending.future.done():
            if ok:
                pending.future.set_result(value)
            else:
                pending.future.set_exception(ToolFailed(str(value)))
        return True

    def acknowledge(self, notification_id: str) -> bool:
        if notification_id in self.notifications:
            del self.notifications[notification_id]
            return True
        return False

    def sent(self, event: Any) -> None:
        """``event`` left on the session's stream."""
        if event.HasField("notification"):
            self.queued_notifications -= 1
            if self._note_costs:
                self.let_go(self._note_costs.popleft())

    def hold(self, size: int) -> int:
        """Hold ``size`` bytes for the client: the cost, or 0 past the connection's bound."""
        cost = 0 if self._released else self.held.take(size)
        self._holding += cost
        return cost

    def let_go(self, cost: int) -> None:
        if not self._released:
            self._holding -= cost
            self.held.give(cost)

    async def close(self) -> None:
        """Ends the session; a second caller (the lease's stream ending while its
        connection's sessions are closed) waits for the first one's close to finish."""
        if self._closing is None:
            self.closed.set()
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        await self.code.close()
        for pending in list(self.pending.values()):
            if not pending.future.done():
                pending.future.cancel()
        self.pending.clear()
        # Nothing is held for the client any more (queued events go with the stream).
        self.held.give(self._holding)
        self._holding, self._released = 0, True
        for sub in self.subscriptions:
            sub.queue.put_nowait(None)
        self.events.put_nowait(None)

    # -- routing -----------------------------------------------------------------------------

    def _route(self, pending: _Pending) -> None:
        for sub in self.subscriptions:
            if sub.matches(pending.tool):
                push = sub.push
                # Sent now only behind nothing: ``idle`` holds while the stream's
                # sender waits on the empty queue, so no earlier call is in flight.
                if sub.idle and push is not None and push(pending.message):
                    return
                sub.idle = False  # queued: the calls after it queue behind it
                sub.queue.put_nowait(pending)
                return
        self.unrouted.append(pending)

    def _unroute(self, pending: _Pending) -> None:
        if pending in self.unrouted:
            self.unrouted.remove(pending)

    def _retire(self, invocation_id: str) -> None:
        self.retired[invocation_id] = None
        while len(self.retired) > _RETIRED_KEPT:
            del self.retired[next(iter(self.retired))]


def _new_id() -> str:
    """A random (version 4) UUID's text, as ``str(uuid.uuid4())`` gives, without the
    uuid module (its import is part of the host's start) and at a third of the cost."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _tool_name(tool: ToolSpec) -> Any:
    name = pb.ToolName(name=tool.tool_name)
    if tool.namespace is not None:
        name.namespace = tool.namespace
    return name


def tool_spec(definition: Any) -> ToolSpec:
    """A ``pb.ToolDefinition`` as the runtime's ``ToolSpec``. Its schemas stay the JSON
    text the client sent: nothing reads them (a program sees names and descriptions),
    and decoding 4 MiB of tiny JSON elements cost more CPU than all the rest of a
    request (tests/test_codex_host_decode_cost.py)."""

    def schema(field_name: str) -> bytes | None:
        return getattr(definition, field_name) if definition.HasField(field_name) else None

    tool_name = definition.tool_name
    return ToolSpec(
        name=definition.name,
        tool_name=tool_name.name or definition.name,
        namespace=tool_name.namespace if tool_name.HasField("namespace") else None,
        description=definition.description,
        freeform=definition.kind == FREEFORM,
        input_schema=schema("input_schema_json"),
        output_schema=schema("output_schema_json"),
    )


class GrpcExecution(CodexExecution):
    """One exec's delegate: its calls become ``ToolCall``s, its notifications and its
    end session events."""

    def __init__(
        self, grpc: GrpcSession, execution_id: str, tool_call_id: str, tools: list[ToolSpec]
    ) -> None:
        super().__init__(grpc.code, execution_id, tool_call_id, tools)
        self.grpc = grpc

    async def invoke(self, tool: ToolSpec, sequence: int, input: Any) -> Any:
        grpc = self.grpc
        if grpc.max_pending and len(grpc.pending) >= grpc.max_pending:
            raise ToolFailed(
                f"{len(grpc.pending)} tool calls are already pending, the most this session's "
                "client takes (its max_pending_delegate_calls): this call was not made"
            )
        invocation_id = _new_id()
        message = pb.ToolCall(
            session_id=grpc.id,
            execution_id=self.execution_id,
            cell_id=self.cell_id,
            invocation_id=invocation_id,
            runtime_tool_call_id=f"tool-{sequence}",
            tool_name=_tool_name(tool),
            tool_kind=FREEFORM if tool.freeform else FUNCTION,
            sequence=sequence,
        )
        if input is not None:
            message.input_json = well_formed(json.dumps(input, ensure_ascii=False)).encode()
        cost = grpc.hold(len(message.input_json))
        if not cost:
            raise ToolFailed(f"{grpc.held.refusal()}: this call was not made")
        pending = _Pending(tool, message, asyncio.get_running_loop().create_future(), cost)
        grpc.pending[invocation_id] = pending
        grpc._route(pending)
        try:
            return await pending.future
        except asyncio.CancelledError:
            # The program ended (terminated, a limit) while the client ran the tool.
            if grpc.pending.pop(invocation_id, None) is not None:
                grpc.let_go(cost)
                grpc._retire(invocation_id)
                grpc._unroute(pending)
                grpc.events.put_nowait(
                    pb.SessionEvent(
                        tool_call_cancelled=pb.ToolCallCancelled(invocation_id=invocation_id)
                    )
                )
            raise

    def send_notification(self, text: str) -> None:
        grpc = self.grpc
        if grpc.queued_notifications >= QUEUED_NOTIFICATIONS:
            self.unsent_notification(
                f"the client has not read the session's {grpc.queued_notifications} "
                "notifications queued before them"
            )
            return
        cost = grpc.hold(len(text))
        if not cost:
            self.unsent_notification(grpc.held.refusal())
            return
        grpc._note_costs.append(cost)
        notification_id = _new_id()
        notes = grpc.notifications
        notes[notification_id] = None
        if len(notes) > UNACKNOWLEDGED_KEPT:
            del notes[next(iter(notes))]
        grpc.queued_notifications += 1
        grpc.events.put_nowait(
            pb.SessionEvent(
                notification=pb.Notification(
                    notification_id=notification_id,
                    execution_id=self.execution_id,
                    cell_id=self.cell_id,
                    call_id=self.tool_call_id,
                    text=text,
                )
            )
        )

    def closed(self) -> None:
        self.grpc.events.put_nowait(
            pb.SessionEvent(
                cell_closed=pb.CellClosed(
                    execution_id=self.execution_id,
                    cell_id=self.cell_id,
                    final_tool_call_sequence=self.sequence,
                )
            )
        )


async def next_or_heartbeat(queue: asyncio.Queue[Any], interval_s: int, beat: Any) -> Any:
    """The queue's next item, or ``beat`` once ``interval_s`` seconds pass idle (0: no
    heartbeats, the client asked for none)."""
    if interval_s <= 0 or not queue.empty():
        return await queue.get()
    try:
        return await asyncio.wait_for(queue.get(), interval_s)
    except TimeoutError:
        return beat
