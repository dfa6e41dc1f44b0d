"""Approvals: asking the user before something the policy does not let through alone.

The one approval type of every surface: the sandbox asks it about commands
(``SandboxSession.authorize``) and calls of outside tools (``tool_trust``), the file
tools about a write outside the writable roots (``codemode.tools.files``, through the
editor); the terminal (``codemode.tui.approval``), an ACP editor
(``codemode.acp.client``) or an embedder answers, and ``interpreter exec`` and
``mcp-server`` have none.

An ``Approver`` is any async callable taking an ``ApprovalRequest`` and returning
``"once"``, ``"always"`` or ``"deny"``. "Always" remembers no more than the person saw:
by default the exact command line (``allow_command(command=...)`` appended to
``~/.codemode/rules/default.rules``). ``request.remember_options`` lists what may be
remembered, narrowest first, each saying exactly what it will allow; answering
``"always:N"`` picks option N (0, the exact command line, is what ``"always"`` means).
Interactive sessions pass an approver; non-interactive surfaces (``interpreter exec``,
``interpreter run``, embedders) pass none, and a command that would need approval is then
refused — unless the approval policy is ``never``, which runs it (still confined by the
sandbox mode).

For calls made from a code-mode program the request carries the program's source
(``ApprovalRequest.program``: the call pipeline puts it on each call's context).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    # Only named in annotations: importing this module stays cheap (the file tools and
    # the ACP client import it for the request type).
    from codemode.sandbox.execpolicy.policy import CommandVerdict

__all__ = [
    "ApprovalChoice",
    "ApprovalRequest",
    "Approver",
    "RememberOption",
    "remember_options",
]

# "always:N" picks request.remember_options[N]; "always" is "always:0".
ApprovalChoice = Literal["once", "always", "deny"] | str


@dataclass(frozen=True)
class RememberOption:
    """One thing "always" can store: exactly one command line, or a command prefix."""

    label: str  # what it allows, in words, shown to the person
    command: str | None = None  # allow_command(command=...): this exact line
    prefix: tuple[str, ...] = ()  # prefix_rule(pattern=[...], decision="allow")

    def rule(self) -> str:
        if self.command is not None:
            return f"allow_command(command={json.dumps(self.command, ensure_ascii=False)})"
        return f'prefix_rule(pattern={json.dumps(list(self.prefix))}, decision="allow")'


_MAX_PREFIXES = 4


def remember_options(command: str, needing: Sequence[CommandVerdict]) -> tuple[RememberOption, ...]:
    """What "always" may store for ``command``, narrowest first.

    Always the exact command line. When a single simple command needed approval and all
    its words are fixed text, also prefixes of it, from the whole command down (never a
    prefix cut short by a word only known at run time: ``rm -rf "$DIR"`` offers no
    ``rm -rf``).
    """
    line = command.strip()
    out = [RememberOption(f"exactly this command line, nothing else: {line}", command=line)]
    with_words = [v for v in needing if v.words]
    if len(needing) == 1 and len(with_words) == 1:
        v = with_words[0]
        if shlex.join(v.words) == v.command:  # every word literal, nothing dropped
            words = v.words
            for n in range(len(words), max(0, len(words) - _MAX_PREFIXES), -1):
                shown = shlex.join(words[:n])
                out.append(
                    RememberOption(
                        f"`{shown}` followed by any further arguments, anywhere in a "
                        "command line (built-in forbidden rules still apply)",
                        prefix=tuple(words[:n]),
                    )
                )
    return tuple(out)


@dataclass(frozen=True)
class ApprovalRequest:
    """What the user is asked about.

    A command fills every field; a request about something else (a write outside the
    writable roots) only ``tool``, ``command`` (what would be done, in words),
    ``justification`` and ``cwd``, and its ``simple_command`` stays empty.
    """

    tool: str  # the tool whose call it is, e.g. "shell"
    command: str  # the whole command line (or the action, in words)
    simple_command: str = ""  # the simple command that needs approval (the strictest one)
    decision: str = "prompt"  # "prompt" (a rule asks for it) or "unmatched" (untrusted policy)
    rule: str | None = None  # the rule that decided, as written, or a built-in check
    source: str | None = None  # "file:line" of that rule
    justification: str | None = None
    cwd: Path | None = None
    sandbox_mode: str = ""
    approval_policy: str = ""
    commands: tuple[CommandVerdict, ...] = ()  # every simple command needing approval
    program: str | None = None  # the code-mode program making the call, if any
    can_remember: bool = field(default=True)  # whether "always" can be saved as a rule
    remember_options: tuple[RememberOption, ...] = ()  # what "always" may store

    def summary(self) -> str:
        """One paragraph for a prompt: what, why, and which rule."""
        if not self.simple_command:
            why = f"\nreason: {self.justification}" if self.justification else ""
            return f"{self.tool} wants to: {self.command}{why}"
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
