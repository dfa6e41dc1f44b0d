"""The editor as the tools see it (``ToolContext.client``): files and approvals over ACP."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from acp.schema import FileSystemCapabilities, PermissionOption, ToolCallUpdate, ToolKind

from codemode.sandbox.approvals.approval import ApprovalChoice, ApprovalRequest

_OPTIONS = {
    "once": ("Allow once", "allow_once"),
    "always": ("Always allow", "allow_always"),
    "deny": ("Deny", "reject_once"),
}


class AcpApprover:
    """An ``Approver`` (``codemode.sandbox.approvals.approval``) that asks the ACP client: commands,
    outside tools and file writes alike, as the one ``ApprovalRequest`` type.
    The permission request points at the tool call that is waiting (the newest open
    call of that tool), so the editor shows it in place; ``kind_for`` gives the tool's
    ACP kind (``Tool.acp_kind``; the session's ``UpdateMapper.kind_for``).
    """

    def __init__(
        self,
        conn: Any,
        session_id: str,
        *,
        open_call_for: Callable[[str], str | None],
        flush: Callable[[], Awaitable[None]],
        kind_for: Callable[[str], ToolKind] | None = None,
    ) -> None:
        self._conn = conn
        self._session_id = session_id
        self._open_call_for = open_call_for
        self._flush = flush
        self._kind_for = kind_for
        self._ids = itertools.count(1)

    async def __call__(self, request: ApprovalRequest) -> ApprovalChoice:
        await self._flush()  # the tool call must be on screen before the question
        tool = str(request.tool)
        call_id = self._open_call_for(tool) or f"approval_{next(self._ids)}"
        summary = request.summary() if hasattr(request, "summary") else str(request.command)
        choices = ["once", "always", "deny"]
        if getattr(request, "can_remember", True) is False:
            choices.remove("always")
        raw_input = {
            "tool": tool,
            "command": request.command,
            "justification": getattr(request, "justification", None),
            "rule": getattr(request, "rule", None),
            "program": getattr(request, "program", None),
        }
        response = await self._conn.request_permission(
            session_id=self._session_id,
            tool_call=ToolCallUpdate(
                tool_call_id=call_id,
                title=summary.splitlines()[0],
                kind=self._kind_for(tool) if self._kind_for is not None else "other",
                status="pending",
                raw_input=raw_input,
            ),
            options=[
                PermissionOption(option_id=c, name=_OPTIONS[c][0], kind=_OPTIONS[c][1])
                for c in choices
            ],
        )
        outcome = response.outcome
        if getattr(outcome, "outcome", None) == "selected" and outcome.option_id in choices:
            return outcome.option_id
        return "deny"  # cancelled, or an option we did not offer


class AcpToolClient:
    """``ToolClient`` over an ACP connection: fs methods when the client offers them."""

    def __init__(
        self,
        conn: Any,
        session_id: str,
        fs: FileSystemCapabilities | None,
        approver: AcpApprover,
    ) -> None:
        self._conn = conn
        self._session_id = session_id
        self.reads_files = bool(fs and fs.read_text_file)
        self.writes_files = bool(fs and fs.write_text_file)
        self.approve = approver

    async def read_text(self, path: Path) -> str:
        response = await self._conn.read_text_file(session_id=self._session_id, path=str(path))
        return str(response.content)

    async def write_text(self, path: Path, content: str) -> None:
        await self._conn.write_text_file(
            session_id=self._session_id, path=str(path), content=content
        )
