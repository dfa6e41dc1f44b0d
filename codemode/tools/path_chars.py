"""Characters no path given to a file tool may hold, and how to name them.

A file name may legally hold any byte but ``/`` and NUL, but a name with a newline, a
carriage return, a terminal escape or a bidirectional override is a trap rather than a
file: it splits lines in ``git status``, in a patch header and in every log that
lists it, rewrites what a terminal shows, or makes one name look like another. A
hostile program would create such names to mislead the user reading the session, so
every path a tool is given (to read, write, list or search) is refused when it holds
one, with the character named (``path_problem``), before anything is touched.

Refused: the Unicode control characters (C0, DEL and C1, NUL and tab included), the
line and paragraph separators, and the bidirectional formatting characters.
"""

from __future__ import annotations

import unicodedata

# Characters worth calling by name in a refusal; the rest are named by code point.
_NAMES = {
    "\0": "a NUL character",
    "\t": "a tab",
    "\n": "a newline",
    "\r": "a carriage return",
    "\x1b": "an escape character",
    "\x7f": "a delete character",
    "\x85": "a next-line character",
    "\u2028": "a line separator",
    "\u2029": "a paragraph separator",
}
# Bidirectional embeddings, overrides, isolates and marks: they reorder what is shown.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _refused(char: str) -> bool:
    return char in _BIDI or unicodedata.category(char) in ("Cc", "Zl", "Zp")


def path_problem(path: str) -> str | None:
    """What is wrong with ``path`` as a file name a tool was given (``"it contains a
    newline (U+000A)"``), or None when nothing is."""
    if path.isprintable():  # the common case: no control, separator or format character
        return None
    for char in path:
        if _refused(char):
            kind = _NAMES.get(char)
            if kind is None:
                bidi = char in _BIDI
                kind = "a bidirectional formatting character" if bidi else "a control character"
            return f"it contains {kind} (U+{ord(char):04X})"
    return None


def refusal(path: str) -> str | None:
    """The whole refusal for ``path`` (``invalid path 'a\\nb': it contains a newline
    (U+000A); ...``), or None when the path is acceptable."""
    problem = path_problem(path)
    if problem is None:
        return None
    return (
        f"invalid path {path!r}: {problem}; paths with control characters, line "
        "separators or bidirectional formatting characters are refused"
    )
