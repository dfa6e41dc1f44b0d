"""Finding a chunk's lines in a file.

Comparisons, loosest last: exact; ignoring trailing whitespace; ignoring leading and
trailing whitespace; and also reading typographic punctuation (dashes, curly quotes,
non-breaking spaces, see ``punctuation.json``) as ASCII and a patch's undecodable bytes
as the Latin-1 characters a file that is not UTF-8 is read as.
The first comparison that finds the lines anywhere after the start position wins, so an
exact match is never passed over for a loose one.

``closest_region`` is for error messages: the part of the file that looks most like
what the chunk expected, so the model can see what it got wrong.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from functools import cache
from importlib.resources import files


@cache
def _punctuation_table() -> dict[int, str]:
    raw = json.loads(files("codemode.tools.patch").joinpath("punctuation.json").read_text("utf-8"))
    table = {
        ord(char): ascii_text
        for ascii_text, chars in raw.items()
        if not ascii_text.startswith("_")
        for char in chars
    }
    # A patch read from a file or stdin holds bytes that are not UTF-8 as surrogate
    # escapes; the file they patch was read as Latin-1, where the byte is that character.
    table.update({code: chr(code - 0xDC00) for code in range(0xDC80, 0xDD00)})
    return table


def normalize(text: str) -> str:
    """The loosest form of a line: typographic punctuation as ASCII, whitespace trimmed."""
    return text.translate(_punctuation_table()).strip()


_COMPARISONS: list[Callable[[str], str]] = [str.rstrip, str.strip, normalize]


class Matcher:
    """Searches one file's lines (without line endings) for chunks of lines."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._forms: list[list[str] | None] = [lines] + [None] * len(_COMPARISONS)

    def form(self, level: int) -> list[str]:
        """The file's lines as comparison ``level`` sees them (computed once)."""
        lines = self._forms[level]
        if lines is None:
            lines = self._forms[level] = list(map(_COMPARISONS[level - 1], self.lines))
        return lines

    def normalized(self) -> list[str]:
        """The file's lines in the loosest form (see ``normalize``)."""
        return self.form(len(_COMPARISONS))

    def find(
        self, pattern: list[str], start: int, *, at_end: bool = False, near: int | None = None
    ) -> int | None:
        """Index of the first place at or after ``start`` where ``pattern`` appears.

        ``at_end``: only where it would end the file. ``near``: an index to try first
        (from a unified-diff header); the search from ``start`` follows if it fails.
        """
        if not pattern:
            return start
        for level in range(len(self._forms)):
            hay = self.form(level)
            pat = pattern if level == 0 else list(map(_COMPARISONS[level - 1], pattern))
            found = _search(hay, pat, start, at_end, near)
            if found is not None:
                return found
        return None


def _search(
    hay: list[str], pat: list[str], start: int, at_end: bool, near: int | None
) -> int | None:
    n = len(pat)
    last = len(hay) - n
    if last < 0:
        return None
    if at_end:
        return last if hay[last:] == pat else None
    if near is not None and start <= near <= last and hay[near : near + n] == pat:
        return near
    first = pat[0]
    i = max(start, 0)
    while i <= last:
        try:
            i = hay.index(first, i, last + 1)
        except ValueError:
            return None
        if hay[i : i + n] == pat:
            return i
        i += 1
    return None


# Past this many lines of file, the error-message search samples candidate positions
# from matching lines only (the exact search above has no such limit).
_MAX_CANDIDATES = 2000
# The most distinct lines compared one by one for similarity (difflib is slow).
_MAX_SIMILAR = 20_000


def closest_region(matcher: Matcher, pattern: list[str]) -> tuple[int, int] | None:
    """(start, length) of the region of ``matcher``'s file most like ``pattern``, or
    None if nothing in the file resembles it."""
    lines = matcher.lines
    if not lines or not pattern:
        return None
    norm_file = matcher.normalized()
    norm_pat = [normalize(line) for line in pattern]
    where: dict[str, list[int]] = {}
    for i, text in enumerate(norm_file):
        if text:
            where.setdefault(text, []).append(i)
    candidates: set[int] = set()
    for j, text in enumerate(norm_pat):
        for i in where.get(text, [])[:_MAX_CANDIDATES]:
            candidates.add(i - j)
    if not candidates:
        # No line matches even loosely: look for lines that are merely similar.
        keys = list(where)[:_MAX_SIMILAR]
        for j, text in enumerate(norm_pat):
            if not text:
                continue
            for close in difflib.get_close_matches(text, keys, n=3, cutoff=0.6):
                candidates.update(i - j for i in where[close][:50])
            if len(candidates) >= 50:
                break
    if not candidates:
        return None
    n = len(pattern)
    span = min(n, len(lines))
    best: tuple[float, int] | None = None
    starts = sorted({min(max(c, 0), len(lines) - span) for c in candidates})
    scored = []
    for s in starts:
        window = norm_file[s : s + span]
        equal = sum(1 for a, b in zip(window, norm_pat, strict=False) if a == b)
        scored.append((equal, s))
    scored.sort(key=lambda item: (-item[0], item[1]))
    target = "\n".join(norm_pat)
    for _, s in scored[:20]:
        ratio = difflib.SequenceMatcher(None, "\n".join(norm_file[s : s + span]), target).ratio()
        if best is None or ratio > best[0]:
            best = (ratio, s)
    if best is None or best[0] < 0.3:
        return None
    return best[1], span
