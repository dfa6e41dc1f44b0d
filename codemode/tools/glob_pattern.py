"""Glob patterns as ``glob`` (and grep's ``glob`` filter) read them, compiled to RE2."""

from __future__ import annotations

import re
from typing import Any

from codemode.tool_terms.errors import ToolError

_MAGIC = frozenset("*?[{")


def compile_glob(pattern: str) -> Any:
    """Compile a glob to a regex to be ``fullmatch``-ed against a posix relative path.

    ``*`` and ``?`` stay within one path segment, ``[abc]``/``[!abc]`` are character
    classes, ``{a,b}`` picks one of a few alternatives, and a ``**`` segment spans zero
    or more directories, so ``**/*.py`` also matches ``setup.py`` at the top. The regex
    is RE2's: with Python's, ``*a*a*a*a*a*a*a*a*c`` took minutes on a 40-character name.
    Raises ToolError for a glob that does not compile.
    """
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    parts = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_translate_segment(seg) + ("" if last else "/"))
    import re2  # lazy: RE2 loads with the first search

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile("".join(parts), options)
    except re2.error:
        raise ToolError(f"invalid glob {pattern!r}") from None


def _translate_segment(seg: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := _class_end(seg, i)) != -1:
            body = seg[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end
        elif c == "{" and (end := seg.find("}", i)) != -1:
            choices = seg[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_translate_segment(a) for a in choices) + ")")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _class_end(seg: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start``, or -1 if unclosed."""
    j = start + 1
    if seg[j : j + 1] in ("!", "^"):
        j += 1
    # A "]" first in the class is a literal member, as in shell globs.
    if seg[j : j + 1] == "]":
        j += 1
    return seg.find("]", j)


def split_literal_prefix(pattern: str) -> tuple[str, str]:
    """Split ``src/lib/*.ts`` into ``("src/lib", "*.ts")`` so the walk can start lower."""
    segments = pattern.split("/")
    n = 0
    while n < len(segments) - 1 and segments[n] != "**" and not _MAGIC.intersection(segments[n]):
        n += 1
    prefix = "/".join(segments[:n])
    if not prefix and pattern.startswith("/"):
        prefix = "/"  # an absolute pattern such as "/*.conf" starts at the filesystem root
    return prefix, "/".join(segments[n:])


def pattern_depth(pattern: str) -> int | None:
    """How many components deep a path matching ``pattern`` is, None when ``**`` makes
    it any depth (``*`` and the other wildcards never cross a ``/``)."""
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    return None if "**" in segments else len(segments)
