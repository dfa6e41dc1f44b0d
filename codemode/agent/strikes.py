"""How many unusable replies a turn puts up with before it gives up.

A reply with neither a valid action nor a final answer gets a reminder, up to
``MAX_FORMAT_REMINDERS`` in a row; a final answer the output check rejects
(``exec --output-schema``) is sent back once, and a second rejection ends the turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemode.agent.turn_result import TurnFailure

# Consecutive replies with neither an action nor an answer before the turn gives up.
MAX_FORMAT_REMINDERS = 3


@dataclass
class Strikes:
    """One turn's count of reminders in a row and of rejected final answers."""

    reminders: int = 0
    checks_failed: int = 0

    def remind(self, reminder: str) -> str:
        """The reminder to send; TurnFailure once the model has needed too many."""
        self.reminders += 1
        if self.reminders >= MAX_FORMAT_REMINDERS:
            raise TurnFailure(
                f"the model replied {self.reminders} times in a row without a valid "
                "action or a final answer; stopping",
                "no_action",
            )
        return reminder

    def reject(self, problem: str) -> str:
        """What to tell the model about its rejected final answer; TurnFailure the
        second time."""
        self.checks_failed += 1
        if self.checks_failed > 1:
            raise TurnFailure(
                f"the final answer was not accepted, even after a retry: {problem}",
                "answer_rejected",
            )
        return (
            f"Your final answer was not accepted: {problem}. "
            "Reply again with a corrected final answer."
        )
