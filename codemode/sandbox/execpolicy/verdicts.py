"""The execpolicy's verdict types: a leaf module, so the per-command checks
(``command_checks``, ``rm_checks``) build verdicts without importing ``policy``, which
calls them. A check that needs a nested command line decided asks an ``Evaluator``
(the ``Policy`` passes itself)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from codemode.sandbox.execpolicy.rules import RuleSet
    from codemode.sandbox.execpolicy.script_types import SimpleCommand

Verdict = Literal["allow", "unmatched", "prompt", "forbidden"]
STRICTNESS: dict[str, int] = {"allow": 0, "unmatched": 1, "prompt": 2, "forbidden": 3}


@dataclass(frozen=True)
class PolicyContext:
    """Where the command runs, for the checks that depend on paths."""

    cwd: Path
    writable_roots: tuple[Path, ...]  # the workspace first
    home: Path = field(default_factory=Path.home)
    # the PATH the command gets (None: this process's): where its program names lead
    path: str | None = None


@dataclass(frozen=True)
class CommandVerdict:
    """The verdict on one simple command (or on a part that could not be checked)."""

    command: str
    verdict: Verdict
    rule: str | None = None  # the rule as written, or "built-in: ..." for checks in code
    source: str | None = None  # "file:line" of the rule
    justification: str | None = None
    words: tuple[str, ...] = ()  # the command's literal words (for "always allow")

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "decision": self.verdict,
            "rule": self.rule,
            "source": self.source,
            "justification": self.justification,
        }


@dataclass(frozen=True)
class Evaluation:
    """The policy decision for one command line."""

    command: str
    decision: Verdict
    deciding: CommandVerdict | None
    verdicts: tuple[CommandVerdict, ...]

    def needing_approval(self) -> list[CommandVerdict]:
        return [v for v in self.verdicts if v.verdict in ("prompt", "unmatched")]

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "decision": self.decision,
            "deciding": self.deciding.to_json() if self.deciding else None,
            "commands": [v.to_json() for v in self.verdicts],
        }


@dataclass(frozen=True)
class CommandFacts:
    """What a per-command check (``Check``, below) knows about one simple command."""

    cmd: SimpleCommand
    ctx: PolicyContext
    cwds: list[Path]  # the folders it may run in (a ``cd`` in a branch makes several)
    cwd_unknown: bool  # after a ``cd`` to a folder only known at run time
    literals: dict[str, set[str]]  # the literal values the script gives its variables
    layers: tuple[RuleSet, ...]  # the rules: the user's, the repository's, the built-in
    shown: str  # the command as shown in a verdict
    words: tuple[str, ...]  # its words up to the first one only known at run time


class Evaluator(Protocol):
    """What decides a whole command line (``Policy.evaluate``)."""

    def evaluate(self, command: str, ctx: PolicyContext, *, depth: int = 0) -> Evaluation: ...


class Check(Protocol):
    """One per-command check of the execpolicy: what it finds wrong with one simple
    command (often nothing). The hard checks are listed, in order, in
    ``command_checks.HARD_CHECKS``; ``Policy`` runs each on every simple command."""

    def __call__(self, facts: CommandFacts, /) -> list[CommandVerdict]: ...
