"""Whether a call to a tool from outside this process (an MCP server's) may run.

Built-in tools check what they do themselves (commands through the execpolicy, files
through the writable roots). A tool served by an MCP server runs in that server's
process, out of the sandbox's reach, so the session decides from the server's
configured ``trust`` (``Tool.trust``) and the session's mode and approval policy, the
same way in every entry point (``run``, ``exec``, interactive, ``acp``, ``mcp-server``):

=========== ============ =========================== ==========================
trust       read-only    workspace-write / danger    under approval ``untrusted``
=========== ============ =========================== ==========================
read        runs         runs                        runs
write       refused      runs                        asked
(unset)     refused      asked, unless policy never  asked
=========== ============ =========================== ==========================

"Asked" goes to the session's approver; with none (``exec``, ``run``, ``mcp-server``)
the call is refused with the reason and how to allow it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from codemode.sandbox.approvals.approval import ApprovalRequest
from codemode.tool_terms.errors import ToolError
from codemode.tool_terms.names import code_name, split_namespace

if TYPE_CHECKING:
    from pathlib import Path

    from codemode.sandbox.approvals.approval import Approver
    from codemode.sandbox.settings import SandboxSettings


class Asking(Protocol):
    """What deciding an outside tool's call needs of the session (its ``CommandGate``)."""

    workspace: Path
    approver: Approver | None
    # outside tools the user allowed "always" in this session
    approved_tools: set[str]

    @property
    def settings(self) -> SandboxSettings: ...


def _server(name: str) -> str:
    parts = split_namespace(name)
    return parts[0] if parts else name


def decide(trust: str, sandbox_mode: str, approval_policy: str) -> tuple[str, str]:
    """("allow" | "ask" | "refuse", why) for a tool of ``trust`` in this session."""
    if trust in ("host", "read"):
        return "allow", ""
    if sandbox_mode == "read-only":
        if trust == "write":
            return "refuse", 'the sandbox mode is read-only and the server has trust = "write"'
        return "refuse", 'the sandbox mode is read-only and the server is not trust = "read"'
    if approval_policy == "untrusted":
        return "ask", "the approval policy is untrusted"
    if trust == "write" or approval_policy == "never":
        return "allow", ""
    return "ask", "the server has no trust setting"


async def authorize_tool(
    session: Asking, name: str, trust: str, raw_args: Any, *, program: str | None = None
) -> None:
    """Let the call to ``name`` through, or raise ToolError saying what refused it;
    ``program`` is the code-mode program making the call (a request shows it)."""
    settings = session.settings
    verdict, why = decide(trust, settings.sandbox_mode, settings.approval_policy)
    if verdict == "allow" or name in session.approved_tools:
        return
    shown = f"tools.{code_name(name)}"
    server = _server(name)
    if verdict == "refuse":
        raise ToolError(
            f"{shown} is refused: {why}. Set trust = \"read\" in [mcp_servers.{server}] "
            "if its tools only read"
        )
    if session.approver is None:
        raise ToolError(
            f"{shown} needs approval ({why}; MCP tools run outside the sandbox) and no one "
            f"can approve it in this session. Set trust = \"write\" (or \"read\") in "
            f"[mcp_servers.{server}] to let its tools run, or run with --approval never"
        )
    try:
        shown_args = json.dumps(raw_args, ensure_ascii=False)
    except (TypeError, ValueError):
        shown_args = repr(raw_args)
    if len(shown_args) > 400:
        shown_args = shown_args[:397] + "..."
    request = ApprovalRequest(
        tool=code_name(name),
        command=f"{shown}({shown_args})",
        simple_command=shown,
        decision="prompt",
        rule=None,
        source=None,
        justification=f"{why}; MCP server {server} runs outside the sandbox",
        cwd=session.workspace,
        sandbox_mode=settings.sandbox_mode,
        approval_policy=settings.approval_policy,
        program=program,
        can_remember=False,
    )
    choice = await session.approver(request)
    if choice == "deny":
        raise ToolError(f"{shown}: the user declined the call")
    if choice == "always":
        session.approved_tools.add(name)  # for this session only
