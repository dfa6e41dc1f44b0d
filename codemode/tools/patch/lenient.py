"""Unwrapping what low-cost models put around a patch.

Before the lines are lexed: a patch escaped twice (one line with literal ``\\n``) is
unescaped; carriage returns are dropped; blank lines around the patch, markdown fences,
a shell heredoc (``apply_patch <<'EOF'`` ... ``EOF``, optionally after ``cd DIR &&``)
and prose before ``*** Begin Patch`` or after ``*** End Patch`` are removed. Only whole
lines at either end are dropped, so line numbers in error messages still point into the
text the model sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from codemode.tools.patch.heredoc import parse_heredoc_opener

_FENCES = ("```", "~~~")


@dataclass
class Unwrapped:
    lines: list[str]
    first_line: int  # 1-based number, in the original text, of lines[0]
    workdir: str | None  # the DIR of a ``cd DIR && apply_patch <<EOF`` wrapper


def unwrap(text: str) -> Unwrapped:
    """The patch's own lines, with the wrapping around them removed."""
    text = _unescape(text).replace("\r\n", "\n")
    lines = text.split("\n")
    lo, hi = _trim(lines, 0, len(lines))
    workdir = None
    changed = True
    while changed and lo < hi:
        changed = False
        first = lines[lo].strip()
        if first.startswith(_FENCES):
            lo += 1
            if hi > lo and lines[hi - 1].strip() in _FENCES:
                hi -= 1
            changed = True
        elif (opener := parse_heredoc_opener(lines[lo])) is not None:
            workdir, tag = opener
            lo += 1
            if hi > lo and lines[hi - 1].strip() == tag:
                hi -= 1
            changed = True
        elif hi - lo > 1 and lines[hi - 1].strip() in _FENCES:
            hi -= 1  # a closing fence whose opening fence sat in prose before the patch
            changed = True
        lo, hi = _trim(lines, lo, hi)

    begin = next((i for i in range(lo, hi) if _is(lines[i], "*** begin patch")), None)
    if begin is not None:
        lo = begin  # past any prose or fence before the patch
        end = next((i for i in range(hi - 1, lo, -1) if _is(lines[i], "*** end patch")), None)
        if end is not None:
            hi = end + 1  # and after it
    return Unwrapped(lines[lo:hi], lo + 1, workdir)


def _unescape(text: str) -> str:
    """A patch escaped once too often (a JSON string inside a JSON string arrives as one
    line with literal backslash-n sequences) is unescaped; nothing else is touched."""
    stripped = text.strip()
    if "\n" in stripped or "\\n" not in stripped or not stripped.startswith("*** Begin Patch"):
        return text
    try:
        decoded = json.loads(f'"{stripped}"')
    except ValueError:
        return stripped.replace("\\r\\n", "\n").replace("\\n", "\n")
    return decoded if isinstance(decoded, str) else text


def _is(line: str, marker: str) -> bool:
    return line.strip().lower() == marker


def _trim(lines: list[str], lo: int, hi: int) -> tuple[int, int]:
    while lo < hi and not lines[lo].strip():
        lo += 1
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    return lo, hi
