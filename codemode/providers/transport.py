"""One POST to a model service, streamed as server-sent events (or, to learn why a
stream closed empty, as plain JSON), with every failure turned into a
``ProviderError``. The wire modules build bodies and read events; this module owns
httpx, timeouts, authentication headers and the HTTP error mapping.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import ssl  # asyncio has imported it already
import threading
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Literal

from codemode.providers.base import BadRequestError, ProviderError, TransientError
from codemode.providers.errors import ErrorContext, classify, parse_body

if TYPE_CHECKING:
    import httpx

AuthStyle = Literal["bearer", "x-api-key"]


@dataclass
class SseEvent:
    event: str
    data: str


class Transport:
    """An httpx client for one provider, opened on first use and reopened if the
    event loop changed (a client's pooled connections belong to one loop).

    ``http_transport`` replaces httpx's network transport under the client (tests
    answer in-process with ``codemode_testkit.scripted.in_process``); the default
    is httpx's own, over sockets."""

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: str | None,
        env_key: str | None,
        headers: Mapping[str, str] | None = None,
        query_params: Mapping[str, str] | None = None,
        auth_style: AuthStyle = "bearer",
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.env_key = env_key
        self._headers = {"User-Agent": _user_agent(), **(headers or {})}
        # Added to every request URL (merged with any query the base URL has).
        self._params = dict(query_params or {})
        if api_key:
            if auth_style == "bearer":
                self._headers.setdefault("Authorization", f"Bearer {api_key}")
            else:
                self._headers.setdefault("x-api-key", api_key)
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._http_transport = http_transport
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._verify: ssl.SSLContext | bool | None = None  # made ahead (``prepare``)
        self._lock = threading.Lock()  # ``prepare``'s thread and the loop's

    def context(self, model: str) -> ErrorContext:
        return ErrorContext(self.provider, model, self.env_key, self.base_url)

    def prepare(self) -> None:
        """Make, on any thread, what the first request needs: httpx imported (~0.3 s of
        a process started cold, as is the event-loop backend httpcore loads at the first
        request's first lock), and the client, with its TLS context (httpx's default
        for a TLS service: its CA bundle loaded). An interactive session does this while
        its user types. A failure here is left for the first request to meet again."""
        try:
            import httpx
            import httpx_sse  # noqa: F401  (imported for the first stream)

            importlib.import_module("anyio._backends._asyncio")  # httpcore's, on first use
            verify = _tls_verify(self.base_url)
            # What httpx makes of ``verify=True`` for each client it opens.
            self._verify = httpx.create_ssl_context() if verify is True else verify
            client = self._new_client(httpx)
        except Exception:  # (a CA bundle that cannot be read, say)
            return
        with self._lock:
            if self._client is None:  # (else a request made its own meanwhile)
                # No connection yet, so no event loop's: the first to use it takes it.
                self._client, self._loop = client, None

    def _new_client(self, httpx: Any) -> Any:
        verify = self._verify
        return httpx.AsyncClient(
            timeout=httpx.Timeout(self._timeout_s, connect=self._connect_timeout_s),
            headers=self._headers,
            transport=self._http_transport,
            verify=_tls_verify(self.base_url) if verify is None else verify,
        )

    def _http(self) -> Any:
        import httpx  # lazy: httpx loads with the first request

        loop = asyncio.get_running_loop()
        with self._lock:
            if self._client is not None and self._loop is None:
                self._loop = loop  # made ahead (``prepare``), never used
            elif self._client is None or self._loop is not loop:
                self._client, self._loop = self._new_client(httpx), loop
            return self._client

    async def events(
        self, path: str, body: dict[str, Any], *, model: str
    ) -> AsyncGenerator[SseEvent, None]:
        """POST ``body`` to ``base_url + path`` and yield its server-sent events."""
        import httpx  # lazy: httpx loads with the first request
        import httpx_sse  # lazy: httpx loads with the first request

        url = f"{self.base_url}/{path.lstrip('/')}"
        ctx = self.context(model)
        try:
            async with self._http().stream(
                "POST", url, json=body, headers={"Accept": "text/event-stream"},
                params=self._params or None,
            ) as response:
                await self._expect_stream(ctx, url, response)
                async for sse in httpx_sse.EventSource(response).aiter_sse():
                    yield SseEvent(sse.event, sse.data)
        except ProviderError:
            raise
        except httpx.TimeoutException as exc:
            raise TransientError(
                f"{self.provider}: request to {url} timed out ({type(exc).__name__})"
            ) from exc
        except (httpx.TransportError, httpx_sse.SSEError) as exc:
            raise TransientError(
                f"{self.provider}: connection to {url} failed: {type(exc).__name__}: {exc}"
            ) from exc

    async def _expect_stream(self, ctx: ErrorContext, url: str, response: Any) -> None:
        """Raise what an error status, or a reply that is not an event stream, means."""
        if response.status_code >= 300:
            text = (await response.aread()).decode("utf-8", "replace")
            raise classify(ctx, status=response.status_code, payload=parse_body(text),
                           headers=response.headers)  # fmt: skip
        ctype = response.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            text = (await response.aread()).decode("utf-8", "replace")
            payload = parse_body(text)
            if isinstance(payload, dict) and "error" in payload:
                raise classify(ctx, status=None, payload=payload, headers=response.headers)
            raise BadRequestError(
                f"{self.provider}: expected an event stream from {url}, got "
                f"{ctype or 'no content type'}: {text[:300]}"
            )

    async def post_json(self, path: str, body: dict[str, Any], *, model: str) -> dict[str, Any]:
        """POST ``body`` and return the JSON object of a successful, non-streamed reply."""
        import httpx  # lazy: httpx loads with the first request

        url = f"{self.base_url}/{path.lstrip('/')}"
        ctx = self.context(model)
        try:
            # A connection of its own: the pooled one may be the stream the server just
            # dropped, and a reused dead connection reads as a failure of this request.
            async with httpx.AsyncClient(
                timeout=httpx.Timeout(self._timeout_s, connect=self._connect_timeout_s),
                headers=self._headers,
                transport=self._http_transport,
                verify=_tls_verify(self.base_url),
            ) as client:
                response = await client.post(url, json=body)
        except httpx.TimeoutException as exc:
            raise TransientError(
                f"{self.provider}: request to {url} timed out ({type(exc).__name__})"
            ) from exc
        except httpx.TransportError as exc:
            raise TransientError(
                f"{self.provider}: connection to {url} failed: {type(exc).__name__}: {exc}"
            ) from exc
        payload = parse_body(response.text)
        if response.status_code >= 300:
            raise classify(ctx, status=response.status_code, payload=payload,
                           headers=response.headers)
        if not isinstance(payload, dict):
            raise TransientError(f"{self.provider}: unreadable reply from {url}: "
                                 f"{response.text[:300]!r}")
        if payload.get("error"):
            raise classify(ctx, status=None, payload=payload, headers=response.headers)
        return payload

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.aclose()
            except RuntimeError:
                pass  # its event loop is gone; the sockets went with it


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def _proxied() -> bool:
    return any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARIABLES)


