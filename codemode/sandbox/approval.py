"""Approvals: asking the user before a command the policy does not let through alone.

An ``Approver`` is any async callable taking an ``ApprovalRequest`` and returning
``"once"``, ``"always"`` (also remember it: a ``prefix_rule`` is appended to
``~/.codemode/rules/default.rules``) or ``"deny"``. Interactive sessions pass one;
non-interactive surfaces (``interpreter exec``, ``interpreter run``, embedders) pass none,
and a command that would need approval is then refused — unless the approval policy is
``never``, which runs it (still confined by the sandbox mode).

For calls made from a code-mode program, ``program_context(source)`` around the
program's execution lets the request carry the program's source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from codemode.sandbox.approval_context import (
    current_program,
    current_tool,
    program_context,
    tool_call,
)
from codemode.sandbox.policy import CommandVerdict

__all__ = [
    "ApprovalChoice",
    "ApprovalRequest",
    "Approver",
    "CommandVerdict",
    "current_program",
    "current_tool",
    "program_context",
    "tool_call",
]

ApprovalChoice = Literal["once", "always", "deny"]


@dataclass(frozen=True)
class ApprovalRequest:
    """What the user is asked about."""

    tool: str  # the tool whose call runs the command, e.g. "shell"
    command: str  # the whole command line
    simple_command: str  # the simple command that needs approval (the strictest one)
    decision: str  # "prompt" (a rule asks for it) or "unmatched" (untrusted policy)
    rule: str | None  # the rule that decided, as written, or a built-in check
    source: str | None  # "file:line" of that rule
    justification: str | None
    cwd: Path
    sandbox_mode: str
    approval_policy: str
    commands: tuple[CommandVerdict, ...] = ()  # every simple command needing approval
    program: str | None = None  # the code-mode program making the call, if any
    can_remember: bool = field(default=True)  # whether "always" can be saved as a rule

    def summary(self) -> str:
        """One paragraph for a prompt: what, why, and which rule."""
        why = self.justification or (
            "no rule allows it and the approval policy is untrusted"
            if self.decision == "unmatched"
            else "a rule asks for approval"
        )
        rule = f"\nrule: {self.rule}" + (f" ({self.source})" if self.source else "")
        return (
            f"{self.tool} wants to run: {self.command}\nbecause of: {self.simple_command}"
            f"\nreason: {why}{rule if self.rule else ''}"
        )


class Approver(Protocol):
    """Asks the user; returns once / always / deny."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalChoice: ...
