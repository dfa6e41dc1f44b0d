"""Approval for built-in tool calls that arrive over MCP (``interpreter mcp-server``),
where no human is attached to answer a prompt.

A ``Decider`` says allow, prompt or forbidden for each built-in call, and a ``prompt``
is refused with the reason, because the MCP client is a program, not a person.
``decider_gate`` is the check as an interceptor of the call pipeline (its ``gate``
stage, ``codemode.tools.pipeline``); ``approving_registry`` is a registry with it.
Tools of configured MCP servers are decided by the sandbox session from their server's
``trust``, in this entry point as in every other (``codemode.sandbox.approvals.tool_trust``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from codemode.tools.context import ToolError
from codemode.tools.registry import ToolRegistry, code_name

if TYPE_CHECKING:
    from codemode.tools.base import Tool
    from codemode.tools.pipeline import Call, Interceptor, Next

Verdict = Literal["allow", "prompt", "forbidden"]


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""


# Decides a call from the tool's definition (its ``effect``) and its arguments.
Decider = Callable[["Tool", Any], Decision]


def policy_decider(approval_policy: str, sandbox_mode: str) -> Decider:
    """The configured policy for built-in tools called over MCP.

    ``never`` and ``on-request`` allow what the sandbox mode allows; ``untrusted`` asks
    before anything that is not read-only; ``read-only`` forbids writing tools and asks
    before the shell. An MCP server's tools are allowed here: the sandbox session
    decides them from their server's ``trust``.
    """

    def decide(tool: Tool, args: Any) -> Decision:
        name = tool.name
        if tool.effect == "read" or tool.trust != "host":
            return Decision("allow")
        if sandbox_mode == "read-only":
            if tool.effect == "write":
                return Decision("forbidden", f"sandbox_mode is read-only: {name} writes files")
            return Decision("prompt", f"sandbox_mode is read-only and {name} may write")
        if approval_policy == "untrusted":
            return Decision("prompt", f"approval_policy is untrusted and {name} is not read-only")
        return Decision("allow")

    return decide


def decider_gate(decide: Decider) -> Interceptor:
    """An interceptor letting a call through only when ``decide`` allows it; ``prompt``
    is refused (no one can answer)."""

    async def gate(call: Call, next_: Next) -> Any:
        if call.tool is None:
            return await next_(call)  # the last step says it is no tool
        decision = decide(call.tool, call.args)
        shown = f"tools.{code_name(call.name)}"
        if decision.verdict == "forbidden":
            raise ToolError(f"{shown} is forbidden: {decision.reason}")
        if decision.verdict == "prompt":
            raise ToolError(
                f"{shown} needs approval ({decision.reason}), and no one is attached to this "
                "MCP server to approve it: refused"
            )
        return await next_(call)

    return gate


def approving_registry(registry: ToolRegistry, decide: Decider) -> ToolRegistry:
    """A copy of ``registry`` whose calls ``decide`` lets through (``prompt`` refused)."""
    guarded = registry.copy()
    guarded.use(decider_gate(decide), "gate")
    return guarded
