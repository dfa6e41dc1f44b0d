"""gRPC's pieces on HTTP/2, for ``wire/h2_connection.py``: status codes and how a status is
sent (trailers), what a served method is, and ``grpc-timeout`` (the gRPC over HTTP/2
spec, PROTOCOL-HTTP2.md).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any, NamedTuple

Headers = list[tuple[bytes, bytes]]

# A request message's cap, as grpcio's server has by default.
MAX_MESSAGE = 4 << 20
RESPONSE: Headers = [(b":status", b"200"), (b"content-type", b"application/grpc")]


class Status(IntEnum):
    """gRPC status codes (the ones this host answers with)."""

    OK = 0
    CANCELLED = 1
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
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
    """One served RPC: how its request is read, and its handler, a coroutine function
    whose result is the response message (unary) or an async iterator of them (server
    streaming), or for an ``immediate`` unary RPC a function returning the message."""

    deserialize: Callable[[bytes], Any]
    handler: Callable[[Any], Any]
    streaming: bool
    immediate: bool = False  # a plain function: answered as soon as the request is read


class WithMetadata(NamedTuple):
    """A unary handler's response message with response headers of its own (gRPC's
    initial metadata), sent between ``:status`` and ``content-type`` as Codex's host
    orders them."""

    message: Any
    metadata: Headers


def response_headers(metadata: Headers) -> Headers:
    return RESPONSE[:1] + metadata + RESPONSE[1:] if metadata else RESPONSE


def status_headers(code: int, message: str) -> Headers:
    fields = [(b"grpc-status", str(int(code)).encode())]
    if message:
        # grpc-message is percent-encoded UTF-8 (the gRPC HTTP/2 spec)
        raw = message.encode("utf-8", "replace")[:1024]
        text = "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x25 else f"%{b:02X}" for b in raw)
        fields.append((b"grpc-message", text.encode()))
    return fields


def failed(exc: BaseException) -> str:
    return f"the code-mode host failed: {type(exc).__name__}: {str(exc)[:300]}"


_UNITS = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}


def timeout_s(value: bytes) -> float | None:
    """A ``grpc-timeout`` header's seconds: at most 8 digits and a unit; None when it is
    not one (the spec's grammar; such a header is then ignored, as grpcio's server does)."""
    digits, unit = value[:-1], value[-1:]
    if not 1 <= len(digits) <= 8 or not digits.isdigit() or unit not in _UNITS:
        return None
    return int(digits) * _UNITS[unit]
