"""Applying an update's chunks to a file's text, in memory.

A line ends at ``\r\n``, ``\n`` or a lone ``\r`` (as Codex reads a file). Lines keep
their own endings: lines the patch does not touch are copied from the file, so a CRLF
file stays CRLF and a file with mixed endings keeps each line's. A line the patch adds
or rewrites takes the file's first line ending (Codex's rule, as rustfmt and Ruff
choose a file's style), LF in a file without one. A UTF-8 byte order mark is kept. The
result always ends with a line ending.

Chunks apply in order: each is sought from where the previous one ended (after its
``@@`` anchors, if it has any). Two slips are forgiven: an anchor that is also the
chunk's first context line, and blank context lines at a chunk's edges that the file
does not have. A chunk found only before the previous one is accepted when it does not
overlap an earlier chunk.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass, field

from codemode.tools.patch.errors import quote_lines
from codemode.tools.patch.matching import Matcher, closest_region, normalize
from codemode.tools.patch.model import Chunk, LineOp

BOM = "\ufeff"
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass
class Edit:
    """Old lines ``start`` to ``start + len(old)`` replaced by ``new`` (all with endings)."""

    start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)  # the new lines' text, before endings
    chunk: int = 0


@dataclass
class EditedText:
    old_lines: list[str]
    new_lines: list[str]
    edits: list[Edit]
    text: str


class ChunkProblems(Exception):
    """The chunks that did not apply, one paragraph each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n\n".join(problems))
        self.problems = problems


def split_lines(text: str) -> list[str]:
    """Lines with their endings: ``\\r\\n``, ``\\n`` or a lone ``\\r``."""
    return _LINE.findall(text)


