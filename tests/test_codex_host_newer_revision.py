"""What Codex 0.171's revision of the protocol added, served by the host and driven at
the protocol level: heartbeats on the session and tool-call streams at the interval the
client asks for (none when it asks for none), and tool catalog revisions (the tool list
sent once, later executes naming its revision), over gRPC and the framed protocol."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.codex_host_support import generated, host_process, session, texts
from tests.test_codex_host_framed import HELLO, HELLO_0171, framed_host, tool_def

grpc = pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    with host_process("tcp", "quickjs") as address:
        yield address


async def _beats(streams: list[Any], what: str, within_s: float) -> list[list[float]]:
    """When each heartbeat arrived on each of ``streams`` within ``within_s`` seconds;
    none of them may end meanwhile. The streams are read together and left open until
    the time is up: a stream cancelled first (the session's) ends the session and so
    the others, which then seemed to end by themselves."""
    seen: list[list[float]] = [[] for _ in streams]
    start = time.monotonic()

    async def read(stream: Any, found: list[float]) -> None:
        while (message := await stream.read()) is not grpc.aio.EOF:
            if message.HasField(what):
                found.append(time.monotonic() - start)

    reads = [asyncio.ensure_future(read(s, f)) for s, f in zip(streams, seen, strict=True)]
    ended, _ = await asyncio.wait(reads, timeout=within_s)
    got = [list(found) for found in seen]
    for r in reads:
        r.cancel()
    await asyncio.gather(*reads, return_exceptions=True)
    assert not ended, [r.exception() or "ended" for r in ended]
    return got


async def test_heartbeats_come_at_the_interval_asked_on_both_streams(host: str) -> None:
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(pb2.OpenSessionRequest(heartbeat_interval_s=1))
        opened = await events.read()
        sid = opened.opened.session_id
        calls = stub.SubscribeToToolCalls(
            pb2.SubscribeToToolCallsRequest(session_id=sid, heartbeat_interval_s=1)
        )
        session_beats, call_beats = await _beats([events, calls], "heartbeat", 3.6)
        for beats in (session_beats, call_beats):
            assert 2 <= len(beats) <= 4, beats
            assert beats[0] >= 0.8, beats
        events.cancel()
        calls.cancel()


async def test_a_heartbeat_on_the_tool_call_stream_carries_nothing_else(host: str) -> None:
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(pb2.OpenSessionRequest())
        sid = (await events.read()).opened.session_id
        calls = stub.SubscribeToToolCalls(
            pb2.SubscribeToToolCallsRequest(session_id=sid, heartbeat_interval_s=1)
        )
        beat = await asyncio.wait_for(calls.read(), 5)
        assert beat == pb2.ToolCall(session_id=sid, heartbeat=pb2.Heartbeat())
        calls.cancel()
        events.cancel()


async def test_no_heartbeat_unless_asked(host: str) -> None:
    """Codex 0.169 ends a session on the session stream's field 6: it never asks."""
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(pb2.OpenSessionRequest())
        sid = (await events.read()).opened.session_id
        calls = stub.SubscribeToToolCalls(pb2.SubscribeToToolCallsRequest(session_id=sid))
        quiet = await _beats([events, calls], "heartbeat", 1.5)
        assert quiet == [[], []]
        events.cancel()
        calls.cancel()


async def test_the_largest_interval_a_client_can_ask_for_is_served(host: str) -> None:
    pb2 = generated().pb2
    most = 2**64 - 1
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(pb2.OpenSessionRequest(heartbeat_interval_s=most))
        sid = (await events.read()).opened.session_id
        calls = stub.SubscribeToToolCalls(
            pb2.SubscribeToToolCallsRequest(session_id=sid, heartbeat_interval_s=most)
        )
        request = pb2.ExecuteRequest(
            session_id=sid, execution_id="e", tool_call_id="c", source="text('still here');"
        )
        done = [e async for e in stub.Execute(request)][-1].outcome
        assert texts(done) == ["still here"]
        assert await asyncio.wait_for(events.read(), 5) == pb2.SessionEvent(
            cell_closed=pb2.CellClosed(execution_id="e", cell_id=done.cell_id)
        )
        calls.cancel()
        events.cancel()


async def test_a_catalog_revision_stands_for_its_tools_in_later_executes(host: str) -> None:
    async with session(host, echo=lambda _n, a: a) as client:
        sid = client.session_id
        opened_again = client.stub.OpenSession(client.pb2.OpenSessionRequest())
        assert (await opened_again.read()).opened.supports_catalog_revision
        opened_again.cancel()
        source = "text(ALL_TOOLS.length);\ntext((await tools.echo({v: 'x'})).v);"
        _, first = await client.execute(source, catalog_revision=1)
        assert texts(first) == ["1", "x"]
        request = client.pb2.ExecuteRequest(
            session_id=sid, execution_id="later", tool_call_id="c2", source=source,
            catalog_revision=1,
        )  # fmt: skip
        events = [e async for e in client.stub.Execute(request)]
        later = events[-1].outcome
        assert texts(later) == ["1", "x"], later
        # A revision the session does not hold, and no list: no tools.
        request.catalog_revision = 2
        events = [e async for e in client.stub.Execute(request)]
        unknown = events[-1].outcome
        assert texts(unknown) == ["0"]
        assert "echo" in unknown.completed.error_text


def test_the_framed_catalog_revision_is_granted_and_honoured() -> None:
    with framed_host() as peer:
        peer.send(HELLO_0171)
        ready = peer.read()
        assert "tool-catalog-revision-v1" in ready["capabilities"]
        peer.request(1, {"method": "session/open", "sessionId": "s"})
        peer.read()
        source = "text(ALL_TOOLS.map(t => t.name).join());"
        for rid, tools in ((2, [tool_def("double")]), (3, [])):
            body = {"catalog_revision": 1, "tool_call_id": f"c{rid}", "enabled_tools": tools,
                    "source": source, "yield_time_ms": 30000}  # fmt: skip
            peer.request(rid, {"method": "session/execute", "sessionId": "s", "request": body})
            done = peer.until(lambda m: m["type"] == "execute/initialResponse")
            items = done["result"]["value"]["Result"]["content_items"]
            assert items == [{"type": "input_text", "text": "double"}], json.dumps(done)


def test_a_framed_client_that_does_not_offer_it_is_not_granted_it() -> None:
    with framed_host() as peer:
        peer.send(HELLO)
        assert peer.read()["capabilities"] == []


async def test_tool_calls_past_the_pending_bound_the_client_asked_for_fail_at_once(
    host: str,
) -> None:
    """``max_pending_delegate_calls``: the host holds at most that many calls the client
    has not completed; a program's call past it fails with a clear message (the program
    goes on), and completing a held one makes room again."""
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(pb2.OpenSessionRequest(max_pending_delegate_calls=2))
        sid = (await events.read()).opened.session_id
        calls = stub.SubscribeToToolCalls(pb2.SubscribeToToolCallsRequest(session_id=sid))
        tool = pb2.ToolDefinition(
            name="slow", tool_name=pb2.ToolName(name="slow"), kind=pb2.TOOL_KIND_FUNCTION
        )
        source = (
            "const rs = await Promise.allSettled(Array.from({length: 5}, (_, i) =>\n"
            "  tools.slow({i})));\n"
            "text(rs.map(r => r.status === 'fulfilled' ? 'ok' : String(r.reason)).join('|'));\n"
            "text((await tools.slow({i: 9})).i);\n"
        )
        request = pb2.ExecuteRequest(
            session_id=sid, execution_id="e", tool_call_id="c", source=source,
            enabled_tools=[tool], yield_time_ms=60_000,
        )  # fmt: skip
        execute = asyncio.ensure_future(_collect(stub.Execute(request)))
        held = [await asyncio.wait_for(calls.read(), 30) for _ in range(2)]
        await asyncio.sleep(0.3)
        assert not execute.done()
        for call in held:
            await stub.CompleteToolCall(
                pb2.CompleteToolCallRequest(
                    session_id=sid, invocation_id=call.invocation_id,
                    succeeded=pb2.ToolCallSucceeded(output_json=call.input_json),
                )
            )  # fmt: skip
        last = await asyncio.wait_for(calls.read(), 30)  # room again: the sixth call
        await stub.CompleteToolCall(
            pb2.CompleteToolCallRequest(
                session_id=sid, invocation_id=last.invocation_id,
                succeeded=pb2.ToolCallSucceeded(output_json=last.input_json),
            )
        )  # fmt: skip
        outcome = (await asyncio.wait_for(execute, 30))[-1].outcome
        statuses, nine = texts(outcome)
        assert statuses.split("|")[:2] == ["ok", "ok"], statuses
        refused = statuses.split("|")[2:]
        assert len(refused) == 3
        assert all("2 tool calls are already pending" in r for r in refused), refused
        assert nine == "9"
        calls.cancel()
        events.cancel()


async def _collect(stream: Any) -> list[Any]:
    return [e async for e in stream]
