"""The ``codex.code_mode.v1.CodeModeHost`` service: each RPC on a ``GrpcSession``.

Every bad request gets a gRPC status and nothing else changes: a body that is not the
message (INVALID_ARGUMENT), an unknown session, cell or invocation (NOT_FOUND), a second
observer of one cell (FAILED_PRECONDITION), a session or cell past the client's bounds
(RESOURCE_EXHAUSTED, ``session/limits.py``). RPCs the service does not define are answered
UNIMPLEMENTED by the server (``wire/h2_connection.py``). A request that holds more fields than
any real one (``wire/decode_budget.py``) is refused RESOURCE_EXHAUSTED before it is decoded.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from codemode.codex_host.grpc.outcomes import BUFFERED_FOR, missing, outcome_message
from codemode.codex_host.grpc.session import (
    GrpcExecution,
    GrpcSession,
    Pushable,
    Subscription,
    next_or_heartbeat,
)
from codemode.codex_host.session.limits import (
    ClientBounds,
    ConnectionCells,
    HeldForClient,
    LimitReached,
    admit_session,
)
from codemode.codex_host.session.metrics import process_figures
from codemode.codex_host.session.runtime import CellBusy, SessionLimits
from codemode.codex_host.wire import decode_budget
from codemode.codex_host.wire.grpc_status import Method, RpcError, Status, WithMetadata
from codemode.codex_host.wire.messages import SERVICE, pb

_SERVER = pb.enums["OutputTruncation"]["OUTPUT_TRUNCATION_SERVER"]
_TRUNCATION_MODES = frozenset(pb.enums["OutputTruncation"].values())


class _Malformed:
    """A request body that did not parse as the RPC's message, or was not read."""

    def __init__(self, error: Exception, code: Status = Status.INVALID_ARGUMENT) -> None:
        self.error = error
        self.code = code


def _deserializer(cls: Any) -> Callable[[bytes], Any]:
    plan = decode_budget.plan(cls.DESCRIPTOR)

    def parse(data: bytes) -> Any:
        try:
            decode_budget.check(data, plan)
            return cls.FromString(data)
        except decode_budget.OverBudget as exc:
            return _Malformed(exc, Status.RESOURCE_EXHAUSTED)
        except Exception as exc:  # DecodeError and the like: a status, never a traceback
            return _Malformed(exc)

    return parse


