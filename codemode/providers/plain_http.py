"""One streamed POST over plain HTTP/1.1 on asyncio streams, for a model service at an
``http://`` address reached without a proxy: a local model, the scripted test server.

httpx, and what it loads for one asyncio request (httpcore, h11, anyio), costs 60-100 ms
of CPU at every start of `interpreter exec`, more than the rest of the request; such a
service needs none of it (no TLS, no proxy, no HTTP/2, no connection pool: the request
has a connection of its own, closed with it). ``transport`` sends everything else through
httpx, and maps the errors below to the same ``ProviderError`` kinds for both.
"""

from __future__ import annotations

import asyncio
import codecs
import zlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

_MAX_HEAD = 64 << 10  # the status line and headers of a reply
_READ = 64 << 10


class PlainHttpError(Exception):
    """A request that failed; ``kind`` names how, as httpx would (``ConnectError``,
    ``ReadTimeout``, ``RemoteProtocolError``...)."""

    def __init__(self, kind: str, message: str, *, timeout: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.timeout = timeout


def applies(base_url: str, proxied: bool) -> bool:
    """Whether requests to ``base_url`` can go this way: plain ``http://`` with a host
    and no proxy to go through."""
    if proxied or not base_url.lower().startswith("http://"):
        return False
    try:
        parts = urlsplit(base_url)
        return bool(parts.hostname) and not parts.username and (parts.port or 80) > 0
    except ValueError:
        return False


@dataclass
class Reply:
    """The status and headers of a reply (names lower-cased), and its body to read."""

    status_code: int
    headers: dict[str, str]
    _body: AsyncIterator[bytes] = field(repr=False)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        async for chunk in self._body:
            yield chunk

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self._body])

    async def aiter_text(self) -> AsyncIterator[str]:
        """The body as UTF-8 text (what model services send), as it arrives."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        async for chunk in self._body:
            text = decoder.decode(chunk)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail


def request_target(url: str, params: Mapping[str, str] | None) -> tuple[str, int, str, str]:
    """host, port, the Host header and the request target of ``url`` plus ``params``
    (added to any query it has)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or 80
    target = parts.path or "/"
    query = parts.query
    if params:
        query = f"{query}&{urlencode(params)}" if query else urlencode(params)
    if query:
        target = f"{target}?{query}"
    shown = f"[{host}]" if ":" in host else host
    return host, port, shown if port == 80 else f"{shown}:{port}", target


@asynccontextmanager
async def post(
    url: str,
    body: bytes,
    *,
    headers: Mapping[str, str],
    params: Mapping[str, str] | None,
    timeout_s: float,
    connect_timeout_s: float,
) -> AsyncIterator[Reply]:
    """POST ``body`` (JSON) to ``url``; the reply, its body read as it is iterated.
    Raises PlainHttpError."""
    host, port, host_header, target = request_target(url, params)
    try:
        async with asyncio.timeout(connect_timeout_s):
            reader, writer = await asyncio.open_connection(host, port, limit=_MAX_HEAD)
    except TimeoutError:
        raise PlainHttpError("ConnectTimeout", "timed out connecting", timeout=True) from None
    except OSError as exc:
        raise PlainHttpError("ConnectError", str(exc) or type(exc).__name__) from None
    try:
        lines = [f"POST {target} HTTP/1.1", f"Host: {host_header}"]
        sent = {"host", "content-length", "connection", "transfer-encoding"}
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in sent]
        lines += [f"Content-Length: {len(body)}", "Connection: close"]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            writer.write(head + body)
            async with asyncio.timeout(timeout_s):
                await writer.drain()
        except TimeoutError:
            raise PlainHttpError("WriteTimeout", "timed out sending", timeout=True) from None
        except OSError as exc:
            raise PlainHttpError("WriteError", str(exc) or type(exc).__name__) from None
        status, reply_headers = await _read_head(reader, timeout_s)
        yield Reply(status, reply_headers, _body(reader, reply_headers, timeout_s))
    finally:
        writer.close()


# What httpx says when the connection ends early (the errors read the same either way).
_CUT = "peer closed connection without sending complete message body"
_CUT_CHUNKED = f"{_CUT} (incomplete chunked read)"


