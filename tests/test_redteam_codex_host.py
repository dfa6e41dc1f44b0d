"""The code-mode host's servers attacked from a hostile client's side (over gRPC on TCP
and over the framed protocol on stdio): what one client can make the host hold (items,
notifications, tool-call inputs, bytes written to a client that never reads, its cells and
their output across its sessions), requests abandoned before their outcome, a program's
lone surrogates, malformed framed requests, and the newer mechanisms (catalog revisions,
heartbeats, ``GetProcessMetrics``, ``grpc-timeout``, output truncation's extremes, another
session's cells).

Memory is the host process's peak resident set (``VmHWM``), CPU is read from /proc: the
bounds hold under a machine's load, where wall time would not."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.codex_host.session.bounded_output import HALF_ITEMS, BoundedItems
from codemode.codex_host.session.execution import ITEMS_KEPT
from codemode.codex_host.session.limits import OUTPUT_EACH, OUTPUT_FOR_CLIENT, output_cost
from codemode.codex_host.session.model import ImageItem, TextItem
from tests.codex_host_support import (
    CHANNEL_OPTIONS,
    HOST_PIDS,
    INTERPRETER,
    descendants,
    generated,
    host_process,
    session,
    texts,
)
from tests.test_codex_host_framed_bounds import RawPeer, _outcome, _texts
from tests.test_codex_host_h2 import (
    DATA,
    END_STREAM,
    HEADERS,
    PREFACE,
    SERVICE,
    SETTINGS,
    WINDOW_UPDATE,
    Peer,
    frame,
)

grpc = pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

EXECUTE = SERVICE + "Execute"
MIB = 1 << 20
# What the host holds for one client, waiting on it (session/limits.py): 64 MiB. A test
# makes it hold several times that if unbounded; its peak may grow by no more than this.
GROWTH_MIB = 250
COLD = {**os.environ, "CODEMODE_WARM": "0"}  # this checkout's code, in a child of ours
# A program making 300 calls with a megabyte input each, not awaited: what failed, and why.
MEGABYTE_CALLS = """
const s = "x".repeat(1 << 20);
let failed = 0, why = "";
for (let i = 0; i < 300; i++) {
  tools.t(s).catch((e) => { failed++; why = String(e); });
  await new Promise((r) => setTimeout(r, 0));
}
await new Promise((r) => setTimeout(r, 100));
text(`${failed} ${why}`);
exit();
"""


def _hwm_mib(pid: int) -> float:
    """The process's peak resident set so far, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _rss_mib(pid: int) -> float:
    """The process's resident set now, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quiet(pid: int, most_s: float = 120.0) -> None:
    """Until the host has used no CPU for a second and a half (its programs are done)."""
    deadline = time.monotonic() + most_s
    last, since = _cpu_s(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = _cpu_s(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 1.5:
            return


def _spinning(pid: int) -> list[int]:
    """Processes below ``pid`` that used a tenth of a CPU or more over the next second."""
    before = {p: _cpu_or_none(p) for p in descendants(pid)}
    time.sleep(1)
    return [
        p
        for p in descendants(pid)
        if (now := _cpu_or_none(p)) is not None
        and before.get(p) is not None
        and now - before[p] > 0.1  # type: ignore[operator]
    ]


def _cpu_or_none(pid: int) -> float | None:
    try:
        return _cpu_s(pid)
    except (OSError, IndexError):
        return None


def _window(size: int) -> bytes:
    return (4).to_bytes(2, "big") + size.to_bytes(4, "big")  # SETTINGS_INITIAL_WINDOW_SIZE


def _messages(peer: Peer, sid: int, count: int | None = None, seconds: float = 120) -> list[bytes]:
    """The gRPC messages on ``sid``: ``count`` of them, or until the stream ends. Every
    HEADERS block is decoded in order (HPACK's table)."""
    body, found = b"", list[bytes]()
    for kind, flags, got, payload in peer.frames(seconds):
        if kind == HEADERS:
            peer.decoder.decode(payload)
            if got == sid and flags & END_STREAM:
                return found
        elif kind == DATA and got == sid:
            body += payload
            while len(body) >= 5 and len(body) >= 5 + int.from_bytes(body[1:5], "big"):
                size = int.from_bytes(body[1:5], "big")
                found.append(body[5 : 5 + size])
                body = body[5 + size :]
                if count is not None and len(found) >= count:
                    return found
    raise AssertionError(f"stream {sid} gave {len(found)} messages and did not end")


def _tools(*names: str) -> list[Any]:
    pb2 = generated().pb2
    return [
        pb2.ToolDefinition(name=n, tool_name=pb2.ToolName(name=n), description=f"the {n} tool",
                           kind=pb2.TOOL_KIND_FUNCTION)
        for n in names
    ]  # fmt: skip


@pytest.fixture(scope="module")
def tcp_host() -> Iterator[str]:
    with host_process("tcp", "quickjs", "--max-cells", "2") as address:
        yield address


# -- what a program's output makes the host hold ------------------------------------------


async def test_empty_text_items_are_bounded_in_count(tcp_host: str) -> None:
    # `text("")` costs no characters, so the 64 Mi-character bound never stopped it: a
    # loop of them held a gigabyte within minutes. Each item is counted now.
    count = ITEMS_KEPT + 20_000
    async with session(tcp_host) as client:
        _, outcome = await client.execute(
            f'for (let i = 0; i < {count}; i++) text(""); text("end");', yield_time_ms=600_000
        )
    got = texts(outcome)
    assert len(got) <= ITEMS_KEPT + 1, len(got)
    assert "dropped" in got[-1] and f"in {count + 1 - ITEMS_KEPT} items" in got[-1], got[-1]


def test_bounded_output_holds_a_bounded_number_of_items() -> None:
    # With the host truncating, text goes to the head and tail of 512 KiB each: empty or
    # one-byte items never filled them by bytes.
    for text in ("", "x"):
        items = BoundedItems()
        for _ in range(4 * HALF_ITEMS):
            items.add(TextItem(text))
        assert len(items.head) + len(items.tail) <= 2 * HALF_ITEMS + 2
        taken = items.take()
        markers = [i.text for i in taken if isinstance(i, TextItem) and "limit reached" in i.text]
        assert markers == [
            f"[Code Mode session output limit reached: omitted {len(text) * 2 * HALF_ITEMS} "
            f"text bytes; discarded {2 * HALF_ITEMS} text segments, 0 images, 0 audio items]"
        ]


_NOTIFY_FLOOD = """
const s = "x".repeat(1 << 20);
for (let i = 0; i < 400; i++) {
  notify(s);
  if (i % 8 === 7) await new Promise((r) => setTimeout(r, 0));
}
text("done");
"""


def test_notifications_a_client_does_not_read_are_bounded_in_bytes() -> None:
    # 4,096 queued notifications was a count: of 1 MiB each, the host held 4 GiB for a
    # client whose session stream had no window. Now 64 MiB across the connection; the
    # rest is not sent and the report says so.
    pb2 = generated().pb2
    with host_process("tcp", "quickjs") as address, Peer(address, preface=False) as peer:
        pid = HOST_PIDS[address]
        peer.sock.settimeout(1)
        peer.send(PREFACE + frame(SETTINGS, 0, 0, _window(0)))
        peer.send(peer.request(1, SERVICE + "OpenSession"))
        peer.send(frame(WINDOW_UPDATE, 0, 1, (200).to_bytes(4, "big")))  # the first event
        (opened,) = _messages(peer, 1, count=1)
        session_id = pb2.SessionEvent.FromString(opened).opened.session_id
        before = _hwm_mib(pid)
        request = pb2.ExecuteRequest(
            session_id=session_id, execution_id="e", tool_call_id="c", source=_NOTIFY_FLOOD,
            yield_time_ms=600_000,
        ).SerializeToString()  # fmt: skip
        peer.send(peer.request(3, EXECUTE, request))
        peer.send(frame(WINDOW_UPDATE, 0, 3, (MIB).to_bytes(4, "big")))
        events = [pb2.ExecuteEvent.FromString(m) for m in _messages(peer, 3, seconds=300)]
        grown = _hwm_mib(pid) - before
    print(f"peak grew by {grown:.0f} MiB")
    outcome = events[-1].outcome
    assert texts(outcome)[0] == "done"
    assert "notifications were not sent" in texts(outcome)[-1], texts(outcome)
    assert grown < GROWTH_MIB, f"the host's peak grew by {grown:.0f} MiB"


def test_answers_to_a_client_with_wide_windows_that_does_not_read_wait() -> None:
    # A client that opens its windows to 2 GiB and then stops reading: the host wrote
    # everything into its socket's buffer (only PINGs and SETTINGS were bounded). Now
    # messages wait while the writer is full, and the notifications queue within their
    # bound. Then it hangs up: its engine worker goes with it.
    pb2 = generated().pb2
    with host_process("tcp", "quickjs") as address:
        pid = HOST_PIDS[address]
        host, port = address.rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        peer = Peer.__new__(Peer)
        peer.sock, peer.buffer = sock, b""
        from hpack import Decoder, Encoder

        peer.encoder, peer.decoder = Encoder(), Decoder()
        sock.settimeout(1)
        wide = _window((1 << 31) - 1) + (5).to_bytes(2, "big") + ((1 << 24) - 1).to_bytes(4, "big")
        peer.send(PREFACE + frame(SETTINGS, 0, 0, wide))
        peer.send(frame(WINDOW_UPDATE, 0, 0, ((1 << 31) - 1 - 65535).to_bytes(4, "big")))
        peer.send(peer.request(1, SERVICE + "OpenSession"))
        (opened,) = _messages(peer, 1, count=1)
        session_id = pb2.SessionEvent.FromString(opened).opened.session_id
        before = _hwm_mib(pid)
        source = _NOTIFY_FLOOD + "await new Promise((r) => setTimeout(r, 600000));"
        request = pb2.ExecuteRequest(
            session_id=session_id, execution_id="e", tool_call_id="c", source=source,
            yield_time_ms=600_000,
        ).SerializeToString()  # fmt: skip
        peer.send(peer.request(3, EXECUTE, request))
        # From here on nothing is read.
        _quiet(pid)
        grown = _hwm_mib(pid) - before
        print(f"peak grew by {grown:.0f} MiB")
        # The program runs in the worker the host booted as it answered (a host boots
        # no spare behind a session's worker).
        running = set(_living(pid))
        assert running, "the program's engine worker"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset, with the host's writes still pending
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and running & set(_living(pid)):
            time.sleep(0.1)
        left = running & set(_living(pid))
    assert grown < GROWTH_MIB, f"the host's peak grew by {grown:.0f} MiB"
    assert not left, "an engine worker outlived its client"


async def test_tool_call_inputs_held_for_a_client_are_bounded_in_bytes(tcp_host: str) -> None:
    # max_pending_delegate_calls 0 (or 2**64-1) set no bound, and 4096 was a count: a
    # program's megabyte input made the host hold it per call, 100,000 calls a program.
    # Now calls past 64 MiB of inputs held for the client fail at once, and it goes on.
    pb2 = generated().pb2
    pid = HOST_PIDS[tcp_host]
    async with grpc.aio.insecure_channel(tcp_host, options=CHANNEL_OPTIONS) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        for max_pending in (0, (1 << 64) - 1):
            events = stub.OpenSession(
                pb2.OpenSessionRequest(max_pending_delegate_calls=max_pending)
            )
            session_id = (await events.read()).opened.session_id
            before = _hwm_mib(pid)
            # No subscription: the calls stay with the host.
            request = pb2.ExecuteRequest(
                session_id=session_id, execution_id="e", tool_call_id="c", source=MEGABYTE_CALLS,
                enabled_tools=_tools("t"), yield_time_ms=600_000,
            )  # fmt: skip
            got = [e async for e in stub.Execute(request, timeout=300)]
            grown = _hwm_mib(pid) - before
            failed, why = texts(got[-1].outcome)[0].split(" ", 1)
            assert int(failed) >= 200, (failed, why)
            assert "bytes of tool calls and notifications" in why, why
            assert grown < GROWTH_MIB, f"the host's peak grew by {grown:.0f} MiB"
            events.cancel()


def test_arguments_of_answered_calls_are_not_kept_while_the_program_runs() -> None:
    # The runtime kept every call's arguments in its records until the program ended:
    # a megabyte string passed to each of 100,000 calls (the host's limit a program),
    # each answered at once, was 100 GB in the host. Past 16 Mi characters a finished
    # call lets go of its arguments.
    pb2 = generated().pb2
    program = (
        'const s = "x".repeat(1 << 20); for (let i = 0; i < 300; i++) await tools.t(s);'
        'text("done");'
    )

    async def run(address: str) -> tuple[float, list[str]]:
        pid = HOST_PIDS[address]
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
            stub = generated().grpc.CodeModeHostStub(channel)
            events = stub.OpenSession(pb2.OpenSessionRequest())
            session_id = (await events.read()).opened.session_id
            calls = stub.SubscribeToToolCalls(
                pb2.SubscribeToToolCallsRequest(session_id=session_id)
            )

            async def answer() -> None:
                async for call in calls:
                    await stub.CompleteToolCall(pb2.CompleteToolCallRequest(
                        session_id=session_id, invocation_id=call.invocation_id,
                        succeeded=pb2.ToolCallSucceeded(output_json=b"1"),
                    ))  # fmt: skip

            answering = asyncio.ensure_future(answer())
            before = _hwm_mib(pid)
            request = pb2.ExecuteRequest(
                session_id=session_id, execution_id="e", tool_call_id="c", source=program,
                enabled_tools=_tools("t"), yield_time_ms=600_000,
            )  # fmt: skip
            got = [e async for e in stub.Execute(request, timeout=300)]
            grown = _hwm_mib(pid) - before
            answering.cancel()
            events.cancel()
            return grown, texts(got[-1].outcome)

    with host_process("tcp", "quickjs") as address:
        grown, said = asyncio.run(run(address))
    assert said == ["done"]
    assert grown < 120, f"the host's peak grew by {grown:.0f} MiB"


def test_framed_delegate_requests_are_bounded_in_bytes() -> None:
    # The framed capacity (1,024 or 4,096 unanswered requests) was a count too.
    with _framed() as (peer, _):
        peer.open(["delegate-capacity-4096"])
        peer.execute(2, MEGABYTE_CALLS, yield_time_ms=600_000)
        outcome = None
        while outcome is None:
            message = peer.read(300)
            assert message is not None
            if message.get("type") == "execute/initialResponse":
                outcome = _outcome(message)
    failed, why = _texts(outcome)[0].split(" ", 1)
    assert int(failed) >= 200, (failed, why)
    assert "bytes of tool calls and notifications" in why, why


# -- requests abandoned before their outcome -------------------------------------------------


@pytest.mark.parametrize("how", ["deadline", "reset"])
async def test_an_execute_abandoned_before_its_outcome_frees_its_cell(
    tcp_host: str, how: str
) -> None:
    # A grpc-timeout that passed, or a client that reset the stream (Codex interrupting a
    # turn), stopped the program but left its cell counted: after --max-cells of them
    # the session refused every exec.
    pb2 = generated().pb2
    pid = HOST_PIDS[tcp_host]
    async with session(tcp_host) as client:

        async def abandon(request: Any) -> None:
            if how == "deadline":
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    _ = [e async for e in client.stub.Execute(request, timeout=1.0)]
                if failed.value.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise failed.value
            else:
                call = client.stub.Execute(request)
                assert (await call.read()).HasField("started")
                call.cancel()

        for n in range(4):
            request = pb2.ExecuteRequest(
                session_id=client.session_id, execution_id=f"spin-{n}", tool_call_id="c",
                source="while (true) {}", yield_time_ms=600_000,
            )  # fmt: skip
            # (A cell is let go once its program is stopped: a moment after the request,
            # later under load; the same for the last ones before the exec below.)
            await _admitted(lambda request=request: abandon(request))
        _, outcome = await _admitted(lambda: client.execute('text("free")'))
        assert texts(outcome) == ["free"]
    assert _spinning(pid) == []


async def _admitted(attempt: Callable[[], Awaitable[Any]], most_s: float = 15.0) -> Any:
    """``attempt()``'s result, tried again while the host refuses it for its cells
    (``RESOURCE_EXHAUSTED``), for ``most_s`` at most."""
    deadline = time.monotonic() + most_s
    while True:
        try:
            return await attempt()
        except grpc.aio.AioRpcError as exc:
            refused = exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            if not refused or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def test_a_framed_execute_refused_for_its_values_holds_no_cell() -> None:
    # A yield_time_ms that is not a number failed after the cell was counted.
    with _framed("--max-cells", "2") as (peer, _):
        peer.open([])
        for n in range(4):
            peer.execute(10 + n, 'text("x")', yield_time_ms="soon")
            answer = peer.read(30)
            assert answer["result"]["status"] == "error", answer
        peer.execute(20, 'text("free")')
        assert peer.read(30)["result"]["value"]["type"] == "execution/started"
        assert _texts(_outcome(peer.read(60))) == ["free"]


# -- what a program's text can do to the wire ---------------------------------------------------

_SURROGATES = """
text("a\\ud800b");
notify("n\\udc00");
await tools.t({ s: "\\ud83d" });
text("after");
throw new Error("e\\udfff");
"""


async def test_a_programs_lone_surrogates_reach_a_grpc_client_as_replacement_characters(
    tcp_host: str,
) -> None:
    # A JavaScript string cut inside a surrogate pair cannot be UTF-8: the whole Execute
    # failed INTERNAL, the notification killed the exec.
    async with session(tcp_host, t=lambda name, args: args) as client:
        _, outcome = await client.execute(_SURROGATES)
        assert texts(outcome) == ["a\ufffdb", "after"]
        assert outcome.completed.error_text.startswith("Error: e\ufffd")
        assert json.loads(client.calls[-1].input_json) == {"s": "\ufffd"}
        note = await asyncio.wait_for(client.events.read(), 30)
        while not note.HasField("notification"):
            note = await asyncio.wait_for(client.events.read(), 30)
        assert note.notification.text == "n\ufffd"


def test_a_programs_lone_surrogates_reach_a_framed_client_as_replacement_characters() -> None:
    with _framed() as (peer, stderr):
        peer.open(["bounded-output-v1", "tool-catalog-revision-v1"])
        peer.execute(2, _SURROGATES)
        seen: list[Any] = []
        outcome = None
        while outcome is None:
            message = peer.read(60)
            assert message is not None, seen
            seen.append(message)
            if message.get("type") == "delegate/request":
                peer.answer(message)
            elif message.get("type") == "execute/initialResponse":
                outcome = _outcome(message)
        assert outcome is not None
        assert _texts(outcome) == ["a\ufffdb", "after"]
        assert outcome["error_text"].startswith("Error: e\ufffd")
        requests = [m["request"] for m in seen if m.get("type") == "delegate/request"]
        assert {
            "type": "notification/send",
            "callId": "c2",
            "cellId": "1",
            "text": "n\ufffd",
        } in requests
        assert any(r.get("invocation", {}).get("input") == {"s": "\ufffd"} for r in requests)
        assert "Traceback" not in _ended(peer, stderr)


# -- malformed framed requests ----------------------------------------------------------------


def test_malformed_framed_requests_are_answered_and_the_host_goes_on() -> None:
    # Each of these was a traceback on stderr and no answer (the client waited for ever);
    # a delegate/response whose id is a list, while a call was pending, ended the host
    # (exit status 70).
    bad: list[Any] = [
        {"method": "session/execute", "sessionId": "s", "request": [1]},
        {"method": "session/execute", "sessionId": "s", "request": "x"},
        {"method": "session/execute", "sessionId": "s",
         "request": {"source": "1", "enabled_tools": [1]}},
        {"method": "session/execute", "sessionId": "s",
         "request": {"source": "1", "enabled_tools": [{"name": "a", "tool_name": "b"}]}},
        {"method": "session/wait", "sessionId": "s",
         "request": {"cell_id": "1", "yield_time_ms": float("inf")}},
    ]  # fmt: skip
    with _framed() as (peer, stderr):
        peer.open([])
        for n, request in enumerate(bad):
            peer.send({"type": "operation/request", "id": 100 + n, "request": request})
            answer = peer.read(30)
            assert answer is not None, request
            assert answer["id"] == 100 + n and answer["result"]["status"] == "error", answer
        peer.execute(2, 'await tools.t({}); text("answered")')
        assert peer.read(30)["result"]["value"]["type"] == "execution/started"
        call = peer.read(30)
        assert call["type"] == "delegate/request", call
        for weird in ([call["id"]], {"id": call["id"]}, None, "1", 1.5):
            peer.send({"type": "delegate/response", "id": weird, "result": {"status": "ok"}})
        peer.answer(call)
        assert _texts(_outcome(_next(peer))) == ["answered"]
        # Lone surrogates in the client's own ids: answered (as U+FFFD), no traceback.
        peer.send({"type": "operation/request", "id": "\ud800",
                   "request": {"method": "session/open", "sessionId": "x\udfff"}})  # fmt: skip
        answer = _next(peer)
        assert answer["result"]["value"] == {"type": "session/ready", "sessionId": "x\ufffd"}
        assert peer.proc.poll() is None
        assert "Traceback" not in _ended(peer, stderr)
        assert peer.proc.returncode == 0


@pytest.mark.parametrize(
    ("what", "data"),
    [
        ("a length of 4 GiB", struct.pack("<I", 0xFFFFFFFF) + b"{}"),
        ("invalid UTF-8", struct.pack("<I", 4) + b'"\xff\xfe"'),
    ],
)
def test_a_framed_frame_that_cannot_be_read_ends_the_connection_cleanly(
    what: str, data: bytes
) -> None:
    with _framed() as (peer, stderr):
        peer.open([])
        peer.execute(2, "while (true) { await new Promise((r) => setTimeout(r, 20)); }")
        assert peer.read(30)["result"]["value"]["type"] == "execution/started"
        workers = descendants(peer.proc.pid)
        assert workers
        assert peer.proc.stdin is not None
        peer.proc.stdin.write(data)
        peer.proc.stdin.flush()
        assert peer.proc.wait(30) == 1, what
        # Its engine workers went with it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers)
        assert "Traceback" not in _ended(peer, stderr)


def _living(pid: int) -> list[int]:
    return [p for p in descendants(pid) if _alive(p)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _ended(peer: RawPeer, stderr: Path) -> str:
    """What the host wrote on stderr, once its input has ended and it has exited."""
    with contextlib.suppress(OSError):
        peer.proc.stdin.close()  # type: ignore[union-attr]
    with contextlib.suppress(subprocess.TimeoutExpired):
        peer.proc.wait(30)
    return stderr.read_text()


def _next(peer: RawPeer) -> Any:
    """The next frame that is not a ``cell/closed``."""
    while True:
        message = peer.read(60)
        assert message is not None
        if message.get("type") != "cell/closed":
            return message


@contextlib.contextmanager
def _framed(*extra: str) -> Iterator[tuple[RawPeer, Path]]:
    """A framed host (cold: this checkout's code), its stderr kept in a file."""
    folder = Path(tempfile.mkdtemp(prefix="redteam-framed-"))
    stderr = folder / "stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [INTERPRETER, "code-mode-host", *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0, env=COLD,
        )  # fmt: skip
    try:
        yield RawPeer(proc), stderr
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for name in (stderr,):
            with contextlib.suppress(OSError):
                name.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()


# -- the newer mechanisms -----------------------------------------------------------------------


async def test_a_catalog_revision_is_its_own_sessions_alone_and_few_are_kept(
    tcp_host: str,
) -> None:
    pb2 = generated().pb2
    show = "text(ALL_TOOLS.map((t) => t.name).join(','))"

    async def run(client: Any, revision: int, tools: list[Any]) -> str:
        request = pb2.ExecuteRequest(
            session_id=client.session_id, execution_id=f"r{revision}-{time.monotonic_ns()}",
            tool_call_id="c", source=show, catalog_revision=revision, enabled_tools=tools,
        )  # fmt: skip
        events = [e async for e in client.stub.Execute(request)]
        return texts(events[-1].outcome)[0] if texts(events[-1].outcome) else ""

    async with session(tcp_host) as owner, session(tcp_host) as other:
        assert await run(owner, 1, _tools("secret")) == "secret"
        assert await run(owner, 1, []) == "secret"
        # Another connection's session, naming the same revision: none of its tools.
        assert await run(other, 1, []) == ""
        # Many revisions: the oldest go (a session keeps its last few).
        for revision in range(2, 40):
            assert await run(owner, revision, _tools(f"t{revision}")) == f"t{revision}"
        assert await run(owner, 1, []) == ""
        assert await run(owner, 39, []) == "t39"


async def test_heartbeat_intervals_at_the_extremes(tcp_host: str) -> None:
    # 2**64-1 seconds is no timer error (the session works, no heartbeat comes); 0 asks
    # for none.
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(tcp_host, options=CHANNEL_OPTIONS) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        for interval in ((1 << 64) - 1, 0):
            events = stub.OpenSession(pb2.OpenSessionRequest(heartbeat_interval_s=interval))
            session_id = (await events.read()).opened.session_id
            calls = stub.SubscribeToToolCalls(
                pb2.SubscribeToToolCallsRequest(
                    session_id=session_id, heartbeat_interval_s=interval
                )
            )
            request = pb2.ExecuteRequest(
                session_id=session_id, execution_id="e", tool_call_id="c", source='text("ok")'
            )
            got = [e async for e in stub.Execute(request)]
            assert texts(got[-1].outcome) == ["ok"]
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(calls.read(), 1.5)
            events.cancel()


async def test_cells_of_another_connections_session_are_out_of_reach(tcp_host: str) -> None:
    pb2 = generated().pb2
    async with session(tcp_host) as owner:
        started, outcome = await owner.execute(
            "while (true) { await new Promise((r) => setTimeout(r, 20)); }", yield_time_ms=100
        )
        assert outcome.HasField("yielded")
        cell = started.cell_id
        async with grpc.aio.insecure_channel(tcp_host, options=CHANNEL_OPTIONS) as channel:
            stub = generated().grpc.CodeModeHostStub(channel)
            sid = owner.session_id
            for call in (
                stub.Terminate(pb2.TerminateRequest(session_id=sid, cell_id=cell)),
                stub.Wait(pb2.WaitRequest(session_id=sid, cell_id=cell, yield_time_ms=10)),
                stub.YieldObservation(
                    pb2.YieldObservationRequest(session_id=sid, execution_id="e")
                ),
                stub.CloseSession(pb2.CloseSessionRequest(session_id=sid)),
                stub.AcknowledgeNotification(
                    pb2.AcknowledgeNotificationRequest(session_id=sid, notification_id="n")
                ),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call
                assert refused.value.code() == grpc.StatusCode.NOT_FOUND
            # What another client learns of the host: its own process's figures alone.
            metrics = await stub.GetProcessMetrics(pb2.GetProcessMetricsRequest())
            assert {f.name for f, _ in metrics.ListFields()} <= {
                "process_id", "process_start_time_seconds", "cpu_seconds_total",
                "resident_memory_bytes",
            }  # fmt: skip
            assert metrics.process_id == HOST_PIDS[tcp_host]
        # The owner's cell is untouched.
        reply = await owner.stub.Terminate(
            pb2.TerminateRequest(session_id=owner.session_id, cell_id=cell)
        )
        assert reply.live_cell.HasField("terminated")


@pytest.mark.parametrize("tokens", [0, 1, (1 << 64) - 1])
async def test_output_truncation_at_the_extremes_of_max_output_tokens(
    tcp_host: str, tokens: int
) -> None:
    pb2 = generated().pb2
    async with grpc.aio.insecure_channel(tcp_host, options=CHANNEL_OPTIONS) as channel:
        stub = generated().grpc.CodeModeHostStub(channel)
        events = stub.OpenSession(
            pb2.OpenSessionRequest(output_truncation=pb2.OUTPUT_TRUNCATION_SERVER)
        )
        session_id = (await events.read()).opened.session_id
        request = pb2.ExecuteRequest(
            session_id=session_id, execution_id="e", tool_call_id="c", max_output_tokens=tokens,
            source='text("a".repeat(100000)); image("data:image/png;base64,AA"); text("b");'
                   "throw 1",
        )  # fmt: skip
        got = [e async for e in stub.Execute(request)]
        outcome = got[-1].outcome
        events.cancel()
    assert outcome.HasField("completed")
    size = sum(len(t) for t in texts(outcome))
    if tokens > 1000:
        assert texts(outcome)[0] == "a" * 100000
    else:
        assert size < 200, texts(outcome)


@pytest.mark.parametrize(
    ("timeout", "ends"),
    [
        ("abc", False), ("1", False), ("123456789S", False), ("-1S", False), ("1X", False),
        ("99999999H", False), ("1n", True), ("0m", True),
    ],
)  # fmt: skip
def test_grpc_timeouts_malformed_huge_and_tiny(tcp_host: str, timeout: str, ends: bool) -> None:
    # Malformed ones are ignored (as grpcio's server does), a huge one is no timer
    # error, a tiny one ends the RPC at once; the connection serves on either way.
    pb2 = generated().pb2
    with Peer(tcp_host) as peer:
        peer.send(peer.request(1, SERVICE + "OpenSession"))
        (opened,) = _messages(peer, 1, count=1)
        session_id = pb2.SessionEvent.FromString(opened).opened.session_id
        request = pb2.SubscribeToToolCallsRequest(session_id=session_id).SerializeToString()
        peer.send(
            peer.request(3, SERVICE + "SubscribeToToolCalls", request, ("grpc-timeout", timeout))
        )
        trailers: dict[Any, Any] | None = None
        for kind, flags, sid, payload in peer.frames(2 if not ends else 30):
            if kind == HEADERS:
                fields = dict(peer.decoder.decode(payload))
                if sid == 3 and flags & END_STREAM:
                    trailers = fields
                    break
        if ends:
            assert trailers is not None and trailers["grpc-status"] == "4", trailers
        else:
            assert trailers is None, trailers
        execute = pb2.ExecuteRequest(
            session_id=session_id, execution_id="e", tool_call_id="c", source='text("on")'
        ).SerializeToString()
        peer.send(peer.request(5, EXECUTE, execute))
        events = [pb2.ExecuteEvent.FromString(m) for m in _messages(peer, 5, seconds=60)]
        assert texts(events[-1].outcome) == ["on"]


# -- what one connection's cells hold, across its sessions ------------------------------------

# The figures docs/codex-host.md states (session/limits.py): the output one connection's
# cells hold for their client at once, in bytes of the host's memory, and the cells.
OUTPUT_FOR_CLIENT_MIB = OUTPUT_FOR_CLIENT // MIB
_LOOP = "while (true) { await new Promise((r) => setTimeout(r, 20)); }"
# A cell that yields at once, then writes {mib} items of 1 Mi characters and ends, saying
# so by notify() (sent at once, whatever the cell holds). Its items wait in the host until
# the client asks for them: 16 sessions of 16 such cells, each up to its own bound (64 Mi
# characters), made the host hold 16 GiB for one connection that never asked.
_HOLDING = """
yield_control();
await new Promise((r) => setTimeout(r, 100));
const s = {unit}.repeat(1 << 20);
for (let i = 0; i < {mib}; i++) text(s);
notify("done");
"""
_HOLDING_CELLS = 8
_HOLDING_MIB = 48  # items a cell writes, each 1 Mi characters: 384 Mi in all


def _dropped(said: list[str]) -> int:
    """The characters a report says were dropped (its last item, when any were)."""
    if said and said[-1].startswith("[") and "characters of output dropped" in said[-1]:
        return int(said[-1][1:].split(" ", 1)[0])
    return 0


def _kept(said: list[str]) -> int:
    return sum(len(t) for t in said) - (len(said[-1]) if _dropped(said) else 0)


def _check_held(reports: list[list[str]], wide: bool) -> None:
    """What the cells' reports (taken once every program had ended) say of what the host
    held at once: within the connection's bound, and the rest dropped and counted."""
    per_char = 4 if wide else 1  # a str of astral characters: 4 bytes each in the host
    kept = sum(_kept(said) for said in reports)
    dropped = sum(_dropped(said) for said in reports)
    assert kept + dropped == _HOLDING_CELLS * _HOLDING_MIB * MIB, (kept, dropped)
    assert kept * per_char <= OUTPUT_FOR_CLIENT_MIB * MIB, f"{kept * per_char / MIB:.0f} MiB"
    # Most of the bound was used: nothing was dropped while there was room.
    assert kept * per_char >= (OUTPUT_FOR_CLIENT_MIB - 16) * MIB, f"{kept / MIB:.0f} Mi"
    assert dropped > 0


# (A report of 48 Mi characters is more than grpcio's client takes by default.)
_WIDE_MESSAGES = [*CHANNEL_OPTIONS, ("grpc.max_receive_message_length", -1)]


def _holding(wide: bool = False) -> str:
    unit = '"\\u{1F600}"' if wide else '"x"'
    return _HOLDING.replace("{unit}", unit).replace("{mib}", str(_HOLDING_MIB))


async def _hold(client: Any, source: str) -> list[str]:
    """The ids of ``_HOLDING_CELLS`` cells of ``source``, once each program has ended."""
    cells = []
    for _ in range(_HOLDING_CELLS):
        started, outcome = await client.execute(source, yield_time_ms=600_000)
        assert outcome.HasField("yielded"), outcome
        cells.append(started.cell_id)
    done = 0
    while done < _HOLDING_CELLS:  # every program wrote all it would
        event = await asyncio.wait_for(client.events.read(), 300)
        done += event.HasField("notification") and event.notification.text == "done"
    return cells


async def _reports(client: Any, cells: list[str]) -> list[list[str]]:
    """Each cell's report, asked for now: every program ran to its end without error."""
    pb2 = generated().pb2
    reports = []
    for cell in cells:
        wait = pb2.WaitRequest(session_id=client.session_id, cell_id=cell, yield_time_ms=60_000)
        reply = await client.stub.Wait(wait, timeout=300)
        assert reply.live_cell.HasField("completed"), reply.live_cell.WhichOneof("outcome")
        assert not reply.live_cell.completed.HasField("error_text")
        reports.append(texts(reply.live_cell))
    return reports


@pytest.mark.parametrize("wide", [False, True], ids=["ascii", "astral"])
async def test_output_one_connections_cells_hold_is_bounded_in_bytes(wide: bool) -> None:
    # Eight cells of one session each hold 48 Mi characters the client never asks for:
    # 384 MiB held for one connection in ASCII, 1.5 GiB in astral characters (each a
    # Python str's 4 bytes). Now the connection's cells hold 256 MiB at most; a program's
    # items past it are dropped and counted, as a cell's own bound does, and it runs on.
    with host_process("tcp", "quickjs") as address:
        pid = HOST_PIDS[address]
        async with (
            grpc.aio.insecure_channel(address, options=_WIDE_MESSAGES) as channel,
            session(channel) as client,
        ):
            before = _hwm_mib(pid)
            cells = await _hold(client, _holding(wide))
            grown = _hwm_mib(pid) - before
            reports = await _reports(client, cells)
    print(f"peak grew by {grown:.0f} MiB")
    _check_held(reports, wide)
    # (Each item passes through a few copies on its way in: a generous margin.)
    assert grown < OUTPUT_FOR_CLIENT_MIB + GROWTH_MIB, f"the host's peak grew by {grown:.0f} MiB"


async def test_output_held_for_a_client_is_let_go_when_reported_or_its_session_closes() -> None:
    # The connection's account of its cells' output is given back when a report takes
    # the items and when a session closes with cells nobody asked about: else the
    # connection's later cells would keep nothing.
    pb2 = generated().pb2
    with host_process("tcp", "quickjs") as address:
        async with grpc.aio.insecure_channel(address, options=_WIDE_MESSAGES) as channel:
            async with session(channel) as client:
                _check_held(await _reports(client, await _hold(client, _holding())), False)
            async with session(channel) as client:
                await _hold(client, _holding())
                await client.stub.CloseSession(
                    pb2.CloseSessionRequest(session_id=client.session_id)
                )
            async with session(channel) as client:
                _check_held(await _reports(client, await _hold(client, _holding())), False)


def test_bounded_output_says_what_it_holds() -> None:
    # What the connection's account is charged for a cell's bounded output (the host
    # truncating): what its entries cost now, as the tail drops its oldest.
    items = BoundedItems()
    for n in range(3000):
        size = n * 7919 % 40_000
        items.add(TextItem(("\U0001f600" if n % 3 else "y") * (size // 2) + "x" * size))
        if n % 50 == 0:
            items.add(ImageItem(f"data:image/png;base64,{'A' * n}"))
        costs = [
            OUTPUT_EACH if not isinstance(e, TextItem | ImageItem)
            else output_cost(e.text if isinstance(e, TextItem) else e.image_url)
            for e in [*items.head, *items.tail]
        ]  # fmt: skip
        assert items.held == sum(costs), n
    assert items.held < 8 * MIB
    items.take()
    assert items.held == 0


def test_output_a_framed_connections_cells_hold_is_bounded_in_bytes() -> None:
    source = _holding()
    with _framed() as (peer, _):
        peer.open([])
        for n in range(_HOLDING_CELLS):
            peer.execute(10 + n, source, yield_time_ms=600_000)
        cells: list[str] = []
        done = 0
        while done < _HOLDING_CELLS or len(cells) < _HOLDING_CELLS:
            message = peer.read(300)
            assert message is not None, (cells, done)
            if message.get("type") == "delegate/request":
                done += message["request"].get("text") == "done"
                peer.answer(message)
            elif message.get("type") == "execute/initialResponse":
                assert "Yielded" in message["result"]["value"], message
                cells.append(_outcome(message)["cell_id"])
        reports = []
        for n, cell in enumerate(cells):
            wait = {"cell_id": cell, "yield_time_ms": 60_000}
            peer.request(100 + n, {"method": "session/wait", "sessionId": "s", "request": wait})
            answer = _next(peer)
            while answer.get("id") != 100 + n:
                answer = _next(peer)
            outcome = _outcome(answer)
            assert outcome["error_text"] is None, outcome["error_text"]
            reports.append(_texts(outcome))
    _check_held(reports, wide=False)


@pytest.mark.parametrize("transport", ["tcp", "stdio"])
async def test_cells_one_connection_holds_are_capped_across_its_sessions(transport: str) -> None:
    # A session holds --max-cells cells, but a connection held that many in each of its
    # --max-sessions sessions: 256 engine worker processes by default, for one client.
    # Now the connection holds --max-cells-per-connection at most; the one past it is
    # refused as a session's is, and nothing else changes.
    pb2 = generated().pb2
    bounds = ("--max-cells", "2", "--max-cells-per-connection", "3")
    with host_process(transport, "quickjs", *bounds) as address:
        pid = HOST_PIDS[address]
        async with (
            grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel,
            session(channel) as first,
            session(channel) as second,
        ):
            held = []
            for client in (first, first, second):
                started, outcome = await client.execute(_LOOP, yield_time_ms=10)
                assert outcome.HasField("yielded"), outcome
                held.append((client, started.cell_id))
            request = pb2.ExecuteRequest(
                session_id=second.session_id, execution_id="one-too-many", tool_call_id="c",
                source=_LOOP, yield_time_ms=10,
            )  # fmt: skip
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                _ = [e async for e in second.stub.Execute(request)]
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--max-cells-per-connection 3" in (caught.value.details() or "")
            await asyncio.sleep(1.0)  # a worker started for it would be up by now
            assert len(_living(pid)) <= 3 + 1, "an engine worker for the refused cell"
            if transport == "tcp":  # another connection has its own
                async with session(address) as other:
                    _, outcome = await other.execute('text("other")')
                    assert texts(outcome) == ["other"]
            # The cells held are untouched; ending one makes room.
            for client, cell in held:
                reply = await client.stub.Wait(
                    pb2.WaitRequest(session_id=client.session_id, cell_id=cell, yield_time_ms=10)
                )
                assert reply.live_cell.HasField("yielded"), reply
            client, cell = held[0]
            await client.stub.Terminate(
                pb2.TerminateRequest(session_id=client.session_id, cell_id=cell)
            )
            _, outcome = await _admitted(lambda: second.execute('text("room again")'))
            assert texts(outcome) == ["room again"]


def test_cells_a_framed_connection_holds_are_capped_across_its_sessions() -> None:
    with _framed("--max-cells", "2", "--max-cells-per-connection", "3") as (peer, stderr):
        peer.open([])
        peer.request(2, {"method": "session/open", "sessionId": "t"})
        assert _next(peer)["result"]["status"] == "ok"
        cells = []
        for n, where in enumerate(("s", "s", "t")):
            peer.execute(10 + n, _LOOP, session=where, yield_time_ms=10)
            assert _next(peer)["result"]["value"]["type"] == "execution/started"
            cells.append((where, _outcome(_next(peer))["cell_id"]))
        peer.execute(20, _LOOP, session="t", yield_time_ms=10)
        answer = _next(peer)
        assert answer["id"] == 20 and answer["result"]["status"] == "error", answer
        assert "--max-cells-per-connection 3" in answer["result"]["message"], answer
        where, cell = cells[0]
        peer.request(21, {"method": "session/terminate", "sessionId": where, "cellId": cell})
        assert _next(peer)["result"]["value"]["type"] == "wait/completed"
        peer.execute(22, 'text("room again")', session="t")
        assert _next(peer)["result"]["value"]["type"] == "execution/started"
        assert _texts(_outcome(_next(peer))) == ["room again"]
        assert "Traceback" not in _ended(peer, stderr)


# -- answers waiting on windows a client keeps shut ----------------------------------------

RST_STREAM = 3
_REPORT_24_MIB = 'text("x".repeat(24 << 20)); exit();'


def test_answers_waiting_on_windows_a_client_keeps_shut_are_bounded() -> None:
    """A client that reads its socket (the host's writer never fills) but gives each
    stream a window for its first messages only, and asks for report after report: each
    report left the cells' output account when it was taken, then waited for a window
    that never opened (12 reports of 24 MiB: ~1 GiB held). Now what waits is bounded
    (``h2_config.MAX_UNSENT``): past it the stream that would wait is reset with
    ENHANCE_YOUR_CALM."""
    pb2 = generated().pb2
    with host_process("tcp", "quickjs") as address:
        pid = HOST_PIDS[address]
        with Peer(address, preface=False) as peer:
            wide = ((1 << 31) - 1 - 65535).to_bytes(4, "big")
            shut = frame(SETTINGS, 0, 0, _window(0))  # every stream's window closed
            peer.send(PREFACE + shut + frame(WINDOW_UPDATE, 0, 0, wide))
            peer.send(peer.request(1, SERVICE + "OpenSession"))
            peer.send(frame(WINDOW_UPDATE, 0, 1, (1 << 20).to_bytes(4, "big")))  # this one only
            (opened,) = _messages(peer, 1, count=1)
            session_id = pb2.SessionEvent.FromString(opened).opened.session_id
            before = _rss_mib(pid)
            streams = range(3, 27, 2)  # 12 cells (a session holds 16)
            for sid in streams:
                request = pb2.ExecuteRequest(
                    session_id=session_id, execution_id=f"e{sid}", tool_call_id=f"c{sid}",
                    source=_REPORT_24_MIB, yield_time_ms=60_000,
                ).SerializeToString()  # fmt: skip
                # room for the messages before the report: the report is taken off the
                # cells' account, and waits
                peer.send(peer.request(sid, EXECUTE, request)
                          + frame(WINDOW_UPDATE, 0, sid, (4096).to_bytes(4, "big")))
            resets: set[int] = set()
            deadline = time.monotonic() + 120
            while len(resets) < 10 and time.monotonic() < deadline:
                for kind, _flags, sid, payload in peer.frames(1):
                    if kind == RST_STREAM and int.from_bytes(payload, "big") == 0xB:
                        resets.add(sid)
            _quiet(pid)
            # (what it holds now, not its peak: the programs make a few copies of their
            # 24 MiB each on the way, let go once sent or reset)
            grown = _rss_mib(pid) - before
    print(f"resident set grew by {grown:.0f} MiB; {len(resets)} of 12 streams reset")
    # Two reports wait (4 copies of 24 MiB each: 192 MiB of MAX_UNSENT's 256), the
    # others are reset; or a few more wait where the cells' own account cut a late
    # cell's report short (12 x 24 MiB is more than its 256 MiB).
    assert 6 <= len(resets) <= 10, f"{len(resets)} of 12 streams reset"
    assert grown < 600, f"the host holds {grown:.0f} MiB more"