def _tls_verify(base_url: str) -> ssl.SSLContext | bool:
    """The client's ``verify``: httpx's default (True: its CA bundle), except for a
    plain ``http://`` service reached without a proxy (a local model, the scripted
    test server).

    httpx builds its TLS context when the client is made, loading the whole CA bundle
    (~18 ms of CPU, a tenth of an `exec` start) even when no request will use TLS. A
    client whose every URL is ``base_url + path`` with an ``http://`` base, and that
    takes no proxy from the environment, never opens a TLS connection: it gets a
    context that loads no certificates and still verifies, so a TLS connection it
    somehow made anyway would fail closed rather than go unverified.
    """
    if not base_url.lower().startswith("http://"):
        return True
    if _proxied():
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _user_agent() -> str:
    try:
        return f"codemode/{version('codemode')}"
    except PackageNotFoundError:
        return "codemode"


def stream_cut(provider: str, terminal: str) -> TransientError:
    return TransientError(f"{provider}: the stream ended before {terminal}")


def loads_event(provider: str, data: str) -> Any:
    """An event's JSON data; a garbled event is a transient fault (the stream got cut)."""
    try:
        return json.loads(data)
    except ValueError as exc:
        raise TransientError(f"{provider}: unreadable stream event: {data[:200]!r}") from exc
