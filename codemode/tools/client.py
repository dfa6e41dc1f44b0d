"""Hooks a host that owns the user's editor gives the tools (``ToolContext.client``).

An editor driving us over ACP knows about unsaved buffers and wants to see edits
land, so the file tools read and write through it when it offers to; and it is where
the user answers approval requests. Without a client, tools use the filesystem and
nothing is asked.

``ApprovalRequest`` / ``Approver`` follow the sandbox's approval shape (an async callable
taking a request with ``tool``, ``command``, ``rule``, ``justification`` and answering
``"once"``, ``"always"`` or ``"deny"``), so the same approver serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

ApprovalChoice = Literal["once", "always", "deny"]


@dataclass(frozen=True)
class ApprovalRequest:
    """What the user is asked about (the fields the sandbox's request also has)."""

    tool: str
    command: str
    justification: str | None = None
    rule: str | None = None
    cwd: Path | None = None

    def summary(self) -> str:
        why = f"\nreason: {self.justification}" if self.justification else ""
        return f"{self.tool} wants to: {self.command}{why}"


class Approver(Protocol):
    async def __call__(self, request: ApprovalRequest) -> ApprovalChoice: ...


class ToolClient(Protocol):
    """The editor side of a session."""

    reads_files: bool
    writes_files: bool

    async def read_text(self, path: Path) -> str:
        """The file's text as the editor has it (unsaved changes included)."""
        ...

    async def write_text(self, path: Path, content: str) -> None: ...

    async def approve(self, request: ApprovalRequest) -> ApprovalChoice: ...
