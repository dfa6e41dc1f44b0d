"""Our tool host served over MCP: ``execute`` runs a JavaScript program against the tools.

With a handful of tools, ``execute``'s description carries their TypeScript
declarations, brief (the types, and one sentence per tool); ``describe_tool`` gives a
tool's declaration in full, with what each field means. With more tools, it names a few
and the client discovers the rest through ``search_tools`` and ``describe_tool``
(progressive disclosure), so the description stays short however many MCP servers feed
the host.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import Field

from codemode.harnesses.render import render_exec_result
from codemode.js_runtime.models import ExecResult, Limits
from codemode.mcp.approval import Decider, approving_registry
from codemode.mcp.description import execute_description
from codemode.mcp.stdio_wire import StdioWire
from codemode.tools.context import ToolContext
from codemode.tools.doc_text import first_sentence
from codemode.tools.registry import ToolRegistry, code_name

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult

INSTRUCTIONS = "Run JavaScript programs against the host's tools with `execute`."
# "More than a handful": beyond this many tools, declarations move behind search_tools.
DISCLOSURE_THRESHOLD = 8
# An execute result is sent once, as structuredContent, with a short text beside it:
# console output and the return value are each capped at this many characters (head
# and tail kept), so a result stays well under the 1 MiB that clients accept per
# message (the official client's SSE event limit) even when every character escapes.
RESULT_FIELD_CHARS = 60_000
TEXT_PREVIEW_CHARS = 2_000
# Programs the server runs at once: each holds an engine worker process, and a client may
# send execute calls without waiting for any. One more is refused, not queued.
MAX_RUNNING = 16


def _preview(text: str) -> str:
    """The text beside structuredContent: short, and saying where the rest is."""
    if len(text) <= TEXT_PREVIEW_CHARS:
        return text
    half = TEXT_PREVIEW_CHARS // 2
    return (
        f"{text[:half]}\n[... {len(text) - 2 * half} characters; the whole result is in "
        f"structuredContent ...]\n{text[-half:]}"
    )


# The description's first sentence (search_tools's summaries).
_summary = first_sentence


class Programs(Protocol):
    """The program host ``execute`` runs its programs in (``codemode.ToolHost``, built
    by the entry point, a layer above this package)."""

    async def execute(self, code: str, *, limits: Limits | None = None) -> ExecResult: ...

    def close(self) -> None: ...


# Given the (approving) registry, the context and the limits: the program host.
ProgramsFactory = Callable[[ToolRegistry, ToolContext, Limits], Programs]


class HostService:
    """What the MCP tools do, apart from the protocol: run programs, search, describe."""

    def __init__(
        self,
        registry: ToolRegistry,
        workspace: Path,
        *,
        decide: Decider,
        limits: Limits | None = None,
        sandbox: Any = None,
        programs: ProgramsFactory | None = None,
    ) -> None:
        self.registry = registry
        self.guarded = approving_registry(registry, decide)
        # ``sandbox`` (a SandboxSession with no approver: nobody to ask) checks and
        # confines the commands programs run, as in any other session.
        self.context = ToolContext(workspace=workspace.resolve(), sandbox=sandbox)
        limits = limits or Limits()
        if limits.output_chars > RESULT_FIELD_CHARS:
            limits = dataclasses.replace(limits, output_chars=RESULT_FIELD_CHARS)
        self.limits = limits
        self.running = 0
        # The programs run in one program host (not persistent: concurrent execute
        # calls run in workers of their own, each program in a fresh isolate; sequential
        # ones reuse a warm worker), each program's calls with its provenance (source,
        # cell) for approvals and hooks, as from every other entry point.
        self.programs = programs(self.guarded, self.context, limits) if programs else None

    @property
    def progressive(self) -> bool:
        return len(self.registry) > DISCLOSURE_THRESHOLD

    def execute_description(self) -> str:
        return execute_description(
            self.registry, self.context.workspace, progressive=self.progressive, brief=True
        )

    async def execute(self, code: str, timeout_ms: int | None = None) -> CallToolResult:
        """Run ``code``; ``timeout_ms`` shortens this call's time limit (never beyond the
        server's own, ``self.limits.timeout_s``)."""
        # lazy: the mcp SDK is heavy; loaded when the server is built
        from mcp.types import CallToolResult, TextContent

        if self.running >= MAX_RUNNING:
            said = (
                f"not run: {self.running} programs are running at once, the server's limit "
                f"({MAX_RUNNING}); send this again once one has finished"
            )
            return CallToolResult(
                content=[TextContent(type="text", text=said)],
                structured_content={
                    "ok": False,
                    "value": None,
                    "output": "",
                    "error": said,
                    "tool_calls": 0,
                },
                is_error=True,
            )
        limits = None
        if timeout_ms is not None:
            limits = dataclasses.replace(
                self.limits, timeout_s=min(timeout_ms / 1000, self.limits.timeout_s)
            )
        if self.programs is None:
            raise RuntimeError("this HostService was built without a program host")
        self.running += 1
        try:
            result = await self.programs.execute(code, limits=limits)
        finally:
            self.running -= 1
        structured = {
            "ok": result.ok,
            "value": result.value,
            "output": result.output,
            "error": result.error.one_line() if result.error else None,
            "tool_calls": len(result.tool_calls),
        }
        if result.value_truncated:
            structured["value_truncated"] = True
        if result.output_truncated:
            structured["output_truncated"] = True
        return CallToolResult(
            content=[TextContent(type="text", text=_preview(render_exec_result(result, code)))],
            structured_content=structured,
            is_error=not result.ok,
        )

    def close(self) -> None:
        if self.programs is not None:
            self.programs.close()

    def search(self, query: str, limit: int) -> list[dict[str, str]]:
        words = [w for w in re.split(r"\W+", query.lower()) if w]
        scored = []
        for index, tool in enumerate(self.registry):
            name = code_name(tool.name)
            hay = f"{name} {tool.description}".lower()
            score = sum(3 if w in name.lower() else 1 for w in words if w in hay)
            if score or not words:
                scored.append((-score, index, name, _summary(tool.description)))
        scored.sort()
        return [{"name": n, "description": d} for _, _, n, d in scored[:limit]]

    def lookup(self, name: str) -> str | None:
        """The registry name for what a client typed: ``fs.read_file``, ``tools.shell``..."""
        name = name.strip().removeprefix("tools.")
        for full in self.registry.names():
            if name in (full, code_name(full)):
                return full
        return None

    def describe(self, name: str) -> str:
        from codemode.tools.surfaces import declaration

        full = self.lookup(name)
        if full is None:
            hint = self.registry.closest(name.replace(".", "__"))
            suggestion = f" — did you mean {code_name(hint)}?" if hint else ""
            raise LookupError(f"no tool named {name!r}{suggestion}")
        tool = self.registry.get(full)
        assert tool is not None
        return declaration(tool)