async def _read(
    reader: asyncio.StreamReader, timeout_s: float, what: str, *, line: bool = False,
    exactly: int | None = None, cut: str = _CUT,
) -> bytes:
    """A line (``line``), ``exactly`` bytes, else what arrives next (b"" at the end);
    ``cut``: the error when the connection ends first."""
    try:
        async with asyncio.timeout(timeout_s):
            if line:
                return await reader.readuntil(b"\n")
            if exactly is not None:
                return await reader.readexactly(exactly)
            return await reader.read(_READ)
    except TimeoutError:
        raise PlainHttpError("ReadTimeout", f"timed out reading {what}", timeout=True) from None
    except asyncio.IncompleteReadError:
        raise PlainHttpError("RemoteProtocolError", cut) from None
    except asyncio.LimitOverrunError:
        raise PlainHttpError("RemoteProtocolError", f"{what}: line too long") from None
    except OSError as exc:
        raise PlainHttpError("ReadError", str(exc) or type(exc).__name__) from None


async def _read_head(reader: asyncio.StreamReader, timeout_s: float) -> tuple[int, dict[str, str]]:
    """The status and headers; informational (1xx) replies are skipped."""
    while True:
        status_line = (
            await _read(reader, timeout_s, "the status line", line=True,
                        cut="Server disconnected without sending a response.")
        ).decode("latin-1")  # fmt: skip
        fields = status_line.split(None, 2)
        if len(fields) < 2 or not fields[0].startswith("HTTP/1.") or not fields[1].isdigit():
            raise PlainHttpError("RemoteProtocolError", f"bad status line {status_line[:80]!r}")
        headers: dict[str, str] = {}
        size = len(status_line)
        while True:
            raw = await _read(reader, timeout_s, "the headers", line=True)
            size += len(raw)
            if size > _MAX_HEAD:
                raise PlainHttpError("RemoteProtocolError", "the reply's headers are too large")
            text = raw.decode("latin-1").rstrip("\r\n")
            if not text:
                break
            name, sep, value = text.partition(":")
            if not sep or not name.strip():
                raise PlainHttpError("RemoteProtocolError", f"bad header line {text[:80]!r}")
            key, value = name.strip().lower(), value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        status = int(fields[1])
        if status >= 200 or status == 101:
            return status, headers


async def _body(
    reader: asyncio.StreamReader, headers: Mapping[str, str], timeout_s: float
) -> AsyncIterator[bytes]:
    raw = _raw_body(reader, headers, timeout_s)
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        async for chunk in raw:
            yield chunk
        return
    if encoding not in ("gzip", "deflate"):
        raise PlainHttpError("DecodingError", f"unsupported content encoding {encoding!r}")
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by its header
    try:
        async for chunk in raw:
            # At most _READ bytes out per step: a small compressed chunk may inflate to
            # a thousand times its size, and is never inflated whole.
            while chunk:
                out = inflate.decompress(chunk, _READ)
                chunk = inflate.unconsumed_tail
                if out:
                    yield out
        out = inflate.flush()
    except zlib.error as exc:
        raise PlainHttpError("DecodingError", str(exc)) from None
    if out:
        yield out


async def _raw_body(
    reader: asyncio.StreamReader, headers: Mapping[str, str], timeout_s: float
) -> AsyncIterator[bytes]:
    """The body as sent: chunked, of a stated length, or up to the end of the
    connection."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await _read(reader, timeout_s, "a chunk size", line=True, cut=_CUT_CHUNKED)
            size_text = size_line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise PlainHttpError(
                    "RemoteProtocolError", f"bad chunk size {size_text[:40]!r}"
                ) from None
            if size == 0:
                while (
                    await _read(reader, timeout_s, "the trailer", line=True, cut=_CUT_CHUNKED)
                ).strip():
                    pass
                return
            # In pieces: a chunk may claim any size, and is never held whole.
            while size > 0:
                piece = min(size, _READ)
                yield await _read(reader, timeout_s, "a chunk", exactly=piece, cut=_CUT_CHUNKED)
                size -= piece
            if (await _read(reader, timeout_s, "a chunk", line=True, cut=_CUT_CHUNKED)).strip():
                raise PlainHttpError("RemoteProtocolError", "a chunk longer than its size")
    length = headers.get("content-length")
    if length is not None:
        if not length.strip().isdigit():
            raise PlainHttpError("RemoteProtocolError", f"bad content length {length[:40]!r}")
        expected = left = int(length)
        while left > 0:
            chunk = await _read(reader, timeout_s, "the body")
            if not chunk:
                raise PlainHttpError(
                    "RemoteProtocolError",
                    f"{_CUT} (received {expected - left} bytes, expected {expected})",
                )
            chunk = chunk[:left]  # (the connection closes with the reply: nothing follows)
            left -= len(chunk)
            yield chunk
        return
    while chunk := await _read(reader, timeout_s, "the body"):
        yield chunk
