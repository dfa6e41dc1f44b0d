"""Asking the user before a command runs that the rules say needs a yes.

``TerminalApprover`` is the interactive ``Approver`` of ``codemode.sandbox.approvals.approval``:
it is called with an ``ApprovalRequest`` and answers ``"once"``, ``"always"`` (the
sandbox then remembers exactly this command line as a rule), ``"always:N"`` (one of the
request's narrower-or-equal ``remember_options``, picked from a list that shows exactly
what each allows) or ``"deny"``. For a call made
by a code-mode program the program is shown with the calling line marked.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text

if TYPE_CHECKING:
    from codemode.sandbox.approvals.approval import ApprovalChoice, ApprovalRequest
    from codemode.tui.render import TerminalRenderer

# (label, key, answer) in the order offered.
CHOICES: list[tuple[str, str, str]] = [
    ("approve once", "y", "once"),
    ("always this exact command", "a", "always"),
    ("always for a prefix…", "p", "prefix"),
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
        options = list(getattr(request, "remember_options", ()))
        if not getattr(request, "can_remember", True):
            choices.pop("a")
            options = []
        if len(options) < 2:
            choices.pop("p")
        if options:
            console.print(Text.assemble(("  always   ", "dim"), options[0].label))
        labels = "  ".join(f"[{key}] {label}" for label, key, _ in CHOICES if key in choices)
        try:
            answer = await self.ask(f"{labels} › ", choices)
            if answer == "prefix":
                answer = await self._pick(options[1:])
        finally:
            self.renderer.activity.release()
        shown = dict((a, lbl) for lbl, _, a in CHOICES)
        if answer.startswith("always:"):
            label = f"always: {options[int(answer.split(':')[1])].label}"
        else:
            label = shown[answer]
        style = "green" if answer != "deny" else "red"
        console.print(Text(f"→ {label}", style=style))
        return answer

    async def _pick(self, options: list[Any]) -> str:
        """Choose one prefix; each line says exactly what it will allow."""
        console = self.renderer.console
        keys = {}
        for n, option in enumerate(options[:9], 1):
            console.print(Text(f"  [{n}] {option.label}"))
            keys[str(n)] = f"always:{n}"
        keys["n"] = "deny"
        return await self.ask("which one (n: deny) › ", keys)


def describe_request(
    request: Any, running_program: str | None = None
) -> list[RenderableType]:
    """What the user sees: the command, the rule, the reason, and the program around
    a nested call."""
    out: list[RenderableType] = [Text("approval needed", style="bold yellow")]
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
