"""The registry: which tools a session has, and the one path every call goes through."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from codemode.sandbox.approval_context import tool_call

# Re-exported: the names of namespaced (MCP) tools, spelled in the leaf module.
from codemode.tool_names import NAMESPACE_PREFIX as NAMESPACE_PREFIX
from codemode.tool_names import code_name as code_name
from codemode.tool_names import split_namespace as split_namespace
from codemode.tools.context import ToolContext, ToolError

if TYPE_CHECKING:
    from codemode.tools.base import Tool


class ToolRegistry:
    """An ordered set of tools with a single ``invoke`` path.

    Every surface (code mode, classic function calls, MCP) calls ``invoke``. Whatever a
    tool starts goes through ``ToolContext.sandbox`` (policy check, approval,
    confinement) and is attributed to the tool named here, so no surface is a side door.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        # A value is a Tool, or "module:ATTRIBUTE" naming one not imported yet: a
        # program that calls two tools should not load (and build models for) six.
        self._tools: dict[str, Tool | str] = {}
        # Called by close(): resources behind some tools (MCP server connections).
        self._closers: list[Callable[[], None]] = []
        for t in tools:
            self.add(t)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the registry is closed (its tools' resources)."""
        self._closers.append(closer)

    def close(self) -> None:
        """Release what the tools hold (stops MCP servers); the registry stays usable
        for built-in tools."""
        closers, self._closers = self._closers, []
        for closer in closers:
            closer()

    def add_lazy(self, name: str, spec: str) -> None:
        """Register the Tool at ``spec`` ("package.module:ATTRIBUTE") under ``name``,
        importing it on first use."""
        self._tools[name] = spec

    def add(self, tool: Tool) -> Tool:
        """Register ``tool``, replacing any tool of the same name."""
        if not tool.name.isidentifier():
            raise ValueError(f"tool name {tool.name!r} is not a valid identifier")
        self._tools[tool.name] = tool
        return tool

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Any:
        """Decorator registering an async function as a tool (see ``define_tool``)."""

        from codemode.tools.base import define_tool

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            self.add(define_tool(f, name=name, description=description))
            return f

        return register(fn) if fn is not None else register

    def copy(self) -> ToolRegistry:
        clone = ToolRegistry()
        clone._tools = dict(self._tools)
        clone._closers = list(self._closers)
        return clone

    def get(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        if isinstance(tool, str):
            module, _, attribute = tool.partition(":")
            tool = self._tools[name] = getattr(importlib.import_module(module), attribute)
        return tool

    def names(self) -> list[str]:
        return list(self._tools)

    def flat_names(self) -> list[str]:
        """Names called as ``tools.NAME`` (everything not namespaced)."""
        return [n for n in self._tools if split_namespace(n) is None]

    def namespaces(self) -> dict[str, dict[str, str]]:
        """``{NS: {NAME: registry name}}`` for tools called as ``tools.NS.NAME``."""
        spaces: dict[str, dict[str, str]] = {}
        for full in self._tools:
            parts = split_namespace(full)
            if parts is not None:
                spaces.setdefault(parts[0], {})[parts[1]] = full
        return spaces

    def __iter__(self) -> Iterator[Tool]:
        return iter([self.get(name) for name in self._tools])  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self._tools)

    def closest(self, name: str) -> str | None:
        """The registered name nearest to a misspelt one, if any is close."""
        match = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.5)
        return match[0] if match else None

    async def invoke(self, name: str, raw_args: Any, ctx: ToolContext) -> Any:
        """Validate and run one call; every failure becomes a ToolError with a clean message."""
        tool = self.get(name)
        if tool is None:
            hint = self.closest(name)
            suffix = f" — did you mean tools.{hint}?" if hint else ""
            raise ToolError(f"tools.{name} is not a tool{suffix}")
        try:
            with tool_call(name):
                if tool.trust != "host" and ctx.sandbox is not None:
                    # A tool outside this process (an MCP server's): the session's mode
                    # and approval policy decide, as for a command.
                    from codemode.sandbox.tool_trust import authorize_tool

                    await authorize_tool(ctx.sandbox, name, tool.trust, raw_args)
                return await tool.call(raw_args, ctx)
        except ToolError:
            raise
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            raise ToolError(f"tools.{name}: {exc.strerror or exc}{where}") from None
        except Exception as exc:
            raise ToolError(f"tools.{name} failed: {type(exc).__name__}: {exc}") from None
