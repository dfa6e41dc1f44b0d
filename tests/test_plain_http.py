"""The plain-HTTP path of the provider transport (``providers.plain_http``, used for an
``http://`` model service without a proxy), against raw servers on 127.0.0.1 that send
exactly the bytes each test writes: framings, encodings, broken replies, and that httpx
is not loaded for it. The wires themselves are tested through it in test_providers.py."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from codemode.providers import plain_http, sse
from codemode.providers.base import TransientError
from codemode.providers.transport import Transport

Reply = Callable[[bytes], bytes]  # the request's bytes -> the reply's bytes


@asynccontextmanager
async def raw_server(reply: Reply, *, close: bool = True) -> AsyncIterator[str]:
    """A server answering each request with ``reply(request)``; its base URL."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length:")), 0,
        )  # fmt: skip
        request = head + await reader.readexactly(length)
        seen.append(request)
        writer.write(reply(request))
        await writer.drain()
        if close:
            writer.close()
        else:
            await asyncio.sleep(5)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()


def sse_reply(body: bytes, *, headers: str = "", chunked: bool = False) -> bytes:
    if chunked:
        # in three uneven chunks, one with an extension
        parts = [body[:5], body[5:17], body[17:]]
        framed = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n" + headers.encode() + b"\r\n" + framed)
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n"
            % len(body) + headers.encode() + b"\r\n" + body)  # fmt: skip


STREAM = b'data: {"a": 1}\r\n\r\nevent: done\ndata: {"b":\ndata: 2}\n\n: a comment\r\rdata: [x]\n\n'
EXPECTED = [("message", '{"a": 1}'), ("done", '{"b":\n2}'), ("message", "[x]")]


async def collect(base_url: str, **kw: object) -> list[tuple[str, str]]:
    transport = Transport(provider="raw", base_url=base_url, api_key="sk-1", env_key=None,
                          **kw)  # type: ignore[arg-type]
    assert transport._plain
    return [(e.event, e.data) async for e in transport.events("responses", {"q": "é"},
                                                                 model="m")]


@pytest.mark.parametrize("framing", ["length", "chunked", "until-close"])
async def test_framings_give_the_same_events(framing: str) -> None:
    def reply(_: bytes) -> bytes:
        if framing == "until-close":
            return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + STREAM
        return sse_reply(STREAM, chunked=framing == "chunked")

    async with raw_server(reply) as url:
        assert await collect(url) == EXPECTED


async def test_the_request_is_a_json_post_with_headers_and_query() -> None:
    requests: list[bytes] = []

    def reply(request: bytes) -> bytes:
        requests.append(request)
        return sse_reply(b"data: 1\n\n")

    async with raw_server(reply) as url:
        transport = Transport(provider="raw", base_url=url, api_key="sk-1", env_key=None,
                              query_params={"api-version": "2", "key": "a b"})
        events = [e.data async for e in transport.events("/chat", {"q": "é"}, model="m")]
    assert events == ["1"]
    head, _, body = requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat?api-version=2&key=a+b HTTP/1.1"
    assert "Authorization: Bearer sk-1" in lines and "Accept: text/event-stream" in lines
    assert "Content-Type: application/json" in lines
    assert json.loads(body) == {"q": "é"} and body == '{"q":"é"}'.encode()


async def test_a_gzip_body_is_decoded() -> None:
    packed = gzip.compress(STREAM)
    async with raw_server(lambda _: sse_reply(packed, headers="Content-Encoding: gzip\r\n")) as url:
        assert await collect(url) == EXPECTED


async def test_an_error_status_is_classified_with_its_headers() -> None:
    body = b'{"error": {"message": "slow down"}}'
    reply = (b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Type: "
             b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    from codemode.providers.base import RateLimitError

    async with raw_server(lambda _: reply) as url:
        with pytest.raises(RateLimitError) as caught:
            await collect(url)
    assert caught.value.retry_after == 7 and "slow down" in str(caught.value)


@pytest.mark.parametrize(("reply", "words"), [
    (b"garbage\r\n\r\n", "bad status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 99\r\n\r\n"
     b"data: 1\n\n", "without sending complete message body"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
     b"\r\n\r\nzz\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nbroken header\r\n\r\n",
     "bad header line"),
])  # fmt: skip
async def test_a_broken_reply_is_a_transient_error_saying_what(reply: bytes, words: str) -> None:
    async with raw_server(lambda _: reply) as url:
        with pytest.raises(TransientError, match=words):
            await collect(url)


async def test_a_silent_server_times_out() -> None:
    async with raw_server(lambda _: b"HTTP/1.1 200 OK\r\n", close=False) as url:
        with pytest.raises(TransientError, match=r"timed out \(ReadTimeout\)"):
            await collect(url, timeout_s=0.3)


async def test_sse_lines_split_across_pieces_and_cr_lf() -> None:
    async def pieces() -> AsyncIterator[str]:
        for piece in ["da", "ta: a\r", "\ndata: b\r", "\r", "event: x\rdata:c\r\n", "\r\n"]:
            yield piece

    assert [e async for e in sse.events(pieces())] == [("message", "a\nb"), ("x", "c")]


def test_only_plain_http_without_a_proxy_applies() -> None:
    assert plain_http.applies("http://127.0.0.1:8080/v1", proxied=False)
    assert not plain_http.applies("http://127.0.0.1:8080/v1", proxied=True)
    assert not plain_http.applies("https://api.example.com/v1", proxied=False)
    assert not plain_http.applies("http://user:pw@host/v1", proxied=False)


def test_a_local_model_request_does_not_load_httpx() -> None:
    code = (
        "import asyncio, sys\n"
        "from codemode.providers.catalog import ProviderInfo, open_provider\n"
        "from codemode.providers.base import ModelRequest, UserMessage\n"
        "from codemode_testkit.scripted_server import ScriptedModelServer\n"
        "with ScriptedModelServer([{'text': 'hello'}]) as s:\n"
        "    p = open_provider(ProviderInfo(name='x', base_url=s.base_url, wire_api='chat'))\n"
        "    async def go():\n"
        "        r = ModelRequest(model='m', instructions='', messages=[UserMessage(text='hi')])\n"
        "        out = [e async for e in p.stream(r)]\n"
        "        await p.aclose()\n"
        "        return out\n"
        "    assert asyncio.run(go())\n"
        "print(sorted(m for m in ('httpx', 'httpcore', 'anyio', 'h11') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


async def _pieces(raw: bytes, headers: dict[str, str], most: int) -> list[int]:
    """The sizes ``plain_http._body`` yields for ``raw``, stopping after ``most`` pieces."""
    reader = asyncio.StreamReader()
    reader.feed_data(raw)
    reader.feed_eof()
    sizes: list[int] = []
    async for piece in plain_http._body(reader, headers, 5.0):
        sizes.append(len(piece))
        if len(sizes) >= most:
            break
    return sizes


async def test_a_huge_chunk_is_never_held_whole() -> None:
    # A chunk that claims 1 GiB (and sends 1 MiB of it) comes out as it arrives, in
    # bounded pieces, instead of being read whole into memory first.
    raw = b"40000000\r\n" + b"x" * (1 << 20)
    sizes = await _pieces(raw, {"transfer-encoding": "chunked"}, 4)
    assert len(sizes) == 4 and max(sizes) <= plain_http._READ


async def test_a_gzip_bomb_inflates_in_bounded_pieces() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # ~64 KiB that inflates to 64 MiB
    sizes = await _pieces(bomb, {"content-length": str(len(bomb)), "content-encoding": "gzip"}, 8)
    assert len(sizes) == 8 and max(sizes) <= plain_http._READ
