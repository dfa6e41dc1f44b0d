"""Unified diffs (``diff -u``, ``git diff``) read into the same ``Patch`` model.

Models trained on git output often answer with a unified diff instead of the
apply_patch format. Each ``@@ -l,n +l,n @@`` hunk becomes a chunk whose header line
number is a hint, not a requirement (models miscount): the lines are still found by
content. Hunk line counts are not trusted either; a hunk runs while lines start with
' ', '-' or '+', except that a ``--- `` line followed by ``+++ `` starts the next file.
What cannot be read this way (binary patches, hunks outside any file) is refused with
the expected format.
"""

from __future__ import annotations

import re

from codemode.tools.patch.errors import PatchError
from codemode.tools.patch.model import (
    AddFile,
    Chunk,
    DeleteFile,
    LineOp,
    Operation,
    Patch,
    UpdateFile,
)

_HUNK = re.compile(r"@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+.*")
_LOOSE_HUNK = re.compile(r"@@.*")
_GIT_HEADER = re.compile(r"diff --git (\S+) (\S+)")
_IGNORED = ("index ", "old mode ", "new mode ", "similarity index ", "dissimilarity index ")
_GIT_EXTRAS = ("new file mode ", "deleted file mode ", "rename from ", "rename to ")
_DEV_NULL = "/dev/null"


def looks_unified(lines: list[str]) -> bool:
    """Whether ``lines`` read as a unified diff rather than an apply_patch patch."""
    for i, line in enumerate(lines):
        if line.strip().startswith("***"):
            return False  # an apply_patch marker comes first
        if _starts_section(lines, i):
            return True
    return False


def _starts_section(lines: list[str], i: int) -> bool:
    line = lines[i]
    if line.startswith("diff --git "):
        return True
    return line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def parse_unified(lines: list[str], first_line: int = 1) -> Patch:
    """Read a unified diff; raises PatchError for one that cannot be applied safely."""
    return _Reader(lines, first_line).run()


def _strip_prefix(name: str) -> str:
    name = name.split("\t", 1)[0].strip()  # "--- a/x.py\t2024-01-01 ..." timestamps
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1]
    if name != _DEV_NULL and name[:2] in ("a/", "b/"):
        return name[2:]
    return name