def new_server() -> MCPServer:
    """The MCP server, with no tool yet (``add_tools``): what answers the handshake."""
    # lazy: the mcp SDK is heavy; loaded when the server is built
    from mcp.server.mcpserver import MCPServer

    from codemode.version import package_version

    return MCPServer("codemode", version=package_version(), instructions=INSTRUCTIONS)


def build_server(service: HostService) -> MCPServer:
    """The MCP server exposing ``service``: execute, and search_tools/describe_tool if many."""
    server = new_server()
    add_tools(server, service)
    return server


def add_tools(server: MCPServer, service: HostService) -> None:
    """Give ``server`` the tools that expose ``service``."""
    from mcp.server.mcpserver.exceptions import ToolError as McpToolError
    from mcp.types import CallToolResult

    async def execute(code: str, timeout_ms: int | None = None) -> CallToolResult:
        return await service.execute(code, timeout_ms)

    # This module postpones annotations, and the SDK reads them to build input schemas:
    # give it the objects (CallToolResult is imported here, not at module level).
    ceiling = round(service.limits.timeout_s * 1000)
    execute.__annotations__ = {
        "code": Annotated[str, Field(description="The JavaScript program to run.")],
        "timeout_ms": Annotated[
            int | None,
            Field(
                ge=1,
                description=f"Time limit for this program in milliseconds (at most, and by "
                f"default, {ceiling}): it is stopped when the time is up.",
            ),
        ],
        "return": CallToolResult,
    }
    server.add_tool(execute, name="execute", description=service.execute_description())

    def search_tools(query: str, limit: int = 20) -> dict[str, Any]:
        return {"tools": service.search(query, limit)}

    def describe_tool(name: str) -> str:
        try:
            return service.describe(name)
        except LookupError as exc:
            raise McpToolError(str(exc)) from None

    search_tools.__annotations__ = {
        "query": Annotated[
            str, Field(description="Words to look for in tool names and descriptions.")
        ],
        "limit": Annotated[int, Field(ge=1, le=100, description="Most results.")],
        "return": dict[str, Any],
    }
    describe_tool.__annotations__ = {
        "name": Annotated[str, Field(description="A tool name, such as read_file or probe.add.")],
        "return": str,
    }
    if service.progressive:
        server.add_tool(
            search_tools,
            name="search_tools",
            description="Find the host's tools by words in their names and descriptions; "
            "an empty query lists them all.",
        )
    server.add_tool(
        describe_tool,
        name="describe_tool",
        description="The TypeScript declaration of one tool: its arguments and result.",
        structured_output=False,
    )


