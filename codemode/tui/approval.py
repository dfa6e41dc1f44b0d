"""Asking the user before a command runs that the rules say needs a yes.

``TerminalApprover`` is the interactive ``Approver`` of ``codemode.sandbox.approval``:
it is called with an ``ApprovalRequest`` and answers ``"once"``, ``"always"`` (the
sandbox then remembers the command's prefix as a rule) or ``"deny"``. For a call made
by a code-mode program the program is shown with the calling line marked.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rich.syntax import Syntax
from rich.text import Text

if TYPE_CHECKING:
    from codemode.sandbox.approval import ApprovalChoice, ApprovalRequest
    from codemode.tui.render import TerminalRenderer

# (label, key, answer) in the order offered.
CHOICES: list[tuple[str, str, str]] = [
    ("approve once", "y", "once"),
    ("always for this prefix", "a", "always"),
    ("deny", "n", "deny"),
]

AskChoice = Callable[[str, dict[str, str]], Awaitable[str]]


class TerminalApprover:
    """Shows an approval request and reads the answer through ``ask``.

    ``ask(question, {key: answer})`` returns one of the answers; it returns "deny" when
    the user interrupts.
    """

    def __init__(self, renderer: TerminalRenderer, ask: AskChoice) -> None:
        self.renderer = renderer
        self.ask = ask
        self.asked = 0

    async def __call__(self, request: ApprovalRequest) -> ApprovalChoice:
        self.asked += 1
        self.renderer.flush_streams()
        self.renderer.activity.hold()  # the question needs the screen
        console = self.renderer.console
        for renderable in describe_request(request, self.renderer.current_program):
            console.print(renderable)
        choices = {key: answer for _, key, answer in CHOICES}
        if not getattr(request, "can_remember", True):
            choices.pop("a")
        prefixes = [" ".join(v.words) for v in getattr(request, "commands", ()) if v.words]
        labels = "  ".join(
            f"[{key}] {label}" + (f" ({'; '.join(prefixes)})" if key == "a" and prefixes else "")
            for label, key, _ in CHOICES
            if key in choices
        )
        try:
            answer = await self.ask(f"{labels} › ", choices)
        finally:
            self.renderer.activity.release()
        style = "green" if answer != "deny" else "red"
        console.print(Text(f"→ {dict((a, lbl) for lbl, _, a in CHOICES)[answer]}", style=style))
        return answer  # type: ignore[return-value]


def describe_request(request: Any, running_program: str | None = None) -> list[Any]:
    """What the user sees: the command, the rule, the reason, and the program around
    a nested call."""
    out: list[Any] = [Text("approval needed", style="bold yellow")]
    out.append(Text.assemble(("  command  ", "dim"), (request.command, "bold")))
    simple = getattr(request, "simple_command", None)
    if simple and simple != request.command:
        out.append(Text.assemble(("  because  ", "dim"), simple))
    rule = getattr(request, "rule", None)
    if rule:
        source = getattr(request, "source", None)
        out.append(Text.assemble(("  rule     ", "dim"), rule, (f"  ({source})" if source else "")))
    why = getattr(request, "justification", None) or (
        "no rule allows it (approval policy: untrusted)"
        if getattr(request, "decision", "") == "unmatched"
        else "a rule asks for approval"
    )
    out.append(Text.assemble(("  reason   ", "dim"), why))
    program = getattr(request, "program", None) or running_program
    if program:
        tool = getattr(request, "tool", "shell")
        lines = calling_lines(program, tool)
        out.append(Text(f"  from this program (line {', '.join(map(str, lines))}):", style="dim"))
        out.append(
            Syntax(
                program,
                "javascript",
                theme="ansi_dark",
                line_numbers=True,
                highlight_lines=set(lines),
            )
        )
    return out


def calling_lines(program: str, tool: str) -> list[int]:
    """1-based numbers of the program lines that call ``tools.<tool>``."""
    pattern = re.compile(rf"\btools\s*\.\s*{re.escape(tool)}\b")
    return [n for n, line in enumerate(program.splitlines(), 1) if pattern.search(line)]
