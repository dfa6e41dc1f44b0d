"""Description text as the model gets it: prose unwrapped, examples kept line by line.

Descriptions live in Markdown and TOML files, hard-wrapped for the people who edit them.
Joining those wrapped lines helps nobody, but joining the lines of an example destroys
it: a patch, a diff or a command transcript only means something line by line. So a
line is joined to the one before only when both are plain prose; anything that looks
like part of a block (indented, a list or diff marker, a patch header, a fence, a table
row, or inside a fenced block) keeps its own line.
"""

from __future__ import annotations

import re

# A line that starts one of these keeps its line: lists, diffs, patch markers, headings,
# quotes, tables, prompts, numbered steps.
_BLOCK_LINE = re.compile(r"^(\s|[-+*#>|$@`]|\d+[.)]\s|\*\*\* )")


def is_block_line(line: str) -> bool:
    """Whether ``line`` is part of an example or a list rather than wrapped prose."""
    return bool(_BLOCK_LINE.match(line))


def unwrap(text: str) -> str:
    """``text`` with the hard wraps of its prose paragraphs removed; every other line
    (blocks, lists, fenced code, blank lines) as it was."""
    out: list[str] = []
    fenced = False
    joinable = False  # whether the last line out is prose that may continue
    for raw in text.strip("\n").splitlines():
        line = raw.rstrip()
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append(line)
            joinable = False
            continue
        if fenced or not line or is_block_line(line):
            out.append(line)
            # A list item's wrapped continuation (an unindented prose line) joins it.
            joinable = not fenced and bool(line) and line[:2] in ("- ", "* ")
            continue
        if joinable and out:
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line)
        joinable = True
    return "\n".join(out)


def jsdoc(text: str, indent: str = "") -> str:
    """``text`` as a ``/** ... */`` comment at ``indent``: one line when it is one line,
    else one `` * `` line per line, so that examples keep their lines."""
    body = unwrap(text).replace("*/", "*\\/")  # glob examples like `**/*.py` would end it
    lines = body.splitlines() or [""]
    if len(lines) == 1:
        return f"{indent}/** {lines[0]} */"
    inner = "\n".join(f"{indent} * {line}".rstrip() for line in lines)
    return f"{indent}/**\n{inner}\n{indent} */"


# Words ending in a full stop that do not end a sentence ("e.g. a path", "vs. main").
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al approx incl esp resp viz no nos fig eq ca mr mrs ms dr st jr sr"
    " inc ltd co dept est min max sec".split()
)
_DOTTED = re.compile(r"(?:[a-z]{1,2}\.)+[a-z]{1,2}")  # "u.s", "a.m"
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+")


def first_sentence(description: str) -> str:
    """The description's first sentence: cut at a full stop followed by a space, except
    after an abbreviation, an initial ("J. Smith") or before a lowercase word."""
    text = " ".join(description.split())
    for end in _SENTENCE_END.finditer(text):
        before = text[: end.start() + 1]
        word = re.search(r"(\S+)$", before)
        token = (word.group(1) if word else "").rstrip(".").lstrip("(\"'").lower()
        if text[end.start()] == "." and (
            token in _ABBREVIATIONS or len(token) == 1 or _DOTTED.fullmatch(token)
        ):
            continue  # "e.g.", "i.e.", "U.S.", "J." - an abbreviation, not the end
        following = text[end.end() : end.end() + 1]
        if following and following.islower():
            continue  # "see the docs. then" reads as one sentence a model would cut badly
        return text[: end.end()].rstrip()
    return text
