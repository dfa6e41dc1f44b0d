"""Shell words as bash would see them after quote removal, or marked as unknowable.

A word is *literal* when its value is fixed by the text alone (quotes and backslashes
removed, ``~`` expanded). A word holding an unquoted ``*``, ``?`` or ``[`` is a *glob*:
bash may replace it with file names. A word holding an expansion, a command
substitution or a brace expansion is *dynamic*: only running the script would tell its
value, and when the expansion is unquoted it may even become several words (``splits``).
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from typing import Literal

WordKind = Literal["literal", "glob", "dynamic"]

_DIR_TILDE = re.compile(r"~(?:[+-]\d*|\d+)")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


@dataclass(frozen=True)
class Word:
    """One word of a simple command."""

    text: str  # the unquoted value when literal; otherwise the text as written
    kind: WordKind = "literal"
    splits: bool = False  # an unquoted expansion: may become zero or several words
    braces: tuple[str, ...] = ()  # a brace expansion without other expansions: its words

    @property
    def literal(self) -> bool:
        return self.kind == "literal"

    @classmethod
    def of(cls, text: str) -> Word:
        return cls(text)


def base_name(word: Word) -> str:
    """The program a literal command name runs, without its folder (else "")."""
    return os.path.basename(word.text) if word.literal else ""


# Characters with the flag saying whether they were quoted (quoted ones never glob).
_Chars = list[tuple[str, bool]]


def _unescape_unquoted(text: str) -> _Chars:
    out: _Chars = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":  # a line continuation disappears altogether
                out.append((text[i + 1], True))
            i += 2
            continue
        out.append((c, False))
        i += 1
    return out


def unescape_double_quoted(text: str) -> str:
    """Inside double quotes a backslash only escapes ``$ ` " \\`` and a newline."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def decode_ansi_c(body: str) -> str:
    """The value of ``$'...'`` given the text between the quotes."""
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[n])
            i += 2
        elif n in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[n]
            m = re.match(rf"[0-9a-fA-F]{{1,{width}}}", body[i + 2 :])
            if m:
                out.append(chr(int(m.group(), 16)))
                i += 2 + len(m.group())
            else:
                out.append("\\" + n)
                i += 2
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert m is not None
            out.append(chr(int(m.group(), 8) & 0xFF))
            i += 1 + len(m.group())
        elif n == "c" and i + 2 < len(body):
            out.append(chr(ord(body[i + 2]) & 0x1F))
            i += 3
        else:
            out.append("\\" + n)
            i += 2
    return "".join(out)


def finish(chars: _Chars, *, dynamic: bool, splits: bool, source: str) -> Word:
    """Turn characters collected from a word's parts into a Word."""
    if dynamic:
        return Word(source, "dynamic", splits)
    unquoted = "".join(c if not q else "\0" for c, q in chars)
    if _BRACE.search(unquoted):
        return Word(source, "dynamic", True, tuple(brace_expand(chars)))
    text = "".join(c for c, _ in chars)
    if chars and chars[0] == ("~", False):
        # Tilde expansion applies up to the first slash, when that part is unquoted.
        head, sep, rest = text.partition("/")
        quoted_head = any(q for c, q in chars[: len(head)])
        if not quoted_head and _DIR_TILDE.fullmatch(head):
            # ~+ is $PWD, ~- $OLDPWD, ~N / ~+N / ~-N the directory stack: run-time values
            return Word(source, "dynamic")
        if not quoted_head:
            expanded = os.path.expanduser(head)
            if expanded != head:
                text = expanded + sep + rest
    if any(c in "*?[" for c, q in chars if not q):
        return Word(text, "glob")
    return Word(text)


def unquoted_chars(text: str) -> _Chars:
    """The characters of an unquoted word's text, escapes resolved."""
    return _unescape_unquoted(text)


_MAX_BRACE_WORDS = 256
_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?\Z")


def brace_expand(chars: _Chars) -> list[str]:
    """The words bash's brace expansion makes of a word (quoted braces stay as they are);
    empty when there would be more than a few hundred."""
    out: list[str] = []

    def walk(cs: _Chars) -> bool:
        for i, (c, q) in enumerate(cs):
            if c != "{" or q:
                continue
            depth, commas, end = 0, [], None
            for j in range(i, len(cs)):
                cj, qj = cs[j]
                if qj:
                    continue
                if cj == "{":
                    depth += 1
                elif cj == "}":
                    depth -= 1
                    if depth == 0:
                        end = j
                        break
                elif cj == "," and depth == 1:
                    commas.append(j)
            if end is None:
                continue
            head, body, tail = cs[:i], cs[i + 1 : end], cs[end + 1 :]
            if commas:
                cuts = [i, *commas, end]
                alts = [cs[a + 1 : b] for a, b in itertools.pairwise(cuts)]
            else:
                m = _SEQUENCE.match("".join(c for c, _ in body))
                if m is None or any(q for _, q in body):
                    continue
                alts = [[(x, True)] for x in _sequence(m)]
                if not alts:
                    return False
            return all(walk(head + alt + tail) for alt in alts)
        if len(out) >= _MAX_BRACE_WORDS:
            return False
        out.append("".join(c for c, _ in cs))
        return True

    return out if walk(list(chars)) else []


def _sequence(m: re.Match[str]) -> list[str]:
    a, b, step = m.group(1), m.group(2), abs(int(m.group(3) or 1)) or 1
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        x, y = int(a), int(b)
        rng = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        return [str(v) for v in rng][: _MAX_BRACE_WORDS + 1]
    if a.isalpha() and b.isalpha():
        x, y = ord(a), ord(b)
        rng = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        return [chr(v) for v in rng]
    return []
