"""One tool call's path: a typed ``Call`` through an ordered list of interceptors.

Every surface (a classic function call, a code-mode program's ``tools.x(...)``, an MCP
client's call) becomes ``ToolRegistry.invoke``, which builds a ``Call`` and runs it
through the registry's ``Pipeline``: each interceptor is ``async (call, next) ->
result`` and may look at the call, refuse it (raise ``ToolError``), change it (a new
``ctx``, say) before passing it on with ``await next(call)``, or answer it without the
tool running. The last step runs the tool's handler.

Interceptors are kept by stage, and stages run in this order (within one stage, in the
order they were added):

``report``
    Whoever shows calls (the session runner): sees every call, refused ones too, so a
    program's every call is an item under its program.
``gate``
    Refusals that hold for the whole session whatever the call's arguments: a dry run
    (``codemode.tools.dry_run_gate``), ``interpreter mcp-server``'s policy for built-in
    tools (``codemode.mcp.approval``).
``hooks``
    The user's hooks (``codemode.hooks.tool_calls``): PreToolUse may refuse, ask about
    or change the call, PostToolUse sees its result; a call of a program is hooked as
    one call, with the program's provenance (``codemode.tools.provenance``).
``policy``
    The sandbox session's decision, and the user's approval, for a tool outside this
    process (an MCP server's: ``codemode.sandbox.approvals.tool_trust``). Commands are decided
    later, by the shell's own spawn (``SandboxSession.spawn``), where the command line
    is known exactly.
``embedder``
    Interceptors an embedder adds (``ToolHost(interceptors=...)``, ``registry.use``):
    they see only calls the gates and the policy let through.
``route``
    Which code answers: a shell call that only applies a patch goes to the patch
    engine (``codemode.tools.patch.intercept``); this is also the place for an
    interceptor that points file tools at an editor's buffers (``ToolContext`` fields
    are how such a choice reaches the handler).

The runtime running programs never sees the registry: their nested calls reach
``ToolRegistry.invoke`` through each program's delegate (``RegistryDelegate`` in
``codemode.host.program_delegate``, the agent runner's own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from codemode.tools.context import ToolContext

if TYPE_CHECKING:
    from codemode.tools.base import Tool


@dataclass(frozen=True)
class Call:
    """One tool call on its way through the pipeline."""

    name: str  # the registry name: "shell", "mcp__srv__echo"
    # None when no tool has that name: interceptors pass such a call on, and the last
    # step refuses it (with the nearest name), so a report still shows the attempt.
    tool: Tool | None
    args: object  # the raw JSON arguments, not validated yet
    ctx: ToolContext
    parent_id: str | None = None  # the item id of the program making the call
    program: str | None = None  # that program's source (approval requests show it)


Next = Callable[[Call], Awaitable[Any]]
Interceptor = Callable[[Call, Next], Awaitable[Any]]
# Whether an interceptor acts on a tool's calls (``Pipeline.use``).
Applies = Callable[["Tool"], bool]

Stage = Literal["report", "gate", "hooks", "policy", "embedder", "route"]
STAGES: tuple[Stage, ...] = ("report", "gate", "hooks", "policy", "embedder", "route")
# A composed chain's: its tool's id, the last step, the caller's ``around``.
ComposedKey = tuple[int, Next, tuple[Interceptor, ...]]


class Pipeline:
    """Interceptors by stage; ``run`` takes a call through them, outermost first."""

    # Composed chains kept per (tool, last step, ``around``); more than this many
    # (callers passing new ``around`` functions each time) and the cache starts over.
    _CACHED = 256

    def __init__(self) -> None:
        self._stages: dict[Stage, list[Interceptor]] = {stage: [] for stage in STAGES}
        # Interceptors that act on some tools' calls only, by id (an embedder's may not
        # be hashable): which tools' (see ``use``).
        self._applies: dict[int, Applies] = {}
        self._composed: dict[ComposedKey, tuple[Tool | None, Next]] = {}

    def use(
        self, interceptor: Interceptor, stage: Stage = "embedder", *, applies: Applies | None = None
    ) -> None:
        """Add ``interceptor`` at the end of ``stage``. ``applies``, for one that acts
        on some tools' calls only and passes every other call on untouched: whether it
        acts on a tool's calls, asked once per tool (when that tool's chain is composed),
        so the calls of other tools do not go through it at all. A call of a name no
        tool has meets every interceptor."""
        if stage not in self._stages:
            raise ValueError(f"unknown stage {stage!r} (one of: {', '.join(STAGES)})")
        self._stages[stage].append(interceptor)
        if applies is not None:
            self._applies[id(interceptor)] = applies
        self._composed.clear()

    def copy(self) -> Pipeline:
        clone = Pipeline()
        for stage, interceptors in self._stages.items():
            clone._stages[stage] = list(interceptors)
        clone._applies = dict(self._applies)
        return clone

    def chain(self, around: Sequence[Interceptor] = ()) -> tuple[Interceptor, ...]:
        """Every interceptor in the order a call meets them; ``around`` first (they
        are report-stage interceptors of one call)."""
        return (*around, *(i for stage in STAGES for i in self._stages[stage]))

    def composed(
        self, tool: Tool | None, last: Next, around: Sequence[Interceptor] = ()
    ) -> Next:
        """The chain a call of ``tool`` goes through, ``last`` at its end: composed once
        per tool, not per call (this runs on every tool call a program makes), without
        the interceptors that have nothing to do for that tool."""
        around = tuple(around)
        key = (id(tool), last, around)
        kept = self._composed.get(key)
        if kept is not None and kept[0] is tool:
            return kept[1]
        if len(self._composed) >= self._CACHED:
            self._composed.clear()
        chain = self.chain(around)
        if tool is not None:
            applies = self._applies
            chain = tuple(i for i in chain if id(i) not in applies or applies[id(i)](tool))
        composed = _compose(chain, last)
        # The tool is kept with its chain: an id is only that tool's while it lives.
        self._composed[key] = (tool, composed)
        return composed

    async def run(self, call: Call, last: Next, around: Sequence[Interceptor] = ()) -> Any:
        """``call`` through the interceptors, then ``last``."""
        return await self.composed(call.tool, last, around)(call)


def _compose(chain: tuple[Interceptor, ...], last: Next) -> Next:
    composed = last
    for interceptor in reversed(chain):
        composed = _step(interceptor, composed)
    return composed


def _step(interceptor: Interceptor, next_: Next) -> Next:
    def step(call: Call) -> Awaitable[Any]:
        return interceptor(call, next_)

    return step


def with_context(call: Call, ctx: ToolContext) -> Call:
    """``call`` with another context (what an interceptor passes on to change it)."""
    return dataclasses.replace(call, ctx=ctx)


def new_call(
    name: str,
    tool: Tool | None,
    args: object,
    ctx: ToolContext,
    parent_id: str | None,
    program: str | None,
) -> Call:
    """``Call(...)`` at under half its cost (it runs on every call; a frozen dataclass
    sets each field through ``object.__setattr__``): the same fields, set at once."""
    made = object.__new__(Call)
    made.__dict__.update(
        name=name, tool=tool, args=args, ctx=ctx, parent_id=parent_id, program=program
    )
    return made


def acts_on_trust(tool: Tool) -> bool:
    """Whether ``authorize_by_trust`` has anything to decide for ``tool``'s calls."""
    return tool.trust != "host"


async def authorize_by_trust(call: Call, next_: Next) -> Any:
    """The ``policy`` stage of every registry: a tool outside this process (an MCP
    server's) runs only when the session's mode and approval policy let it, as a
    command would (``codemode.sandbox.approvals.tool_trust``)."""
    tool = call.tool
    if tool is not None and tool.trust != "host":
        await call.ctx.sandbox.authorize_tool(
            call.name, tool.trust, call.args, program=call.program
        )
    return await next_(call)