class CodeModeHostService:
    """The service for one connection: its sessions are that client's alone, and end
    with it (``serve/tcp_clients.py``, and ``serve/server.py`` over stdio, close them when the
    connection ends)."""

    def __init__(self, limits: SessionLimits, bounds: ClientBounds | None = None) -> None:
        self.limits = limits
        self.bounds = bounds or ClientBounds()
        self.sessions: dict[str, GrpcSession] = {}
        self.held = HeldForClient()  # what its sessions hold for this client, in bytes
        self.cells = ConnectionCells(self.bounds.max_connection_cells)  # and their cells

    def methods(self) -> dict[str, Method]:
        """The server's methods by HTTP/2 path (``/codex.code_mode.v1.CodeModeHost/Execute``).

        The RPCs that never wait (``CompleteToolCall``, the one every nested call makes,
        among them) are plain functions, answered as soon as their request is read."""
        methods = {}
        for name, method in pb.methods.items():
            impl = getattr(self, name, None)
            if impl is None:  # in the .proto, not served yet: UNIMPLEMENTED, by the server
                continue
            immediate = not inspect.iscoroutinefunction(impl)
            impl = _traced(name, impl, immediate)
            if method.server_streaming:
                handler = _streaming(impl)
            else:
                handler = _unary_now(impl) if immediate else _unary(impl)
            methods[f"/{SERVICE}/{name}"] = Method(
                deserialize=_deserializer(pb.classes[method.request]),
                handler=handler,
                streaming=method.server_streaming,
                immediate=immediate,
            )
        return methods

    def _session(self, session_id: str) -> GrpcSession:
        session = self.sessions.get(session_id)
        if session is None or session.closed.is_set():
            raise RpcError(Status.NOT_FOUND, f"unknown session {session_id!r}")
        return session

    async def close(self) -> None:
        """Every session ends, its cells and their workers with it (those a lease's end
        is closing already are waited for: a session leaves ``sessions`` once closed)."""
        await asyncio.gather(*(s.close() for s in list(self.sessions.values())))
        self.sessions.clear()

    # -- RPCs ------------------------------------------------------------------------------

    async def OpenSession(self, request: Any) -> AsyncIterator[Any]:
        interval = request.heartbeat_interval_s if request.HasField("heartbeat_interval_s") else 0
        return self._session_events(self._open(request), interval)

    def _open(self, request: Any) -> GrpcSession:
        try:
            admit_session(len(self.sessions), self.bounds)
        except LimitReached as exc:
            raise RpcError(Status.RESOURCE_EXHAUSTED, str(exc)) from None
        if request.output_truncation not in _TRUNCATION_MODES:  # as Codex's host refuses it
            raise RpcError(
                Status.INVALID_ARGUMENT,
                f"unknown code-mode output truncation mode {request.output_truncation}",
            )
        limits = self.limits
        if request.HasField("cell_execution_limits"):
            given = request.cell_execution_limits
            changes: dict[str, Any] = {}
            if given.HasField("max_yield_time_ms"):
                changes["max_yield_ms"] = given.max_yield_time_ms
            if given.HasField("max_heap_size_bytes") and given.max_heap_size_bytes > 0:
                changes["memory_mb"] = max(1, -(-given.max_heap_size_bytes // (1 << 20)))
            limits = limits._replace(**changes)
        session = GrpcSession(
            limits,
            request.max_pending_delegate_calls,
            request.output_truncation == _SERVER,
            self.held,
            self.cells,
        )
        self.sessions[session.id] = session
        return session

    async def _session_events(self, session: GrpcSession, interval: int) -> AsyncIterator[Any]:
        beat = pb.SessionEvent(heartbeat=pb.Heartbeat())
        try:
            opened = pb.SessionOpened(session_id=session.id, supports_catalog_revision=True)
            if session.truncates:  # else absent, as from Codex's host
                opened.output_truncation = _SERVER
            yield pb.SessionEvent(opened=opened)
            while (event := await next_or_heartbeat(session.events, interval, beat)) is not None:
                yield event
                session.sent(event)
        finally:
            # The lease ends with the stream: its cells are terminated.
            await asyncio.shield(session.close())
            self.sessions.pop(session.id, None)

    async def CloseSession(self, request: Any) -> Any:
        session = self._session(request.session_id)
        await session.close()
        self.sessions.pop(session.id, None)
        return pb.CloseSessionResponse()

    async def SubscribeToToolCalls(self, request: Any) -> AsyncIterator[Any]:
        session = self._session(request.session_id)
        filters = [
            (n.name, n.namespace if n.HasField("namespace") else None) for n in request.tool_names
        ]
        interval = request.heartbeat_interval_s if request.HasField("heartbeat_interval_s") else 0
        sub = session.subscribe(filters)
        return Pushable(self._tool_calls(session, sub, interval), sub)

    async def _tool_calls(
        self, session: GrpcSession, sub: Subscription, interval: int
    ) -> AsyncGenerator[Any, None]:
        # A heartbeat carries the session's id and nothing else (Codex refuses one that
        # carries a tool invocation).
        beat = pb.ToolCall(session_id=session.id, heartbeat=pb.Heartbeat())
        try:
            while True:
                sub.idle = sub.queue.empty()  # calls made meanwhile are pushed at once
                pending = await next_or_heartbeat(sub.queue, interval, beat)
                sub.idle = False
                if pending is None:
                    return
                if pending is beat:
                    yield beat
                elif not pending.future.done():  # else cancelled while queued
                    yield pending.message
        finally:
            sub.idle = False
            session.unsubscribe(sub)

    def CompleteToolCall(self, request: Any) -> Any:
        session = self._session(request.session_id)
        which = request.WhichOneof("outcome")
        if which == "succeeded":
            try:
                value = json.loads(request.succeeded.output_json or b"null")
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
                raise RpcError(Status.INVALID_ARGUMENT, f"output_json is not JSON: {exc}") from None
            ok = True
        elif which == "failed":
            ok, value = False, request.failed.message
        else:
            raise RpcError(Status.INVALID_ARGUMENT, "CompleteToolCall needs an outcome")
        if not session.complete(request.invocation_id, ok, value):
            raise RpcError(Status.NOT_FOUND, f"no tool call {request.invocation_id!r} was issued")
        return pb.CompleteToolCallResponse()

    def AcknowledgeNotification(self, request: Any) -> Any:
        session = self._session(request.session_id)
        if not session.acknowledge(request.notification_id):
            raise RpcError(Status.NOT_FOUND, f"no notification {request.notification_id!r}")
        return pb.AcknowledgeNotificationResponse()

    async def Execute(self, request: Any) -> AsyncIterator[Any]:
        started = time.monotonic_ns()
        session = self._session(request.session_id)
        try:  # refused before the stream answers anything
            session.code.check_room()
            execution = session.execution(request)  # its catalog revision kept, or refused
        except LimitReached as exc:
            raise RpcError(Status.RESOURCE_EXHAUSTED, str(exc)) from None
        return self._execute(session, execution, request, started)

    async def _execute(
        self, session: GrpcSession, execution: GrpcExecution, request: Any, started: int
    ) -> AsyncIterator[Any]:
        code = session.code
        yield_ms = request.yield_time_ms if request.HasField("yield_time_ms") else None
        try:  # checked again: another Execute may have taken the room since
            task = code.start(execution, request.source, yield_ms)
        except LimitReached as exc:
            raise RpcError(Status.RESOURCE_EXHAUSTED, str(exc)) from None
        try:
            await code.opened(execution, task)
            yield pb.ExecuteEvent(
                started=pb.ExecutionStarted(
                    execution_id=request.execution_id, cell_id=execution.cell_id
                )
            )
            reported = await code.first(execution, task)
        finally:
            task.cancel()  # the stream ended before its outcome: the program with it
        yield pb.ExecuteEvent(outcome=outcome_message(code, reported, started))

    async def Wait(self, request: Any) -> Any:
        started = time.monotonic_ns()
        session = self._session(request.session_id)
        try:
            reported = await session.code.wait(
                request.cell_id, request.yield_time_ms, request.wait_id or None
            )
        except CellBusy as exc:
            raise RpcError(Status.FAILED_PRECONDITION, str(exc)) from None
        if reported is None:
            return WithMetadata(missing(request.cell_id), [(BUFFERED_FOR, b"0")])
        response = pb.WaitResponse(live_cell=outcome_message(session.code, reported, started))
        buffered = reported.buffered_ns(started)
        return WithMetadata(response, [(BUFFERED_FOR, str(buffered).encode())])

    def YieldObservation(self, request: Any) -> Any:
        session = self._session(request.session_id)
        which = request.WhichOneof("observation")
        if which == "execution_id":
            session.code.end_observation(execution_id=request.execution_id)
        elif which == "wait_id":
            session.code.end_observation(wait_id=request.wait_id)
        return pb.YieldObservationResponse()

    async def CancelWait(self, request: Any) -> Any:
        session = self._session(request.session_id)
        # The Wait returns at once; answer when it has let go of its cell.
        if session.code.end_observation(wait_id=request.wait_id):
            for _ in range(500):
                if ("wait", request.wait_id) not in session.code.observed.values():
                    break
                await asyncio.sleep(0.002)
        return pb.CancelWaitResponse()

    def GetProcessMetrics(self, request: Any) -> Any:
        return pb.GetProcessMetricsResponse(**process_figures()._asdict())

    async def Terminate(self, request: Any) -> Any:
        started = time.monotonic_ns()
        session = self._session(request.session_id)
        reported = await session.code.terminate(request.cell_id)
        if reported is None:
            return missing(request.cell_id)
        return pb.WaitResponse(live_cell=outcome_message(session.code, reported, started))


def _unary_now(impl: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def handle(request: Any) -> Any:
        if isinstance(request, _Malformed):
            raise RpcError(request.code, _bad_body(request))
        try:
            return impl(request)
        except RpcError:
            raise
        except Exception as exc:  # a bug here: a clean status, never a traceback
            raise RpcError(Status.INTERNAL, _internal(exc)) from None

    return handle


def _unary(impl: Callable[[Any], Any]) -> Callable[[Any], Awaitable[Any]]:
    async def handle(request: Any) -> Any:
        if isinstance(request, _Malformed):
            raise RpcError(request.code, _bad_body(request))
        try:
            return await impl(request)
        except RpcError:
            raise
        except Exception as exc:  # a bug here: a clean status, never a traceback
            raise RpcError(Status.INTERNAL, _internal(exc)) from None

    return handle


def _streaming(
    impl: Callable[[Any], Awaitable[AsyncIterator[Any]]],
) -> Callable[[Any], Awaitable[AsyncIterator[Any]]]:
    async def handle(request: Any) -> AsyncIterator[Any]:
        if isinstance(request, _Malformed):
            raise RpcError(request.code, _bad_body(request))
        try:
            # Checks the request (raising RpcError) before any header is sent: a client
            # (Codex) waits for the response headers of a stream that may carry no
            # message for a long time (a tool-call subscription); the server sends them
            # as soon as this returns.
            stream = await impl(request)
        except RpcError:
            raise
        except Exception as exc:  # a bug here: a clean status, never a traceback
            raise RpcError(Status.INTERNAL, _internal(exc)) from None
        return stream  # a failure while it runs: h2_stream answers INTERNAL

    return handle


def _internal(exc: Exception) -> str:
    return f"the code-mode host failed: {type(exc).__name__}: {str(exc)[:300]}"


def _bad_body(bad: _Malformed) -> str:
    if bad.code == Status.RESOURCE_EXHAUSTED:
        return f"the request was not read: {bad.error}"
    return f"the request is not a valid protobuf message: {bad.error}"


def _traced(name: str, impl: Any, immediate: bool) -> Any:
    import os
    import sys

    if not os.environ.get("CODEMODE_HOST_TRACE"):
        return impl

    def said(out: Any) -> Any:
        print(f"< {name} {str(out)[:300]!r}", file=sys.stderr, flush=True)
        return out

    def failed(exc: BaseException) -> None:
        print(f"! {name} {type(exc).__name__} {exc}", file=sys.stderr, flush=True)

    def call_now(request: Any) -> Any:
        print(f"> {name} {str(request)[:300]!r}", file=sys.stderr, flush=True)
        try:
            return said(impl(request))
        except BaseException as exc:
            failed(exc)
            raise

    async def call(request: Any) -> Any:
        print(f"> {name} {str(request)[:300]!r}", file=sys.stderr, flush=True)
        try:
            return said(await impl(request))
        except BaseException as exc:
            failed(exc)
            raise

    return call_now if immediate else call
