"""The host's HTTP/2 server against broken and hostile peers: a real host process on TCP
(and on stdio) fed raw frames from a socket, then a real gRPC client to show nothing
else was disturbed. The floods: CONTINUATION, HPACK (a header list that decodes far
larger than its block), rapid reset, SETTINGS and PING answers never read, windows;
then stream states and ``grpc-timeout``. The well-behaved clients (grpcio's, Codex's
tonic) are tests/test_codex_host_grpc.py and tests/test_codex_cli_host.py."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from hpack import Decoder, Encoder

from tests.codex_host_support import INTERPRETER, generated, host_process, session, texts

pytest.importorskip("grpc", reason="grpcio is not installed (scripts/setup.sh)")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
END_STREAM, END_HEADERS = 0x1, 0x4
PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, COMPRESSION_ERROR = 0x1, 0x3, 0x6, 0x9
ENHANCE_YOUR_CALM = 0xB
# A header block that does not decode: RFC 9113 says COMPRESSION_ERROR, h2 answers
# PROTOCOL_ERROR; either way the connection ends.
HPACK_BROKEN = -1
SERVICE = "/codex.code_mode.v1.CodeModeHost/"
EXECUTE = SERVICE + "Execute"


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    head = len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big")
    return head + payload


def grpc_message(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


class Peer:
    """A raw HTTP/2 client on one socket: frames out, frames in (headers decoded with
    one HPACK decoder for the connection, as the server's encoder indexes)."""

    def __init__(self, address: str, preface: bool = True) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.settimeout(1)
        self.encoder, self.decoder = Encoder(), Decoder()
        self.buffer = b""
        if preface:
            self.send(PREFACE + frame(SETTINGS, 0, 0))

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *_: object) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def headers(self, path: str, *extra: tuple[str, str]) -> bytes:
        fields = [
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", "test"), ("content-type", "application/grpc"), ("te", "trailers"),
            *extra,
        ]  # fmt: skip
        return bytes(self.encoder.encode(fields))

    def request(self, sid: int, path: str, message: bytes = b"", *extra: tuple[str, str]) -> bytes:
        return frame(HEADERS, END_HEADERS, sid, self.headers(path, *extra)) + frame(
            DATA, END_STREAM, sid, grpc_message(message)
        )

    def frames(self, seconds: float = 30) -> Iterator[tuple[int, int, int, bytes]]:
        """Frames as they come; HEADERS payloads decoded to a dict (as bytes of repr)."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            buffer = self.buffer
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                length = int.from_bytes(buffer[:3], "big")
                kind, flags = buffer[3], buffer[4]
                sid = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                payload = buffer[9 : 9 + length]
                buffer = self.buffer = buffer[9 + length :]
                yield kind, flags, sid, payload
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            self.buffer += data

    def status(self, stream: int, seconds: float = 30) -> dict[str, str]:
        """The trailers (or trailers-only headers) that end ``stream``."""
        for kind, flags, sid, payload in self.frames(seconds):
            if kind == HEADERS:
                fields = dict(self.decoder.decode(payload))
                if sid == stream and flags & END_STREAM:
                    return fields
        raise AssertionError(f"stream {stream} never ended")

    def go_away_code(self, seconds: float = 30) -> int | None:
        for kind, _flags, _sid, payload in self.frames(seconds):
            if kind == HEADERS:
                self.decoder.decode(payload)
            if kind == GOAWAY:
                return int.from_bytes(payload[4:8], "big")
        return None

    def settings(self) -> dict[int, int]:
        for kind, flags, _sid, payload in self.frames():
            if kind == SETTINGS and not flags & 0x1:
                return {
                    int.from_bytes(payload[at : at + 2], "big"): int.from_bytes(
                        payload[at + 2 : at + 6], "big"
                    )
                    for at in range(0, len(payload), 6)
                }
        raise AssertionError("no SETTINGS from the server")

    def session_id(self, sid: int = 1) -> str:
        """Opens a session on stream ``sid``; its id, from the first SessionEvent."""
        pb2 = generated().pb2
        self.send(self.request(sid, SERVICE + "OpenSession"))
        body = b""
        for kind, _flags, got, payload in self.frames():
            if kind == HEADERS:
                self.decoder.decode(payload)
            elif kind == DATA and got == sid:
                body += payload
                if len(body) >= 5 and len(body) >= 5 + int.from_bytes(body[1:5], "big"):
                    event = pb2.SessionEvent.FromString(body[5:])
                    return str(event.opened.session_id)
        raise AssertionError("OpenSession sent no event")


@pytest.fixture(scope="module")
def tcp_host() -> Iterator[str]:
    with host_process("tcp", "quickjs") as address:
        yield address


async def _still_serves(address: str) -> None:
    async with session(address) as client:
        _, outcome = await client.execute('text("still here")')
        assert texts(outcome) == ["still here"]


@pytest.mark.parametrize(
    ("what", "sent", "code"),
    [
        ("not HTTP/2", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", PROTOCOL_ERROR),
        ("an index past the table", frame(HEADERS, END_HEADERS, 1, b"\xbe"), HPACK_BROKEN),
        (
            "an index far past the table",
            frame(HEADERS, END_HEADERS, 1, b"\xff\x80\x80\x80\x80\x80\x01"),
            HPACK_BROKEN,
        ),
        (
            "Huffman EOS inside a string",
            frame(HEADERS, END_HEADERS, 1, b"\x00\x85" + b"\xff" * 5 + b"\x00"),
            HPACK_BROKEN,
        ),
        (
            "Huffman padding that is not EOS",
            frame(HEADERS, END_HEADERS, 1, b"\x00\x81\x00\x00"),
            HPACK_BROKEN,
        ),
        (
            "a table size over the one agreed",
            frame(HEADERS, END_HEADERS, 1, b"\x3f\xe2\x1f"),
            HPACK_BROKEN,
        ),
        (
            "a string running past the block",
            frame(HEADERS, END_HEADERS, 1, b"\x00\x05ab"),
            HPACK_BROKEN,
        ),
        ("a frame over the size agreed", frame(DATA, 0, 1, b"x" * 20000), FRAME_SIZE_ERROR),
        ("HEADERS on stream 0", frame(HEADERS, END_HEADERS, 0, b"\x82"), PROTOCOL_ERROR),
        ("DATA on a stream never opened", frame(DATA, 0, 1, b"x"), PROTOCOL_ERROR),
        (
            "CONTINUATION without HEADERS",
            frame(CONTINUATION, END_HEADERS, 1, b"\x82"),
            PROTOCOL_ERROR,
        ),
        (
            "a window past 2^31-1",
            frame(WINDOW_UPDATE, 0, 0, (0x7FFFFFFF).to_bytes(4, "big")),
            FLOW_CONTROL_ERROR,
        ),
        ("a bad PING", frame(PING, 0, 0, b"1234"), FRAME_SIZE_ERROR),
    ],
)
async def test_a_peer_that_breaks_http2_gets_goaway_and_others_are_served(
    tcp_host: str, what: str, sent: bytes, code: int
) -> None:
    with Peer(tcp_host, preface=not sent.startswith(b"GET")) as peer:
        peer.send(sent)
        got = peer.go_away_code()
        if code == HPACK_BROKEN:
            assert got in {COMPRESSION_ERROR, PROTOCOL_ERROR}, what
        else:
            assert got == code, what
    await _still_serves(tcp_host)


async def test_bad_grpc_requests_get_a_status_on_their_stream(tcp_host: str) -> None:
    with Peer(tcp_host) as peer:
        # A compressed message (this server takes none): UNIMPLEMENTED.
        peer.send(
            frame(HEADERS, END_HEADERS, 1, peer.headers(EXECUTE))
            + frame(DATA, END_STREAM, 1, b"\x01\x00\x00\x00\x00")
        )
        assert peer.status(1)["grpc-status"] == "12"
        # A body that is not one gRPC message (the length says more than came): INTERNAL.
        peer.send(
            frame(HEADERS, END_HEADERS, 3, peer.headers(EXECUTE))
            + frame(DATA, END_STREAM, 3, b"\x00\x00\x00\x00\x09ab")
        )
        assert peer.status(3)["grpc-status"] == "13"
        # A request over the 4 MiB cap: RESOURCE_EXHAUSTED, without reading it all.
        peer.send(frame(HEADERS, END_HEADERS, 5, peer.headers(EXECUTE)))
        chunk = frame(DATA, 0, 5, b"\x00" * 16384)
        peer.sock.settimeout(30)
        peer.send(chunk * ((4 << 20) // 16384 + 2))
        peer.sock.settimeout(1)
        trailers = peer.status(5)
        assert trailers["grpc-status"] == "8" and "too large" in trailers["grpc-message"]
        # An unknown method, even one that is a prefix of a real one: UNIMPLEMENTED.
        peer.send(frame(HEADERS, END_HEADERS | END_STREAM, 7, peer.headers("/x/Exec")))
        assert peer.status(7)["grpc-status"] == "12"
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
    assert int.from_bytes(frames[-1][1][4:8], "big") == PROTOCOL_ERROR


async def test_a_continuation_flood_ends_the_connection_early(tcp_host: str) -> None:
    # A header block that never ends: HEADERS without END_HEADERS, then CONTINUATION
    # frames of one header each, 64 MiB of them. The server must give up long before.
    with Peer(tcp_host) as peer:
        peer.send(frame(HEADERS, 0, 1, peer.headers(EXECUTE)))
        piece = frame(CONTINUATION, 0, 1, bytes(Encoder().encode([("x-pad", "y" * 8000)])))
        peer.sock.setblocking(False)
        sent, total, stalled = 0, 64 << 20, None
        while sent < total:
            try:
                peer.sock.sendall(piece)
                sent += len(piece)
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                stalled = stalled or time.monotonic()
                if time.monotonic() - stalled > 3:
                    break
                time.sleep(0.01)
        peer.sock.setblocking(True)
        peer.sock.settimeout(1)
        assert sent < total // 4, f"the server read {sent} bytes of one header block"
        assert peer.go_away_code() in {PROTOCOL_ERROR, ENHANCE_YOUR_CALM, COMPRESSION_ERROR}
    await _still_serves(tcp_host)


async def test_a_header_list_that_decodes_far_larger_than_its_block_is_refused(
    tcp_host: str,
) -> None:
    # HPACK amplification: one 4 KB header enters the dynamic table, then one byte per
    # reference to it: a 16 KB block is a 64 MB header list. The server advertises a
    # header-list limit and holds to it.
    with Peer(tcp_host) as peer:
        limit = peer.settings().get(0x6)  # SETTINGS_MAX_HEADER_LIST_SIZE
        assert limit is not None and limit <= 1 << 20, "no header-list limit advertised"
        block = peer.headers(EXECUTE)
        big = bytes(peer.encoder.encode([("x-big", "b" * 4000)]))  # indexed: table entry 62
        refs = b"\xbe" * (16000 - len(block) - len(big))
        peer.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, block + big + refs))
        refused = None
        for kind, _flags, sid, payload in peer.frames():
            if kind == GOAWAY:
                refused = ("GOAWAY", int.from_bytes(payload[4:8], "big"))
                break
            if kind == RST_STREAM and sid == 1:
                refused = ("RST_STREAM", int.from_bytes(payload, "big"))
                break
            if kind == HEADERS and sid == 1:
                fields = dict(peer.decoder.decode(payload))
                if fields.get(":status") == "431":
                    refused = ("431", 0)
                    break
                raise AssertionError(f"a 64 MB header list was taken: {fields}")
        assert refused is not None
    await _still_serves(tcp_host)


@pytest.mark.parametrize("whole", [True, False], ids=["sessions-opened", "requests-unfinished"])
async def test_rapid_reset_ends_the_connection(tcp_host: str, whole: bool) -> None:
    # CVE-2023-44487: each stream opens a session (work begun), or starts a request it
    # never finishes, and is reset at once; the client never waits for an answer. Ten
    # thousand of them: the server must call it off (GOAWAY) rather than do all that
    # work for nothing.
    with Peer(tcp_host) as peer:
        cancel = (0x8).to_bytes(4, "big")  # CANCEL

        def opened(sid: int) -> bytes:
            if whole:
                return peer.request(sid, SERVICE + "OpenSession")
            return frame(HEADERS, END_HEADERS, sid, peer.headers(EXECUTE))

        batch = b"".join(
            opened(sid) + frame(RST_STREAM, 0, sid, cancel) for sid in range(1, 20001, 2)
        )
        peer.sock.settimeout(30)
        try:
            peer.send(batch)
        except (BrokenPipeError, ConnectionResetError):
            pass
        peer.sock.settimeout(1)
        assert peer.go_away_code() == ENHANCE_YOUR_CALM
    await _still_serves(tcp_host)


async def test_a_client_opening_more_streams_than_advertised_loses_its_connection(
    tcp_host: str,
) -> None:
    with Peer(tcp_host) as peer:
        most = peer.settings()[3]  # SETTINGS_MAX_CONCURRENT_STREAMS
        assert 0 < most <= 1000
        # Requests that never end (no END_STREAM) hold their streams open.
        peer.send(
            b"".join(
                frame(HEADERS, END_HEADERS, 2 * n + 1, peer.headers(EXECUTE))
                for n in range(most + 1)
            )
        )
        assert peer.go_away_code() in {PROTOCOL_ERROR, 0x7}  # 0x7: REFUSED_STREAM
    await _still_serves(tcp_host)


async def test_request_bytes_held_across_streams_are_capped(tcp_host: str) -> None:
    # Each stream stays under the 4 MiB message cap, but together they pass what the
    # server holds for one connection: a later stream is refused, nothing more is kept.
    chunk = b"\x00" * 16384
    per_stream = (4 << 20) // 16384 - 1  # just under 4 MiB each
    with Peer(tcp_host) as peer:
        peer.sock.settimeout(30)
        for n in range(40):
            sid = 2 * n + 1
            peer.send(frame(HEADERS, END_HEADERS, sid, peer.headers(EXECUTE)))
            peer.send(frame(DATA, 0, sid, chunk) * per_stream)
        peer.sock.settimeout(1)
        refused = None
        for kind, flags, sid, payload in peer.frames():
            if kind == HEADERS:
                fields = dict(peer.decoder.decode(payload))
                if flags & END_STREAM and fields.get("grpc-status") == "8":
                    refused = (sid, fields["grpc-message"])
                    break
        assert refused is not None, "40 streams of ~4 MiB each were all held"
        assert "held at once" in refused[1]
        assert refused[0] < 2 * 40 + 1
    await _still_serves(tcp_host)


@pytest.mark.parametrize(
    "what",
    [
        frame(PING, 0, 0, b"12345678"),
        frame(SETTINGS, 0, 0, (4).to_bytes(2, "big") + (65535).to_bytes(4, "big")),
    ],
    ids=["PING", "SETTINGS"],
)  # fmt: skip
async def test_a_client_that_never_reads_cannot_grow_the_servers_buffers(
    tcp_host: str, what: bytes
) -> None:
    # 64 MiB of frames that each get an answer (a PING ACK, a SETTINGS ACK) the client
    # never reads. The server stops reading once its writes back up, so the client's
    # sends stall long before the end; a server that read on would buffer every answer.
    burst = what * (65536 // len(what))
    total = 64 << 20
    sent = 0
    with Peer(tcp_host) as peer:
        sock = peer.sock
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
            except (BrokenPipeError, ConnectionResetError):
                break
    assert sent < total // 2, f"the server read {sent} bytes it could not answer"
    await _still_serves(tcp_host)


async def test_answers_wait_for_the_clients_window(tcp_host: str) -> None:
    # A client whose streams start with no window gets response headers but no DATA
    # until it opens the window; then the message comes whole.
    with Peer(tcp_host, preface=False) as peer:
        zero = (4).to_bytes(2, "big") + (0).to_bytes(4, "big")  # INITIAL_WINDOW_SIZE 0
        peer.send(PREFACE + frame(SETTINGS, 0, 0, zero))
        peer.send(peer.request(1, SERVICE + "OpenSession"))
        got = [kind for kind, _f, sid, p in peer.frames(2) if sid == 1 or kind == HEADERS]
        assert DATA not in got
        peer.send(frame(WINDOW_UPDATE, 0, 1, (1 << 16).to_bytes(4, "big")))
        assert any(kind == DATA and sid == 1 for kind, _f, sid, _p in peer.frames(10))
    await _still_serves(tcp_host)


async def test_grpc_timeout_ends_an_rpc_with_deadline_exceeded(tcp_host: str) -> None:
    # A tool-call subscription never ends by itself; with grpc-timeout 300m the server
    # ends it with DEADLINE_EXCEEDED (status 4) once the time has passed.
    pb2 = generated().pb2
    with Peer(tcp_host) as peer:
        session_id = peer.session_id(1)
        request = pb2.SubscribeToToolCallsRequest(session_id=session_id).SerializeToString()
        started = time.monotonic()
        peer.send(
            peer.request(3, SERVICE + "SubscribeToToolCalls", request, ("grpc-timeout", "300m"))
        )
        trailers = peer.status(3, seconds=20)
        assert trailers["grpc-status"] == "4", trailers
        assert 0.25 < time.monotonic() - started < 15
    await _still_serves(tcp_host)
