"""Where a tool call comes from: the model's call (an ``exec`` call's id) and, for a
call a code-mode program makes, the program (its cell, its item) and the call's place in
it. Kept in context variables, so every call a program makes (each runs in a task made
from the program's) knows its program without any surface passing it along.

The agent sets them (``codemode.agent``); hooks read them (``codemode.hooks``): a guard
sees the 7th call of cell 3 of exec call ``call_abc``, not an anonymous ``shell``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class ProgramProvenance:
    """One program (or one classic call) as its tool calls see it."""

    exec_call_id: str | None = None  # the model's tool call that ran it
    cell_id: str | None = None
    item_id: str | None = None  # the program's item (a call's ``parent_id``)
    calls: int = 0  # tool calls numbered so far
    # Context hooks added for the model (PostToolUse's additionalContext): delivered
    # with the program's result.
    notes: list[str] = field(default_factory=list)

    def next_sequence(self) -> int:
        self.calls += 1
        return self.calls


# The model's tool call being carried out (set per call by the agent loop).
current_model_call: ContextVar[str | None] = ContextVar("codemode_model_call", default=None)
# The program whose calls these are (set by whoever runs the program).
current_program: ContextVar[ProgramProvenance | None] = ContextVar(
    "codemode_program", default=None
)
