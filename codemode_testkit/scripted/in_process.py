"""The scripted model as an httpx transport: a provider (and the loop above it) talks to
the script in-process, with no socket, and sees what it would see over HTTP — the
same status codes, headers and event bytes, a cut stream as the same
``RemoteProtocolError``, a hang past the client's read timeout as ``ReadTimeout``.

    model = ScriptedModel([{"text": "hi"}])
    info = ProviderInfo(name="scripted", base_url=IN_PROCESS_BASE_URL, wire_api="chat")
    provider = open_provider(info, http_transport=ScriptedTransport(model))

The real HTTP server (``http_server``) stays the default for integration tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from codemode_testkit.scripted.script import JsonAnswer, ScriptedModel, StreamAnswer, sse_frame

# Any URL does: the transport answers whatever host it is asked; this one names itself.
IN_PROCESS_BASE_URL = "http://scripted.in-process/v1"

# What httpx raises over HTTP when the server drops a chunked body half-way.
_CUT = "peer closed connection without sending complete message body (incomplete chunked read)"


class ScriptedTransport(httpx.AsyncBaseTransport):
    """Answers each request from ``model`` (a ``ScriptedModel``, or a running
    ``ScriptedModelServer`` to share its script and request log)."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = await request.aread()
        headers = {k.lower(): v for k, v in request.headers.items()}
        target = request.url.raw_path.decode("ascii")
        # A callable script may block (a test waiting on its own events), as it may on
        # the server's handler threads: not on the event loop.
        answer = await asyncio.to_thread(self.model.answer, request.method, target, headers, raw)
        read_timeout = _read_timeout(request)
        if answer.hang_s:
            await _wait(answer.hang_s, read_timeout, request)
        if isinstance(answer, JsonAnswer):
            import json

            return httpx.Response(
                answer.status,
                headers={"content-type": "application/json", **answer.headers},
                content=json.dumps(answer.body).encode(),
                request=request,
            )
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream; charset=utf-8",
                     "cache-control": "no-cache", "transfer-encoding": "chunked"},
            stream=_EventStream(answer, read_timeout, request),
            request=request,
        )


class _EventStream(httpx.AsyncByteStream):
    def __init__(self, answer: StreamAnswer, read_timeout: float | None,
                 request: httpx.Request) -> None:
        self._answer = answer
        self._read_timeout = read_timeout
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        answer = self._answer
        for n, event in enumerate(answer.events):
            if answer.cut is not None and n >= answer.cut:
                raise httpx.RemoteProtocolError(_CUT, request=self._request)
            if answer.end is not None and n >= answer.end:
                break
            if n and answer.chunk_delay_s:
                await _wait(answer.chunk_delay_s, self._read_timeout, self._request)
            yield sse_frame(event)


def _read_timeout(request: httpx.Request) -> float | None:
    timeouts = request.extensions.get("timeout") or {}
    value = timeouts.get("read")
    return float(value) if value is not None else None


async def _wait(seconds: float, read_timeout: float | None, request: httpx.Request) -> None:
    """Sleep as the server would; past the client's read timeout, time out as the
    network layer would."""
    if read_timeout is not None and seconds > read_timeout:
        await asyncio.sleep(read_timeout)
        raise httpx.ReadTimeout("timed out", request=request)
    await asyncio.sleep(seconds)