class _Reader:
    def __init__(self, lines: list[str], first_line: int) -> None:
        self.lines = lines
        self.first_line = first_line
        self.i = 0

    def fail(self, message: str) -> PatchError:
        return PatchError(
            f"Line {self.first_line + self.i} of the unified diff: {message} Send the "
            "change in the apply_patch format instead.",
            show_format=True,
        )

    def run(self) -> Patch:
        operations: list[Operation] = []
        lines = self.lines
        # What the last "diff --git" header announced, until a "---" section settles it.
        git: dict[str, str] | None = None
        while self.i < len(lines) and not _starts_section(lines, self.i):
            self.i += 1  # prose before the diff
        while self.i < len(lines):
            line = lines[self.i]
            if m := _GIT_HEADER.fullmatch(line):
                self.settle(git, operations)
                git = {"old": _strip_prefix(m.group(1)), "new": _strip_prefix(m.group(2))}
                git["line"] = str(self.first_line + self.i)
                self.i += 1
            elif git is not None and line.startswith(_GIT_EXTRAS):
                key = next(k for k in _GIT_EXTRAS if line.startswith(k))
                git[key.strip()] = line[len(key) :].strip()
                self.i += 1
            elif line.startswith(_IGNORED) or not line.strip():
                self.i += 1
            elif line.startswith(("Binary files ", "GIT binary patch")):
                raise self.fail("binary changes cannot be applied.")
            elif line.startswith("--- ") and self.i + 1 < len(lines):
                operations.append(self.file_section())
                git = None
            else:
                raise self.fail(f"{line!r} is outside any '--- a/PATH' / '+++ b/PATH' section.")
        self.settle(git, operations)
        if not operations:
            raise self.fail("no file sections found.")
        return Patch(operations)

    def settle(self, git: dict[str, str] | None, operations: list[Operation]) -> None:
        """A git header with no "---" section: an empty file added or deleted."""
        if git is None:
            return
        line = int(git["line"])
        if "new file mode" in git:
            operations.append(AddFile(git["new"], line, []))
        elif "deleted file mode" in git:
            operations.append(DeleteFile(git["old"], line))
        elif "rename from" in git:
            raise self.fail("a rename without content changes cannot be applied.")
        else:
            raise self.fail(f"the section for {git['old']} has no changes to apply.")

    def file_section(self) -> Operation:
        lines = self.lines
        header_line = self.first_line + self.i
        old = _strip_prefix(lines[self.i][4:])
        if not lines[self.i + 1].startswith("+++ "):
            raise self.fail("a '--- ' line must be followed by a '+++ ' line.")
        new = _strip_prefix(lines[self.i + 1][4:])
        self.i += 2
        chunks: list[Chunk] = []
        while self.i < len(lines) and lines[self.i].startswith("@@"):
            chunks.append(self.hunk(len(chunks) + 1))
        if old == _DEV_NULL and new == _DEV_NULL:
            raise self.fail("both sides are /dev/null.")
        if old == _DEV_NULL:
            added = []
            for chunk in chunks:
                if any(op != "+" for op, _ in chunk.lines):
                    raise self.fail(f"the new file {new} has lines that do not start with '+'.")
                added.extend(text for _, text in chunk.lines)
            return AddFile(new, header_line, added)
        if new == _DEV_NULL:
            return DeleteFile(old, header_line)
        if not chunks:
            raise self.fail(f"'--- {old}' has no '@@' hunk.")
        return UpdateFile(old, header_line, new if new != old else None, chunks)

    def hunk(self, number: int) -> Chunk:
        lines = self.lines
        header = lines[self.i]
        chunk = Chunk(number=number, line=self.first_line + self.i)
        m = _HUNK.fullmatch(header)
        counts = None
        if m is not None:
            start, count = int(m.group(1)), m.group(2)
            chunk.hint = start if count == "0" else max(start - 1, 0)
            counts = (int(count or 1), int(m.group(4) or 1))
        elif _LOOSE_HUNK.fullmatch(header) is None:
            raise self.fail(f"{header!r} is not a hunk header.")
        self.i += 1
        counted = self.counted(counts) if counts is not None else None
        if counted is not None:
            chunk.lines, self.i = counted
        else:
            chunk.lines = self.uncounted()
        if not chunk.lines:
            raise self.fail(f"the hunk {header!r} has no lines.")
        return chunk

    def counted(self, counts: tuple[int, int]) -> tuple[list[tuple[LineOp, str]], int] | None:
        """The hunk's lines read by its header's counts, which settle lines such as
        "--- x" (a removed "-- x"); None when the counts do not fit the lines."""
        old_left, new_left = counts
        ops: list[tuple[LineOp, str]] = []
        i = self.i
        while old_left > 0 or new_left > 0:
            if i >= len(self.lines):
                return None
            line = self.lines[i]
            i += 1
            if line.startswith("\\"):
                continue
            op = line[:1] or " "
            if op == " ":
                old_left -= 1
                new_left -= 1
            elif op == "-":
                old_left -= 1
            elif op == "+":
                new_left -= 1
            else:
                return None
            ops.append((op, line[1:]))  # type: ignore[arg-type]
            if old_left < 0 or new_left < 0:
                return None
        while i < len(self.lines) and self.lines[i].startswith("\\"):
            i += 1
        if (
            i < len(self.lines)
            and self.lines[i][:1] in ("+", "-", " ")
            and not (self.lines[i].startswith("--- "))
        ):
            return None  # more hunk lines follow: the counts are wrong
        return ops, i

    def uncounted(self) -> list[tuple[LineOp, str]]:
        """The hunk's lines read by their prefixes (for headers with wrong counts)."""
        lines = self.lines
        ops: list[tuple[LineOp, str]] = []
        while self.i < len(lines):
            line = lines[self.i]
            if line.startswith("--- ") and self.i + 1 < len(lines):
                if lines[self.i + 1].startswith("+++ "):
                    break
            if line.startswith("\\"):
                self.i += 1  # "\ No newline at end of file"
                continue
            if line == "":
                ops.append((" ", ""))  # a context line whose space was trimmed
            elif line[0] in " -+":
                ops.append((line[0], line[1:]))  # type: ignore[arg-type]
            else:
                break
            self.i += 1
        while ops and ops[-1] == (" ", ""):
            ops.pop()  # blank lines between sections, not part of the hunk
        return ops
