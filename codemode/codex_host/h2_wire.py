"""HTTP/2 frames and gRPC's pieces on them, for ``h2_server.py``: frame types, flags and
error codes (RFC 9113), how a frame is built, gRPC status codes and how a status is
sent (trailers), and what a served method is.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any, NamedTuple

from codemode.codex_host.hpack import encode_literal

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE = range(9)
CONTINUATION = 9
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, COMPRESSION_ERROR = 0x1, 0x3, 0x6, 0x9
REFUSED_STREAM = 0x7

MAX_FRAME = 16384  # the largest frame this server takes (the protocol's default)
MAX_WINDOW = (1 << 31) - 1
MAX_MESSAGE = 4 << 20  # a request message's cap, as grpcio's server has by default
MAX_HEADER_BLOCK = 1 << 18
# A client may hold this many streams open at once (advertised in SETTINGS, as hyper's
# server does by default); one more is refused with REFUSED_STREAM, which a client
# retries. With the cap on request bytes held for all of them, a hostile client holds
# a bounded amount of this process's memory, whatever it opens.
MAX_STREAMS = 200
MAX_BUFFERED = 64 << 20
RESPONSE = b"\x88" + encode_literal("content-type", "application/grpc")  # :status 200
OK_STATUS = encode_literal("grpc-status", "0")


class Status(IntEnum):
    """gRPC status codes (the ones this host answers with)."""

    OK = 0
    CANCELLED = 1
    INVALID_ARGUMENT = 3
    NOT_FOUND = 5
    FAILED_PRECONDITION = 9
    RESOURCE_EXHAUSTED = 8
    UNIMPLEMENTED = 12
    INTERNAL = 13


class RpcError(Exception):
    """Ends an RPC with this status (raised by a handler)."""

    def __init__(self, code: Status, message: str) -> None:
        super().__init__(message)
        self.code = code


class Method(NamedTuple):
    """One RPC: how its request is read, and its handler, a coroutine function whose
    result is the response message (unary) or an async iterator of them (server
    streaming), or for an ``immediate`` unary RPC a function returning the message."""

    deserialize: Callable[[bytes], Any]
    handler: Callable[[Any], Any]
    streaming: bool
    immediate: bool = False  # a plain function: answered as soon as the request is read


class ProtocolViolation(Exception):
    """The peer broke HTTP/2: the connection ends with GOAWAY and ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def frame(kind: int, flags: int, stream: int, payload: bytes | memoryview = b"") -> bytes:
    return b"".join(
        (len(payload).to_bytes(3, "big"), bytes((kind, flags)), stream.to_bytes(4, "big"), payload)
    )


def status_fields(code: int, message: str) -> bytes:
    fields = encode_literal("grpc-status", str(int(code)))
    if message:
        # grpc-message is percent-encoded UTF-8 (the gRPC HTTP/2 spec)
        raw = message.encode("utf-8", "replace")[:1024]
        text = "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x25 else f"%{b:02X}" for b in raw)
        fields += encode_literal("grpc-message", text)
    return fields


def response_headers(stream: int) -> bytes:
    return frame(HEADERS, END_HEADERS, stream, RESPONSE)


def failed(exc: Exception) -> str:
    return f"the code-mode host failed: {type(exc).__name__}: {str(exc)[:300]}"


def unpad(flags: int, payload: bytes) -> bytes:
    if not flags & PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ProtocolViolation(PROTOCOL_ERROR, "bad padding")
    return payload[1 : len(payload) - payload[0]]
