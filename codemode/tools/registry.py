"""The registry: which tools a session has, and the one path every call goes through."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

# Re-exported: the names of namespaced (MCP) tools, spelled in the leaf module.
from codemode.tool_terms.names import NAMESPACE_PREFIX as NAMESPACE_PREFIX
from codemode.tool_terms.names import code_name as code_name
from codemode.tool_terms.names import split_namespace as split_namespace
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.pipeline import (
    Applies,
    Call,
    Interceptor,
    Pipeline,
    Stage,
    acts_on_trust,
    authorize_by_trust,
    new_call,
)

if TYPE_CHECKING:
    from codemode.tools.base import Tool

# A function (plain or async) a decorator registers as a tool (and hands back unchanged).
ToolFn = TypeVar("ToolFn", bound=Callable[..., object])


def _for_call(ctx: ToolContext, name: str, program: str | None) -> ToolContext:
    """``dataclasses.replace(ctx, tool_name=name, program=program)``, a third of its
    cost (it runs on every call): a shallow copy of a plain dataclass's fields."""
    made = object.__new__(ToolContext)
    made.__dict__.update(ctx.__dict__)
    made.tool_name, made.program = name, program
    return made


def standard_pipeline() -> Pipeline:
    """What every registry starts with: the trust policy and the shell's patch route."""
    from codemode.tools.patch.intercept import intercept_shell_patch, takes_a_command

    pipeline = Pipeline()
    # Each acts on some tools' calls only: the others' calls skip it (a no-op tool's
    # call meets neither).
    pipeline.use(authorize_by_trust, "policy", applies=acts_on_trust)
    pipeline.use(intercept_shell_patch, "route", applies=takes_a_command)
    return pipeline


class ToolRegistry:
    """An ordered set of tools with a single ``invoke`` path.

    Every surface (code mode, classic function calls, MCP) calls ``invoke``, which runs
    the call through the registry's interceptors (``codemode.tools.pipeline``: policy
    and approval, dry runs, reporting...). Whatever a tool starts goes through
    ``ToolContext.sandbox`` (policy check, approval, confinement) and is attributed to
    the tool named here, so no surface is a side door.
    """

    def __init__(
        self, tools: Iterable[Tool] = (), *, interceptors: Iterable[Interceptor] = ()
    ) -> None:
        # A value is a Tool, or "module:ATTRIBUTE" naming one not imported yet: a
        # program that calls two tools should not load (and build models for) six.
        self._tools: dict[str, Tool | str] = {}
        # Called by close(): resources behind some tools (MCP server connections).
        self._closers: list[Callable[[], None]] = []
        self.pipeline: Pipeline = standard_pipeline()
        # The last step, one bound method: the key of every composed chain.
        self._last = self._run_tool
        for t in tools:
            self.add(t)
        for interceptor in interceptors:
            self.pipeline.use(interceptor)

    def use(
        self,
        interceptor: Interceptor,
        stage: Stage = "embedder",
        *,
        applies: Applies | None = None,
    ) -> None:
        """Run ``interceptor`` on every call (see ``codemode.tools.pipeline`` for the
        stages: an embedder's sees only calls the policy let through), or only on the
        calls of the tools ``applies`` says it acts on (``Pipeline.use``)."""
        self.pipeline.use(interceptor, stage, applies=applies)

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

    @overload
    def tool(
        self, fn: ToolFn, *, name: str | None = None, description: str | None = None
    ) -> ToolFn: ...

    @overload
    def tool(
        self, fn: None = None, *, name: str | None = None, description: str | None = None
    ) -> Callable[[ToolFn], ToolFn]: ...

    def tool(
        self,
        fn: ToolFn | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> ToolFn | Callable[[ToolFn], ToolFn]:
        """Decorator registering a plain or async function as a tool (see ``define_tool``)."""

        from codemode.tools.base import define_tool

        def register(f: ToolFn) -> ToolFn:
            self.add(define_tool(f, name=name, description=description))
            return f

        return register(fn) if fn is not None else register

    def copy(self) -> ToolRegistry:
        clone = ToolRegistry()
        clone._tools = dict(self._tools)
        clone._closers = list(self._closers)
        clone.pipeline = self.pipeline.copy()
        return clone

    def get(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        if isinstance(tool, str):
            module, _, attribute = tool.partition(":")
            tool = self._tools[name] = getattr(importlib.import_module(module), attribute)
        return tool

    def names(self) -> list[str]:
        return list(self._tools)

    def lazy_specs(self) -> dict[str, str] | None:
        """``{name: "module:attribute"}`` while no tool has been loaded or added as an
        object (what ``declarations_cache`` keys on), else None."""
        specs = {n: t for n, t in self._tools.items() if isinstance(t, str)}
        return specs if len(specs) == len(self._tools) else None

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

    async def invoke(
        self,
        name: str,
        raw_args: object,
        ctx: ToolContext,
        *,
        parent_id: str | None = None,
        program: str | None = None,
        around: Sequence[Interceptor] = (),
    ) -> Any:
        """Validate and run one call through the interceptors (``around`` first: the
        caller's own report-stage ones); every failure becomes a ToolError with a clean
        message. ``program`` (default: the one ``ctx`` was made for, a call made by a
        tool) is the code-mode program making the call, ``parent_id`` its item."""
        tool = self.get(name)
        call = new_call(
            name, tool, raw_args, ctx, parent_id, program if program is not None else ctx.program
        )
        try:
            return await self.pipeline.composed(tool, self._last, around)(call)
        except ToolError:
            raise
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            raise ToolError(f"tools.{name}: {exc.strerror or exc}{where}") from None
        except Exception as exc:
            raise ToolError(f"tools.{name} failed: {type(exc).__name__}: {exc}") from None

    def _run_tool(self, call: Call) -> Awaitable[Any]:
        """The last step: the handler, with a context that says which tool and program
        the call is (a command it starts is decided and asked about under that name).
        The tool's own coroutine, not one awaiting it: one frame fewer per call."""
        if call.tool is None:
            return self._not_a_tool(call.name)
        ctx = call.ctx
        if ctx.tool_name != call.name or ctx.program != call.program:
            ctx = _for_call(ctx, call.name, call.program)
        return call.tool.call(call.args, ctx)

    async def _not_a_tool(self, name: str) -> Any:
        hint = self.closest(name)
        suffix = f" — did you mean tools.{hint}?" if hint else ""
        raise ToolError(f"tools.{name} is not a tool{suffix}")
