"""One configured MCP server's connection: started on first need, restarted once
after a failure (``codemode.mcp.client.McpManager`` runs it on its own loop).

Failure policy: a crash (the connection closes) or a tool call that runs past
``tool_timeout_s`` fails that call with a ToolError the program can catch and stops the
server; the next call starts it again (a server that exited between calls is restarted
before the next call, which then goes through). If the restarted server fails again
before any call has succeeded, it stays down for the rest of the session, so a server
that crashes on every call cannot loop. A server that fails to start is down too.
Stderr of stdio servers goes to ``LOG_DIR/mcp-NAME.log``, never to the terminal.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from codemode.config import ConfigError
from codemode.mcp.config import McpServerConfig
from codemode.tools.context import ToolError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult
    from mcp.types import Tool as McpToolSpec

State = Literal["not started", "starting", "ready", "crashed", "failed", "disabled"]
_CONNECTION_CLOSED = -32000
_TAIL_LINES = 3


class McpServerError(ToolError):
    """A server that could not start, crashed, or timed out; the message says which."""


@dataclass
class ServerStatus:
    """What ``interpreter mcp list`` shows for one server."""

    name: str
    transport: str
    state: State
    tools: list[McpToolSpec] = field(default_factory=list)
    error: str | None = None
    log: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "error": self.error,
            "log": str(self.log) if self.log else None,
            "tools": [{"name": t.name, "description": t.description or ""} for t in self.tools],
        }


class ServerConnection:
    """One server's connection; used only on the manager's loop."""

    def __init__(self, name: str, config: McpServerConfig, log_dir: Path) -> None:
        self.name = name
        self.config = config
        self.log_path = log_dir / f"mcp-{name}.log" if config.command is not None else None
        self.state: State = "not started" if config.enabled else "disabled"
        self.error: str | None = None
        self.tools: list[McpToolSpec] = []
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        # Bumped at every start, so that concurrent calls failing together count once.
        self._generation = 0
        self._restarted = False  # restarted, and no call has succeeded since
        self._stopping: set[asyncio.Task[None]] = set()  # old connections shutting down
        self._log_offset = 0

    # --- starting and stopping ------------------------------------------------------

    async def ensure(self) -> Client:
        """The live client, starting (or restarting) the server when needed."""
        if self.state == "ready" and self._client is not None and not self._lost():
            return self._client
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.state == "ready" and self._lost():
                # It exited between calls: restart it now rather than fail a call that
                # had nothing to do with it (this counts as its one restart).
                self._retire(f"exited between calls{self._stderr_tail()}")
            if self.state == "ready" and self._client is not None:
                return self._client
            if self.state == "disabled":
                raise McpServerError(f"mcp server {self.name} is disabled in the configuration")
            if self.state == "failed":
                raise McpServerError(f"mcp server {self.name} is down: {self.error}")
            if self.state == "crashed":
                self._restarted = True
            await self._start()
            assert self._client is not None
            return self._client

    async def _start(self) -> None:
        self.state = "starting"
        self._generation += 1
        self._stop = asyncio.Event()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        # Its exception may arrive after we stopped waiting (a startup timeout): mark it
        # seen, or asyncio would print "exception was never retrieved" on the terminal.
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._task = asyncio.create_task(self._run(ready, self._stop))
        timeout = self.config.startup_timeout_s
        try:
            async with asyncio.timeout(timeout):
                client = await asyncio.shield(ready)
        except TimeoutError:
            await self._halt(cancel=True)
            self._fail(f"did not start within {timeout:g} s (startup_timeout_s)")
        except Exception as exc:
            await self._halt(cancel=True)
            self._fail(f"could not start: {_describe(exc)}")
        self._client = client
        self.state = "ready"
        self.error = None

    def _fail(self, why: str) -> None:
        self.state = "failed"
        self.error = why + self._stderr_tail()
        raise McpServerError(f"mcp server {self.name} {self.error}")

    async def _run(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Own the connection for its whole life: the SDK wants one task to open and close it."""
        try:
            from mcp import Client  # lazy: the mcp SDK is heavy; loaded when a server starts

            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = await stack.enter_async_context(Client(transport))
                self.tools = await _list_all(client)
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            if not ready.done():
                ready.set_exception(RuntimeError("the connection closed during startup"))

    async def _transport(self, stack: AsyncExitStack) -> Any:
        config = self.config
        if config.url is not None:
            # lazy: the mcp SDK is heavy; loaded when a server starts
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            headers = config.http_headers()
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            return streamable_http_client(config.url, http_client=http)
        # lazy: the mcp SDK is heavy; loaded when a server starts
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert self.log_path is not None and config.command is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = stack.enter_context(self.log_path.open("a", encoding="utf-8"))
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        command = " ".join([config.command, *config.args])
        log.write(f"--- {stamp} codemode pid {os.getpid()} starting: {command}\n")
        log.flush()
        self._log_offset = log.tell()
        # The SDK starts it; the launcher checks it first: its program and every file
        # its arguments name must lie outside the folders commands could have written
        # (a ./node_modules/.bin on PATH does not choose what "npx" is, a server.js a
        # command rewrote does not run).
        from codemode.locations import launcher

        argv = launcher.resolve([config.command, *config.args], cwd=config.cwd)
        params = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            env=launcher.safe_env(config.env) if config.env else None,
            cwd=config.cwd,
        )
        return stdio_client(params, errlog=log)

    async def _halt(self, *, cancel: bool = False) -> None:
        """Stop the connection (and its process) and forget it."""
        self._client = None
        task, self._task = self._task, None
        if self._stop is not None:
            self._stop.set()
        if task is not None and cancel:
            task.cancel()
        if task is not None and not task.done():
            # The SDK's shutdown closes stdin, then terminates and kills the process
            # tree within a few seconds; wait that long, not forever.
            _done, pending = await asyncio.wait({task}, timeout=10)
            for hung in pending:
                hung.cancel()

    async def stop(self) -> None:
        await self._halt()
        if self._stopping:
            await asyncio.wait(self._stopping, timeout=10)
        if self.state in ("ready", "starting"):
            self.state = "not started"

    def _stderr_tail(self) -> str:
        if self.log_path is None:
            return ""
        try:
            with self.log_path.open("r", encoding="utf-8", errors="replace") as f:
                f.seek(self._log_offset)
                lines = [ln.rstrip() for ln in f.read().splitlines() if ln.strip()]
        except OSError:
            return ""
        if not lines:
            return ""
        tail = " | ".join(lines[-_TAIL_LINES:])
        return f" (stderr: {tail[-400:]})"

    # --- calls ----------------------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any]) -> CallToolResult:
        # lazy: the mcp SDK is heavy; loaded when a server starts
        from mcp.shared.exceptions import MCPError

        client = await self.ensure()
        generation = self._generation
        timeout = self.config.tool_timeout_s
        try:
            async with asyncio.timeout(timeout):
                result = await client.call_tool(tool, args)
        except TimeoutError:
            why = f"timed out after {timeout:g} s (tool_timeout_s) calling {tool}"
            raise McpServerError(await self._broken(generation, why, tail=False)) from None
        except MCPError as exc:
            if exc.code == _CONNECTION_CLOSED or self._task is None or self._task.done():
                why = f"crashed during a call to {tool}"
                raise McpServerError(await self._broken(generation, why)) from None
            raise ToolError(f"mcp server {self.name}: {tool}: {exc.message}") from None
        self._restarted = False
        return result

    async def _broken(self, generation: int, why: str, *, tail: bool = True) -> str:
        """Stop a server that crashed or hung; the message for the failed call."""
        if generation == self._generation and self.state == "ready":
            self._retire(why + (self._stderr_tail() if tail else ""))
        if self.state == "failed":
            return f"mcp server {self.name} {self.error}"
        return f"mcp server {self.name} {self.error}; it will be restarted on the next call"

    def _retire(self, why: str) -> None:
        """Mark a broken connection crashed (or failed, if it was already restarted) and
        shut it down in the background: a hung server takes the SDK a few seconds to
        kill, and the failed call should not wait for that."""
        self._client = None
        task, self._task = self._task, None
        if self._stop is not None:
            self._stop.set()
        if task is not None:
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        if self._restarted:
            self.state = "failed"
            self.error = f"{why}, again after a restart; not restarting it"
        else:
            self.state = "crashed"
            self.error = why

    def _lost(self) -> bool:
        """Whether the connection closed under us while no call was running.

        Reads the SDK dispatcher's private flag; if a later SDK drops it, an idle death
        is found by the next call instead (that call then fails and the server restarts).
        """
        if self._task is not None and self._task.done():
            return True
        session = getattr(self._client, "_session", None)
        dispatcher = getattr(session, "_dispatcher", None)
        return bool(getattr(dispatcher, "_closed", False))

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.name,
            transport=self.config.transport,
            state=self.state,
            tools=list(self.tools),
            error=self.error,
            log=self.log_path,
        )


async def _list_all(client: Client) -> list[McpToolSpec]:
    tools: list[McpToolSpec] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is not our problem to follow
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"command not found: {exc.filename}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, ToolError | ConfigError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
