"""Running configured MCP servers: started on first need, restarted once after a failure.

Every connection lives on one private event loop in a background thread, whatever
loop (or none) the caller runs: the SDK's client keeps task groups that must be entered
and left in the task that opened them, and the agent, ``interpreter mcp list`` and our
own MCP server each run on a different loop. A call hops threads once (microseconds,
next to a JSON-RPC round trip).

Each server's connection and its failure policy (restarted once, then down for the
session) are ``codemode.mcp.connection``'s.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from codemode.mcp.config import McpServerConfig
from codemode.mcp.connection import ServerConnection, ServerStatus
from codemode.tools.context import ToolError

if TYPE_CHECKING:
    from mcp.types import CallToolResult

T = TypeVar("T")


# The SDK logs a dying server's broken pipe as an error. With no logging configured,
# Python would print that on the user's terminal; this handler keeps it off (records
# still reach handlers an application configured, as in `interpreter mcp-server`).
logging.getLogger("mcp").addHandler(logging.NullHandler())

_live: weakref.WeakSet[McpManager] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for manager in list(_live):
        manager.close()


class McpManager:
    """The configured servers of one session (or one ``interpreter`` command).

    Safe to use from any thread or event loop: the work runs on the manager's own loop.
    """

    def __init__(self, servers: dict[str, McpServerConfig], log_dir: Path) -> None:
        self.servers = {name: ServerConnection(name, cfg, log_dir) for name, cfg in servers.items()}
        # Registry names of tools whose server marks them readOnlyHint (for approval).
        self.read_only_tools: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    # --- the private loop -----------------------------------------------------------

    def _submit(self, coro: Coroutine[object, object, T]) -> concurrent.futures.Future[T]:
        with self._guard:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="codemode-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                _live.add(self)
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _on_loop(self, coro: Coroutine[object, object, T]) -> T:
        return await asyncio.wrap_future(self._submit(coro))

    # --- public API -----------------------------------------------------------------

    def server(self, name: str) -> ServerConnection:
        try:
            return self.servers[name]
        except KeyError:
            raise ToolError(f"no mcp server named {name!r}") from None

    async def call(self, server: str, tool: str, args: dict[str, Any]) -> CallToolResult:
        """Call ``tool`` on ``server`` (starting it if needed); raises ToolError on failure."""
        return await self._on_loop(self.server(server).call(tool, args))

    def start_all(self) -> list[ServerStatus]:
        """Start every enabled server (concurrently) and report each; blocks the caller."""

        async def start(s: ServerConnection) -> None:
            try:
                await s.ensure()
            except ToolError:
                pass  # recorded in the server's state

        async def everything() -> list[ServerStatus]:
            await asyncio.gather(*(start(s) for s in self.servers.values() if s.config.enabled))
            return [s.status() for s in self.servers.values()]

        if not self.servers:
            return []
        return self._submit(everything()).result()

    def statuses(self) -> list[ServerStatus]:
        """The servers as they stand, starting nothing."""
        return [s.status() for s in self.servers.values()]

    def close(self) -> None:
        """Stop every server and the private loop."""
        with self._guard:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def stop_all() -> None:
            await asyncio.gather(*(s.stop() for s in self.servers.values()))

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(timeout=15)
        except (concurrent.futures.TimeoutError, Exception):
            pass  # the processes die with us; the SDK kills their trees on exit anyway
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()