# What is answered without the host set up: the handshake (`initialize`, or
# `server/discover`, which the official client sends first), pings, cancellations.
_BEFORE_SET_UP = frozenset({
    "initialize", "server/discover", "notifications/initialized", "ping",
    "notifications/cancelled",
})  # fmt: skip


class SetUpOnFirstUse:
    """The host behind ``server`` set up by the first request that needs it (the SDK's
    middleware), so that the handshake is answered at once: the set-up (the tools, the
    sandbox, the hooks, the configured MCP servers, each started) takes tens of
    milliseconds, and seconds where a configured server is slow to start. A failed set-up
    fails every request that needs it with its error (it is not tried again)."""

    def __init__(self, server: MCPServer, make: Callable[[], HostService]) -> None:
        self._server, self._make = server, make
        self._service: HostService | None = None
        self._failed: str | None = None

    def service(self) -> HostService:
        if self._service is None:
            if self._failed is not None:
                raise RuntimeError(self._failed)
            service = None
            try:
                service = self._make()
                add_tools(self._server, service)
            except Exception as exc:
                if service is not None:  # made, then not servable: its sandbox and servers end
                    try:
                        service.close()
                    except Exception:  # (the set-up's own error is the one said)
                        pass
                self._failed = f"the tool host could not be set up: {exc}"
                print(f"mcp-server: {self._failed}", file=sys.stderr, flush=True)
                raise RuntimeError(self._failed) from None
            self._service = service
        return self._service

    def close(self) -> None:
        if self._service is not None:
            self._service.close()

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method not in _BEFORE_SET_UP:
            try:
                self.service()  # (no await inside: one request sets it up, whole)
            except RuntimeError as exc:
                from mcp.shared.exceptions import MCPError
                from mcp.types import INTERNAL_ERROR

                raise MCPError(INTERNAL_ERROR, str(exc)) from None
        return await call_next(ctx)


def run_stdio(server: MCPServer, wire: StdioWire) -> None:
    """Serve ``server`` on the stdio ``wire`` (its loop woken by every signal: a Ctrl-C
    never waits for the client's next request, ``process/interruptible.py``)."""
    from mcp.server.stdio import stdio_server

    from codemode.process import interruptible

    async def main() -> None:
        # Duck-typed as the SDK's AsyncFile: what its transport uses of one (``async
        # for`` lines; awaited ``write`` and ``flush``), without a thread per call.
        stdin: Any = wire.reader()
        stdout: Any = wire.writer()
        async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
            lowlevel = server._lowlevel_server
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    interruptible.run(main())
