"""Output truncation by the host and the Wait's buffered-result metadata, as a client
sees them on the wire: a session opened with ``output_truncation`` SERVER (Codex 0.171's
default) gets each report cut to the execute's ``max_output_tokens`` by the host, in
Codex's host's format (tests/data/codex-0.171/ keeps its cut outcome); a ``Wait`` answers
with ``codex-code-mode-result-buffered-for-ns``, the time its completed result waited."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.codex_host_support import generated, host_process, texts
from tests.test_codex_cli_host import PNG
from tests.test_codex_host_framed import HELLO_0171, framed_host

grpc = pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

SERVER, CLIENT = 2, 1
BUFFERED = "codex-code-mode-result-buffered-for-ns"
# The program and limit of the capture's cut outcome (Codex 0.171's own host).
LOAD = 'text("42");\ntext("undefined");\ntext("a".repeat(1000) + "b".repeat(1000));\n'
CAPTURE = Path(__file__).parent / "data" / "codex-0.171" / "grpc.json"


def _codex_cut_text() -> str:
    pb2 = generated().pb2
    for entry in json.loads(CAPTURE.read_text())["messages"]:
        if entry["what"].startswith("ExecuteEvent: an outcome the host cut"):
            event = pb2.ExecuteEvent.FromString(bytes.fromhex(entry["message"]))
            return str(event.outcome.content_items[0].text.text)
    raise AssertionError("the capture has no cut outcome")


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    with host_process("tcp", "quickjs") as address:
        yield address


async def _run(
    host: str, source: str, truncation: int | None, max_tokens: int | None
) -> tuple[Any, Any]:
    """The SessionOpened and the outcome of one execute."""
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        open_request = pb2.OpenSessionRequest()
        if truncation is not None:
            open_request.output_truncation = truncation
        events = stub.OpenSession(open_request)
        opened = (await events.read()).opened
        request = pb2.ExecuteRequest(
            session_id=opened.session_id, execution_id="e", tool_call_id="c", source=source
        )
        if max_tokens is not None:
            request.max_output_tokens = max_tokens
        outcome = [e async for e in stub.Execute(request)][-1].outcome
        events.cancel()
        return opened, outcome


async def test_a_server_truncation_session_is_answered_server(host: str) -> None:
    opened, _ = await _run(host, "text('x');", SERVER, None)
    assert opened.output_truncation == SERVER


async def test_a_client_or_no_truncation_session_is_answered_none(host: str) -> None:
    for asked in (CLIENT, None):
        opened, _ = await _run(host, "text('x');", asked, None)
        assert opened.output_truncation == 0


async def test_the_host_cuts_as_codexs_own_host_did(host: str) -> None:
    _, outcome = await _run(host, LOAD, SERVER, 60)
    assert texts(outcome) == [_codex_cut_text()]


async def test_output_within_the_budget_is_left_whole_item_by_item(host: str) -> None:
    _, outcome = await _run(host, 'text("one");\ntext("two");', SERVER, 60)
    assert texts(outcome) == ["one", "two"]


async def test_a_client_truncation_session_gets_the_items_whole(host: str) -> None:
    _, outcome = await _run(host, LOAD, CLIENT, 60)
    assert texts(outcome) == ["42", "undefined", "a" * 1000 + "b" * 1000]


# What follows was seen from Codex 0.171's own host, asked directly (docs/codex-host.md).
async def test_with_an_image_the_budget_is_spent_item_by_item(host: str) -> None:
    source = f'text("first");\nimage("{PNG}");\ntext("z".repeat(4000));\n'
    _, outcome = await _run(host, source, SERVER, 10)
    kinds = [item.WhichOneof("item") for item in outcome.content_items]
    assert kinds == ["text", "image", "text"]
    assert outcome.content_items[1].image.image_url == PNG
    cut = "z" * 16 + "…992 tokens truncated…" + "z" * 16
    assert [outcome.content_items[i].text.text for i in (0, 2)] == ["first", cut]


async def test_text_items_past_the_budget_are_left_out_and_counted(host: str) -> None:
    source = f'image("{PNG}");\ntext("y".repeat(100));\ntext("second");\ntext("third");\n'
    _, outcome = await _run(host, source, SERVER, 10)
    assert texts(outcome) == [
        "y" * 20 + "…15 tokens truncated…" + "y" * 20,
        "[omitted 2 text items ...]",
    ]


async def test_the_error_is_reported_among_the_items_and_cut_with_them(host: str) -> None:
    _, whole = await _run(host, 'text("about to fail");\nthrow new Error("boom-42");', SERVER, None)
    assert whole.completed.error_text.startswith("Error: boom-42\n    at exec_main.mjs:2:")
    assert texts(whole) == ["about to fail", f"Script error:\n{whole.completed.error_text}"]
    _, cut = await _run(host, 'throw new Error("x");', SERVER, 10)
    (text,) = texts(cut)
    assert text.startswith(
        "Warning: truncated output (original token count: 12)\nTotal output lines: 3\n\n"
        "Script error:\nError:…2 tokens truncated…"
    )
    _, client = await _run(host, 'throw new Error("x");', CLIENT, 10)
    assert texts(client) == []  # the client shows error_text itself


async def test_an_execute_that_names_no_budget_gets_ten_thousand_tokens(host: str) -> None:
    _, outcome = await _run(host, 'text("x".repeat(100000));', SERVER, None)
    (text,) = texts(outcome)
    assert text.startswith("Warning: truncated output (original token count: 25000)\n")
    assert "…15000 tokens truncated…" in text
    _, whole = await _run(host, 'text("x".repeat(100000));', CLIENT, None)
    assert texts(whole) == ["x" * 100000]


async def test_multibyte_text_is_cut_on_character_boundaries(host: str) -> None:
    _, outcome = await _run(host, 'text("é".repeat(3000));', SERVER, 5)
    (cut,) = texts(outcome)
    head, _, tail = cut.split("\n\n", 1)[1].partition("…")
    assert set(head) == {"é"} and len(head.encode()) <= 10
    assert tail.endswith("é") and "\ufffd" not in cut


async def _wait_metadata(host: str, pause_s: float) -> tuple[int, Any]:
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(pb2.OpenSessionRequest())
        sid = (await events.read()).opened.session_id
        source = (
            'text("before");\nyield_control();\n'
            'await new Promise((r) => setTimeout(r, 200));\ntext("after");\n'
        )
        request = pb2.ExecuteRequest(session_id=sid, execution_id="e", tool_call_id="c",
                                     source=source)  # fmt: skip
        first = [e async for e in stub.Execute(request)][-1].outcome
        assert first.HasField("yielded")
        await asyncio.sleep(pause_s)  # the cell completes meanwhile, unobserved
        call = stub.Wait(
            pb2.WaitRequest(session_id=sid, cell_id=first.cell_id, yield_time_ms=5000)
        )
        answer = await call
        metadata = dict(await call.initial_metadata())
        events.cancel()
        return int(metadata[BUFFERED]), answer


async def test_a_wait_says_how_long_its_completed_result_was_buffered(host: str) -> None:
    buffered_ns, answer = await _wait_metadata(host, 1.2)
    assert answer.live_cell.HasField("completed") and texts(answer.live_cell) == ["after"]
    # It completed about 0.2 s after its yield and was read about 1.2 s after it.
    assert 0.6e9 < buffered_ns < 1.2e9, buffered_ns


async def test_a_result_that_came_while_the_wait_was_there_waited_for_nothing(
    host: str,
) -> None:
    buffered_ns, answer = await _wait_metadata(host, 0)
    assert answer.live_cell.HasField("completed")
    assert buffered_ns == 0


def test_the_framed_server_truncation_is_honoured() -> None:
    with framed_host() as peer:
        peer.send(HELLO_0171)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s", "outputTruncation": "server"})
        assert peer.read()["result"]["value"] == {"type": "session/ready", "sessionId": "s"}
        body = {"catalog_revision": 1, "tool_call_id": "c", "enabled_tools": [],
                "source": LOAD, "yield_time_ms": 30000, "max_output_tokens": 60}  # fmt: skip
        peer.request(2, {"method": "session/execute", "sessionId": "s", "request": body})
        done = peer.until(lambda m: m["type"] == "execute/initialResponse")
        items = done["result"]["value"]["Result"]["content_items"]
        assert items == [{"type": "input_text", "text": _codex_cut_text()}]


def test_a_framed_client_truncation_session_gets_the_items_whole() -> None:
    with framed_host() as peer:
        peer.send(HELLO_0171)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s", "outputTruncation": "client"})
        peer.read()
        body = {"tool_call_id": "c", "enabled_tools": [], "source": LOAD,
                "yield_time_ms": 30000, "max_output_tokens": 60}  # fmt: skip
        peer.request(2, {"method": "session/execute", "sessionId": "s", "request": body})
        done = peer.until(lambda m: m["type"] == "execute/initialResponse")
        items = done["result"]["value"]["Result"]["content_items"]
        assert [i["text"] for i in items] == ["42", "undefined", "a" * 1000 + "b" * 1000]


async def test_an_unknown_truncation_mode_is_refused_as_codexs_host_refuses_it(host: str) -> None:
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(host) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(pb2.OpenSessionRequest(output_truncation=3))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await events.read()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "unknown code-mode output truncation mode 3" in str(refused.value.details())
        # The connection serves on.
        opened, outcome = await _run(host, "text('x');", SERVER, 60)
        assert opened.output_truncation == SERVER and texts(outcome) == ["x"]


def test_an_unknown_framed_truncation_mode_is_refused_and_the_connection_goes_on() -> None:
    with framed_host() as peer:
        peer.send(HELLO_0171)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s", "outputTruncation": "both"})
        refused = peer.read()["result"]
        assert refused["status"] == "error" and "unknown code-mode output truncation mode" in (
            json.dumps(refused)
        )
        peer.request(2, {"method": "session/open", "sessionId": "s", "outputTruncation": "server"})
        assert peer.read()["result"]["value"] == {"type": "session/ready", "sessionId": "s"}


def test_a_framed_wait_says_how_long_its_completed_result_was_buffered() -> None:
    with framed_host() as peer:
        peer.send(HELLO_0171)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s"})
        peer.read()
        source = (
            'text("before");\nyield_control();\n'
            'await new Promise((r) => setTimeout(r, 200));\ntext("after");\n'
        )
        body = {"tool_call_id": "c", "enabled_tools": [], "source": source,
                "yield_time_ms": 30000}  # fmt: skip
        peer.request(2, {"method": "session/execute", "sessionId": "s", "request": body})
        first = peer.until(lambda m: m["type"] == "execute/initialResponse")
        cell = first["result"]["value"]["Yielded"]["cell_id"]
        time.sleep(1.2)  # the cell completes meanwhile, unobserved
        wait = {"cell_id": cell, "yield_time_ms": 5000}
        peer.request(3, {"method": "session/wait", "sessionId": "s", "request": wait})
        done = peer.until(lambda m: m.get("id") == 3)
        result = done["result"]["value"]["outcome"]["LiveCell"]["Result"]
        assert result["content_items"] == [{"type": "input_text", "text": "after"}]
        assert 0.6e9 < result["result_buffered_for_ns"] < 1.2e9, result


async def test_the_extreme_budgets_a_client_can_send_are_served(host: str) -> None:
    _, none_left = await _run(host, 'text("abc");\ntext("d".repeat(50));', SERVER, 0)
    (text,) = texts(none_left)
    assert text.startswith("Warning: truncated output (original token count: 14)\n")
    assert text.endswith("\n\n…14 tokens truncated…")
    _, image_first = await _run(host, f'image("{PNG}");\ntext("abc");', SERVER, 0)
    assert texts(image_first) == ["[omitted 1 text items ...]"]
    _, whole = await _run(host, 'text("d".repeat(5000));', SERVER, 2**64 - 1)
    assert texts(whole) == ["d" * 5000]