def ending(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\n", "\r")):
        return line[-1]
    return ""


def first_ending(lines: list[str]) -> str:
    """The file's own line ending: that of its first line (LF when it has none)."""
    return ending(lines[0]) if lines and ending(lines[0]) else "\n"


def apply_chunks(text: str, chunks: list[Chunk], shown: str) -> EditedText:
    """The file's new text after ``chunks``; raises ChunkProblems naming every chunk
    that does not apply."""
    bom = text.startswith(BOM)
    if bom:
        text = text[1:]
    lines = split_lines(text)
    keys = [line[: len(line) - len(ending(line))] for line in lines]
    matcher = Matcher(keys)
    edits: list[Edit] = []
    claimed: list[tuple[int, int]] = []
    problems: list[str] = []
    cursor = 0
    for chunk in chunks:
        label = f"{shown}, chunk {chunk.number} (patch line {chunk.line})"
        anchor_at = None
        missing = None
        for anchor in chunk.anchors:
            start = cursor if anchor_at is None else anchor_at + 1
            found_at = matcher.find([anchor], start)
            if found_at is None and anchor_at is None:
                found_at = matcher.find([anchor], 0)  # chunks out of order
            if found_at is None:
                missing = anchor
                break
            anchor_at = found_at
        if missing is not None:
            problems.append(_anchor_problem(label, missing, matcher))
            continue
        if not chunk.old_lines:
            at = len(keys)
            if not chunk.at_end and anchor_at is not None:
                at = anchor_at + 1
            elif not chunk.at_end and chunk.hint is not None:
                at = min(chunk.hint, len(keys))
            added = [text for _, text in chunk.lines]
            edits.append(Edit(at, added=added, chunk=chunk.number))
            continue
        found = _locate(matcher, chunk, cursor, anchor_at, claimed)
        if found is None:
            problems.append(_mismatch_problem(label, chunk, matcher, anchor_at))
            continue
        pos, ops = found
        length = sum(1 for op, _ in ops if op != "+")
        claimed.append((pos, pos + length))
        cursor = max(cursor, pos + length)
        edits.extend(_edits(ops, pos, lines, chunk.number))
    edits.sort(key=lambda e: (e.start, len(e.old)))
    problems.extend(_overlaps(edits, shown))
    if problems:
        raise ChunkProblems(problems)
    _ensure_final_newline(lines, edits)
    new_lines = _build(lines, edits, first_ending(lines))
    return EditedText(lines, new_lines, edits, (BOM if bom else "") + "".join(new_lines))


def _locate(
    matcher: Matcher,
    chunk: Chunk,
    cursor: int,
    anchor_at: int | None,
    claimed: list[tuple[int, int]],
) -> tuple[int, list[tuple[LineOp, str]]] | None:
    """Where the chunk applies, and its lines (possibly without blank edges)."""
    for ops in _variants(chunk.lines):
        pattern = [text for op, text in ops if op != "+"]
        if not pattern:
            continue
        starts = [cursor] if anchor_at is None else [anchor_at + 1, anchor_at]
        if not chunk.at_end:
            starts.append(0)  # out of order: accepted below only if it overlaps nothing
        for start in starts:
            pos = matcher.find(pattern, start, at_end=chunk.at_end, near=chunk.hint)
            if pos is not None and not _overlapping(pos, pos + len(pattern), claimed):
                return pos, ops
    return None


def _variants(ops: list[tuple[LineOp, str]]) -> list[list[tuple[LineOp, str]]]:
    """The chunk's lines as given, then without blank context lines at either edge."""
    lo, hi = 0, len(ops)
    while lo < hi and ops[lo] == (" ", ""):
        lo += 1
    while hi > lo and ops[hi - 1] == (" ", ""):
        hi -= 1
    trimmed = ops[lo:hi]
    return [ops] if len(trimmed) == len(ops) else [ops, trimmed]


def _overlapping(start: int, end: int, claimed: list[tuple[int, int]]) -> bool:
    return any(start < c_end and c_start < end for c_start, c_end in claimed)


def _edits(ops: list[tuple[LineOp, str]], pos: int, lines: list[str], number: int) -> list[Edit]:
    edits: list[Edit] = []
    current: Edit | None = None
    i = pos
    for op, text in ops:
        if op == " ":
            current = None
            i += 1
            continue
        if current is None:
            current = Edit(i, chunk=number)
            edits.append(current)
        if op == "-":
            current.old.append(lines[i])
            i += 1
        else:
            current.added.append(text)
    return edits


def _overlaps(edits: list[Edit], shown: str) -> list[str]:
    problems = []
    for before, after in itertools.pairwise(edits):
        if after.start < before.start + len(before.old):
            problems.append(
                f"{shown}: chunks {before.chunk} and {after.chunk} change the same lines "
                f"(around line {after.start + 1}); merge them into one chunk."
            )
    return problems


def _ensure_final_newline(lines: list[str], edits: list[Edit]) -> None:
    """An updated file ends with a line ending: if the last line has none and no edit
    replaces it, an edit adds one."""
    if not lines or ending(lines[-1]):
        return
    last = len(lines) - 1
    if any(e.start <= last < e.start + len(e.old) for e in edits):
        return
    fix = Edit(last, old=[lines[last]], added=[lines[last]])
    index = next((k for k, e in enumerate(edits) if (e.start, len(e.old)) > (last, 1)), len(edits))
    edits.insert(index, fix)


def _build(lines: list[str], edits: list[Edit], eol: str) -> list[str]:
    """The new lines; ``eol`` ends every line an edit writes."""
    out: list[str] = []
    cursor = 0
    for e in edits:
        out.extend(lines[cursor : e.start])
        e.new = [text + eol for text in e.added]
        out.extend(e.new)
        cursor = e.start + len(e.old)
    out.extend(lines[cursor:])
    return out


def _anchor_problem(label: str, anchor: str, matcher: Matcher) -> str:
    message = f"{label}: the '@@ {anchor}' line was not found in the file."
    norm = matcher.normalized()
    known = [text for text in dict.fromkeys(norm) if text][:20_000]
    close = difflib.get_close_matches(normalize(anchor), known, n=3, cutoff=0.6)
    if close:
        shown = []
        for text in close:
            i = norm.index(text)
            shown.append(f"{i + 1:>5} | {matcher.lines[i]}")
        message += "\nLines that look like it:\n" + "\n".join(shown)
    return message


def _mismatch_problem(label: str, chunk: Chunk, matcher: Matcher, anchor_at: int | None) -> str:
    expected = chunk.old_lines
    where = ""
    if anchor_at is not None:
        where = f" after line {anchor_at + 1} ('@@ {chunk.anchors[-1]}')"
    if chunk.at_end:
        where += " at the end of the file ('*** End of File')"
    message = f"{label}: these lines were not found{where}:\n{quote_lines(expected)}"
    region = closest_region(matcher, expected)
    if region is None:
        return message + "\nNothing in the file resembles them."
    start, length = region
    end = start + length
    lines = f"line {end}" if length == 1 else f"lines {start + 1}-{end}"
    return (
        f"{message}\nThe closest text in the file, {lines}:\n"
        f"{quote_lines(matcher.lines[start:end], first_number=start + 1)}"
    )
