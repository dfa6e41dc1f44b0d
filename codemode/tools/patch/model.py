"""A parsed patch: plain data, whichever input format it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# One line of a chunk: " " keeps the line, "-" removes it, "+" adds it.
LineOp = Literal[" ", "-", "+"]
ChangeKind = Literal["add", "update", "delete", "move"]


@dataclass
class Chunk:
    """One run of context, removed and added lines within an updated file."""

    number: int  # 1-based, within its file
    line: int  # where it starts in the patch text, 1-based
    # The text after "@@ " on the chunk's header lines, sought in turn before the lines
    # (several "@@" lines narrow down: a class, then a method in it).
    anchors: list[str] = field(default_factory=list)
    lines: list[tuple[LineOp, str]] = field(default_factory=list)
    at_end: bool = False  # "*** End of File": the lines must end the file
    # 0-based line index suggested by a unified-diff header ("@@ -12,3 +12,4 @@").
    hint: int | None = None

    @property
    def old_lines(self) -> list[str]:
        """The lines the chunk expects to find (context and removed lines)."""
        return [text for op, text in self.lines if op != "+"]


@dataclass
class AddFile:
    path: str
    line: int
    lines: list[str] = field(default_factory=list)


@dataclass
class DeleteFile:
    path: str
    line: int


@dataclass
class UpdateFile:
    path: str
    line: int
    move_to: str | None = None
    chunks: list[Chunk] = field(default_factory=list)


Operation = AddFile | DeleteFile | UpdateFile


@dataclass
class Patch:
    operations: list[Operation]


@dataclass(frozen=True)
class Change:
    """What one operation did to the workspace, as reported back."""

    path: str
    kind: ChangeKind
    move_to: str | None = None  # the new path, for kind == "move"

    def summary(self) -> str:
        """The one-line form: ``A path``, ``M path``, ``D path`` or ``R old -> new``."""
        if self.kind == "move":
            return f"R {self.path} -> {self.move_to}"
        letter = {"add": "A", "update": "M", "delete": "D"}[self.kind]
        return f"{letter} {self.path}"
