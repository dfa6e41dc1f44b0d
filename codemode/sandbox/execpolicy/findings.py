"""What reading a command's arguments finds (``safe_args``) and the program-specific
checks add to (``program_checks``): a leaf module both import."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from codemode.sandbox.execpolicy.words import Word

Level = Literal["allow", "unmatched", "prompt", "unknown"]
_RANK = {"unknown": -1, "allow": 0, "unmatched": 1, "prompt": 2}


@dataclass
class Finding:
    level: Level = "allow"
    reason: str | None = None
    payloads: list[tuple[str, str]] = field(default_factory=list)  # (command, why)
    outputs: list[tuple[Word, str]] = field(default_factory=list)  # (file, why)
    # what the argument reading saw, for the program-specific checks
    values: dict[str, list[Word | None]] = field(default_factory=dict)
    plain: list[Word] = field(default_factory=list)

    def raise_to(self, level: Level, reason: str) -> None:
        if _RANK[level] > _RANK[self.level]:
            self.level, self.reason = level, reason

    def merge(self, other: Finding) -> None:
        if other.reason is not None:
            self.raise_to(other.level, other.reason)
        self.payloads += other.payloads
        self.outputs += other.outputs


# String literals inside a program's inline code: shell commands it may run.
_STRINGS = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'|\"([^\"\\]*(?:\\.[^\"\\]*)*)\"|`([^`]*)`")


def strings_in(code: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None) for m in _STRINGS.finditer(code)]
