"""The host's own HTTP/2 server and HPACK decoder against broken peers: a real host
process on TCP (and on stdio) fed raw frames from a socket, then a real gRPC client
to show nothing else was disturbed. The well-behaved clients (grpcio's, Codex's
tonic) are tests/test_codex_host_grpc.py and tests/test_codex_cli_host.py."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from codemode.codex_host import hpack
from codemode.codex_host.h2_wire import (
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PING,
    PREFACE,
    RST_STREAM,
    SETTINGS,
    frame,
)
from tests.codex_host_support import INTERPRETER, host_process, session, texts

pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

EXECUTE = "/codex.code_mode.v1.CodeModeHost/Execute"


def test_hpack_decodes_rfc_7541_examples_with_huffman_and_the_dynamic_table() -> None:
    # RFC 7541 C.4: three requests on one connection, Huffman-coded, sharing a table.
    decoder = hpack.Decoder()
    first = decoder.decode(bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff"))
    assert first[-1] == (":authority", "www.example.com")
    second = decoder.decode(bytes.fromhex("828684be5886a8eb10649cbf"))
    assert second[-2:] == [(":authority", "www.example.com"), ("cache-control", "no-cache")]
    third = decoder.decode(bytes.fromhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"))
    assert third[-1] == ("custom-key", "custom-value")
    assert decoder.size == 164  # the table's size after C.4.3, as the RFC gives it


@pytest.mark.parametrize(
    "block",
    [
        b"\xff\x80\x80\x80\x80\x80\x01",  # an index far past the table
        b"\xbe",  # index 62: the dynamic table is empty
        b"\x00\x85" + b"\xff" * 5 + b"\x00",  # Huffman: EOS inside the string
        b"\x00\x81\x00\x00",  # Huffman padding that is not EOS's prefix
        b"\x3f\xe2\x1f",  # a table size of 4097, over the 4096 agreed
        b"\x00\x05ab",  # a string running past the block
    ],
)
def test_hpack_refuses_a_bad_block_with_a_clear_error(block: bytes) -> None:
    with pytest.raises(hpack.HpackError):
        hpack.Decoder().decode(block)


def _request_headers(path: str) -> bytes:
    fields = [
        (":method", "POST"), (":scheme", "http"), (":path", path),
        (":authority", "test"), ("content-type", "application/grpc"), ("te", "trailers"),
    ]  # fmt: skip
    return b"".join(hpack.encode_literal(name, value) for name, value in fields)


def _read_frames(sock: socket.socket, until: float) -> Iterator[tuple[int, int, int, bytes]]:
    buffer = b""
    while time.monotonic() < until:
        while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
            length = int.from_bytes(buffer[:3], "big")
            kind, flags = buffer[3], buffer[4]
            stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
            yield kind, flags, stream, buffer[9 : 9 + length]
            buffer = buffer[9 + length :]
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if not data:
            return
        buffer += data


def _status(sock: socket.socket, stream: int) -> dict[str, str]:
    """The trailers (or trailers-only headers) that end ``stream``."""
    decoder = hpack.Decoder()
    for kind, flags, sid, payload in _read_frames(sock, time.monotonic() + 30):
        if kind == HEADERS:
            fields = dict(decoder.decode(payload))
            if sid == stream and flags & END_STREAM:
                return fields
    raise AssertionError(f"stream {stream} never ended")


def _go_away_code(sock: socket.socket) -> int | None:
    for kind, _flags, _sid, payload in _read_frames(sock, time.monotonic() + 30):
        if kind == GOAWAY:
            return int.from_bytes(payload[4:8], "big")
    return None


@pytest.fixture(scope="module")
def tcp_host() -> Iterator[str]:
    with host_process("tcp", "quickjs") as address:
        yield address


def _connect(address: str, preface: bool = True) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.settimeout(1)
    if preface:
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
    return sock


async def _still_serves(address: str) -> None:
    async with session(address) as client:
        _, outcome = await client.execute('text("still here")')
        assert texts(outcome) == ["still here"]


@pytest.mark.parametrize(
    ("what", "sent", "code"),
    [
        ("not HTTP/2", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0x1),  # PROTOCOL_ERROR
        ("a broken header block", frame(HEADERS, END_HEADERS, 1, b"\xbe"), 0x9),
        ("a frame over the size agreed", frame(DATA, 0, 1, b"x" * 20000), 0x6),
        ("HEADERS on stream 0", frame(HEADERS, END_HEADERS, 0, b"\x82"), 0x1),
    ],
)
async def test_a_peer_that_breaks_http2_gets_goaway_and_others_are_served(
    tcp_host: str, what: str, sent: bytes, code: int
) -> None:
    sock = _connect(tcp_host, preface=not sent.startswith(b"GET"))
    with sock:
        sock.sendall(sent)
        assert _go_away_code(sock) == code, what
    await _still_serves(tcp_host)


async def test_bad_grpc_requests_get_a_status_on_their_stream(tcp_host: str) -> None:
    with _connect(tcp_host) as sock:
        # A compressed message (this server takes none): UNIMPLEMENTED.
        sock.sendall(
            frame(HEADERS, END_HEADERS, 1, _request_headers(EXECUTE))
            + frame(DATA, END_STREAM, 1, b"\x01\x00\x00\x00\x00")
        )
        assert _status(sock, 1)["grpc-status"] == "12"
        # A body that is not one gRPC message (the length says more than came): INTERNAL.
        sock.sendall(
            frame(HEADERS, END_HEADERS, 3, _request_headers(EXECUTE))
            + frame(DATA, END_STREAM, 3, b"\x00\x00\x00\x00\x09ab")
        )
        assert _status(sock, 3)["grpc-status"] == "13"
        # A request over the 4 MiB cap: RESOURCE_EXHAUSTED, without reading it all.
        sock.sendall(frame(HEADERS, END_HEADERS, 5, _request_headers(EXECUTE)))
        chunk = frame(DATA, 0, 5, b"\x00" * 16384)
        sock.sendall(chunk * ((4 << 20) // 16384 + 2))
        trailers = _status(sock, 5)
        assert trailers["grpc-status"] == "8" and "too large" in trailers["grpc-message"]
        # An unknown method, even one that is a prefix of a real one: UNIMPLEMENTED.
        sock.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 7, _request_headers("/x/Exec")))
        assert _status(sock, 7)["grpc-status"] == "12"
    await _still_serves(tcp_host)


def test_a_stdio_host_fed_garbage_ends_without_a_traceback() -> None:
    proc = subprocess.run(
        [INTERPRETER, "code-mode-host", "--listen", "grpc+stdio://"],
        input=b"this is not HTTP/2 at all\r\n\r\n" * 4, capture_output=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    # What came back is one GOAWAY (PROTOCOL_ERROR) after the server's own SETTINGS.
    frames = []
    out = proc.stdout
    while len(out) >= 9:
        length = int.from_bytes(out[:3], "big")
        frames.append((out[3], out[9 : 9 + length]))
        out = out[9 + length :]
    assert [kind for kind, _ in frames][-1] == GOAWAY
    assert int.from_bytes(frames[-1][1][4:8], "big") == 0x1


def _settings(sock: socket.socket) -> dict[int, int]:
    for kind, flags, _sid, payload in _read_frames(sock, time.monotonic() + 30):
        if kind == SETTINGS and not flags & 0x1:
            return {
                int.from_bytes(payload[at : at + 2], "big"): int.from_bytes(
                    payload[at + 2 : at + 6], "big"
                )
                for at in range(0, len(payload), 6)
            }
    raise AssertionError("no SETTINGS from the server")


async def test_a_client_opening_more_streams_than_advertised_is_refused_one(
    tcp_host: str,
) -> None:
    with _connect(tcp_host) as sock:
        most = _settings(sock)[3]  # SETTINGS_MAX_CONCURRENT_STREAMS
        assert 0 < most <= 1000
        # Requests that never end (no END_STREAM) hold their streams open.
        opened = b"".join(
            frame(HEADERS, END_HEADERS, 2 * n + 1, _request_headers(EXECUTE))
            for n in range(most + 1)
        )
        sock.sendall(opened)
        extra = 2 * most + 1
        refused = next(
            (payload for kind, _f, sid, payload in _read_frames(sock, time.monotonic() + 30)
             if kind == RST_STREAM and sid == extra),
            None,
        )  # fmt: skip
        assert refused == (0x7).to_bytes(4, "big")  # REFUSED_STREAM: the client may retry
    await _still_serves(tcp_host)


async def test_request_bytes_held_across_streams_are_capped(tcp_host: str) -> None:
    # Each stream stays under the 4 MiB message cap, but together they pass what the
    # server holds for one connection: a later stream is refused, nothing more is kept.
    chunk = b"\x00" * 16384
    per_stream = (4 << 20) // 16384 - 1  # just under 4 MiB each
    with _connect(tcp_host) as sock:
        sock.settimeout(30)
        refused = None
        for n in range(40):
            sid = 2 * n + 1
            sock.sendall(frame(HEADERS, END_HEADERS, sid, _request_headers(EXECUTE)))
            sock.sendall(frame(DATA, 0, sid, chunk) * per_stream)
        sock.settimeout(1)
        decoder = hpack.Decoder()
        for kind, flags, sid, payload in _read_frames(sock, time.monotonic() + 30):
            if kind == HEADERS:
                fields = dict(decoder.decode(payload))
                if flags & END_STREAM and fields.get("grpc-status") == "8":
                    refused = (sid, fields["grpc-message"])
                    break
        assert refused is not None, "40 streams of ~4 MiB each were all held"
        assert "held at once" in refused[1]
        assert refused[0] < 2 * 40 + 1
    await _still_serves(tcp_host)


async def test_a_client_that_never_reads_cannot_grow_the_servers_buffers(
    tcp_host: str,
) -> None:
    # 64 MiB of PINGs, each answered by a PING ACK the client never reads. The server
    # stops reading once its writes back up, so the client's sends stall long before
    # the end; a server that read on would take all of it and buffer every answer.
    ping = frame(PING, 0, 0, b"12345678")
    burst = ping * 4096
    total = 64 << 20
    sent = 0
    with _connect(tcp_host) as sock:
        sock.setblocking(False)
        stalled_since = None
        rest = memoryview(burst)
        while sent < total:
            try:
                wrote = sock.send(rest)  # a partial send: the rest goes next, frames whole
                sent += wrote
                rest = rest[wrote:] or memoryview(burst)
                stalled_since = None
            except BlockingIOError:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 3:
                    break
                time.sleep(0.01)
    assert sent < total // 2, f"the server read {sent} bytes it could not answer"
    await _still_serves(tcp_host)
