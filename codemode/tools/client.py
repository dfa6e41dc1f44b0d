"""Hooks a host that owns the user's editor gives the tools (``ToolContext.client``).

An editor driving us over ACP knows about unsaved buffers and wants to see edits
land, so the file tools read and write through it when it offers to; and it is where
the user answers approval requests. Without a client, tools use the filesystem and
nothing is asked.

Approvals use the one approval type of every surface, ``codemode.sandbox.approvals.approval``'s
``ApprovalRequest`` / ``Approver`` (re-exported here for the tools that ask).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from codemode.sandbox.approvals.approval import ApprovalChoice, ApprovalRequest, Approver

__all__ = ["ApprovalChoice", "ApprovalRequest", "Approver", "ToolClient"]


class ToolClient(Protocol):
    """The editor side of a session."""

    reads_files: bool
    writes_files: bool

    async def read_text(self, path: Path) -> str:
        """The file's text as the editor has it (unsaved changes included)."""
        ...

    async def write_text(self, path: Path, content: str) -> None: ...

    async def approve(self, request: ApprovalRequest) -> ApprovalChoice: ...
