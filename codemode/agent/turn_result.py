"""How a turn ended: the result a caller gets, and the exception that ends a turn early."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from codemode.providers.base import Usage

# Why a turn ended. completed: the model gave its final answer; max_turns: it used up
# its model requests; cancelled: interrupted; no_action: it kept replying with neither
# an action nor an answer; answer_rejected: its final answer failed the output check
# twice; context_full: the conversation no longer fits even after compaction;
# provider_error: the model service failed; prompt_blocked: a UserPromptSubmit hook
# refused the prompt; hook_stopped: a hook said ``continue: false``; error: anything
# else (a broken stream).
StopReason = Literal[
    "completed",
    "max_turns",
    "cancelled",
    "no_action",
    "answer_rejected",
    "context_full",
    "provider_error",
    "prompt_blocked",
    "hook_stopped",
    "error",
]


@dataclass
class TurnResult:
    ok: bool
    final_message: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    model_requests: int = 0
    # Set by the loop whenever a turn ends: callers branch on this, never on ``error``.
    stop_reason: StopReason = "error"


class TurnFailure(Exception):
    """Ends a turn with a message for the user, and why it stopped."""

    def __init__(self, message: str, reason: StopReason = "error") -> None:
        super().__init__(message)
        self.reason: StopReason = reason
