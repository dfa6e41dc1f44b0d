"""A shell word as a pattern of the paths it may name, for the checks of what a command
reads (``secret_reads``): known characters, a glob's ``*``, ``?`` and ``[...]`` (within
one path component), and expansions only known at run time (any text, slashes too).
A dynamic word is read from its text as written: quotes removed, ``$'...'`` decoded,
``$x``, ``${...}``, ``$(...)``, backquotes and ``<(...)`` each an unknown."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from codemode.sandbox.execpolicy.words import Word, decode_ansi_c

# Tokens: ("c", char) a known character, ("*",) / ("?",) / ("[", class) a glob's,
# ("$",) an expansion: any text at all.
Token = tuple[str, ...]
DYN: Token = ("$",)


_DIR_TILDE = re.compile(r"~(?:[+-]\d*|\d+)(?=/|$)")
_MAX_CLASS = 1024


def _glob_at(text: str, i: int) -> tuple[Token, int]:
    """The glob token at ``text[i]`` and the index after it."""
    c = text[i]
    if c in "*?":
        return (c,), i + 1
    if c != "[":
        return ("c", c), i + 1
    j = i + 2 if text[i + 1 : i + 2] in ("!", "^") else i + 1
    j += 1 if text[j : j + 1] == "]" else 0  # a leading ] is one of the characters
    close = text.find("]", j)
    if close == -1:
        return ("c", c), i + 1  # no class: a plain [
    if not any(m in text[j:close] for m in ("[:", "[=", "[.")):
        body = text[i + 1 : close]
        return ("[", "^" + body[1:] if body[:1] in ("!", "^") else body), close + 1
    limit = min(len(text), i + _MAX_CLASS)
    while j < limit and text[j] != "]":
        if text[j : j + 2] in ("[:", "[=", "[."):  # [:digit:], [=a=], [.x.]
            end = text.find(text[j + 1] + "]", j + 2, limit)
            if end == -1:
                break
            j = end + 2
            continue
        j += 1
    if j < limit and text[j] == "]":
        return ("[", "[:any:]"), j + 1  # a class with a [:name:] in it: any one character
    return ("?",), i + 1  # cannot tell where the class ends: any one character


def glob_tokens(text: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(text):
        token, i = _glob_at(text, i)
        out.append(token)
    return out


def _closing(text: str, i: int, open_: str, close: str) -> int:
    """The index just past the bracket closing the one opened before ``i`` (skipping
    quoted text); the end of ``text`` when there is none."""
    depth = 1
    while i < len(text) and depth:
        c = text[i]
        if c == "\\":
            i += 1
        elif c == "'":
            i = text.find("'", i + 1) if text.find("'", i + 1) != -1 else len(text)
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
        i += 1
    return i


def _source_tokens(text: str, *, quoted: bool = False) -> list[Token]:
    """The tokens of a word as written (a dynamic word's text)."""
    out: list[Token] = []
    i = 0
    tilde = None if quoted else _DIR_TILDE.match(text)
    if tilde is not None:  # ~+ ($PWD), ~- ($OLDPWD), ~N (the directory stack)
        out.append(DYN)
        i = tilde.end()
    while i < len(text):
        c = text[i]
        nxt = text[i + 1 : i + 2]
        if c == "\\" and nxt:
            out.append(("c", nxt))
            i += 2
        elif c == "'" and not quoted:
            end = text.find("'", i + 1)
            end = len(text) if end == -1 else end
            out += [("c", ch) for ch in text[i + 1 : end]]
            i = end + 1
        elif c == "$" and nxt == "'" and not quoted:
            end = i + 2
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            out += [("c", ch) for ch in decode_ansi_c(text[i + 2 : end])]
            i = end + 1
        elif c == '"' and not quoted:
            end = i + 1
            while end < len(text) and text[end] != '"':
                if text[end] == "\\":
                    end += 1
                elif text[end] == "$" and text[end + 1 : end + 2] in ("(", "{"):
                    opener = text[end + 1]
                    end = _closing(text, end + 2, opener, ")" if opener == "(" else "}") - 1
                elif text[end] == "`":
                    found = text.find("`", end + 1)
                    end = len(text) if found == -1 else found
                end += 1
            out += _source_tokens(text[i + 1 : end], quoted=True)
            i = end + 1
        elif c == "$" and nxt in ("(", "{"):
            i = _closing(text, i + 2, nxt, ")" if nxt == "(" else "}")
            out.append(DYN)
        elif c == "$" and nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[i + 1 :])
            i += 1 + (len(m.group()) if m else 1)
            out.append(DYN)
        elif c == "`":
            end = text.find("`", i + 1)
            i = len(text) if end == -1 else end + 1
            out.append(DYN)
        elif c in "<>" and nxt == "(":
            i = _closing(text, i + 2, "(", ")")
            out.append(DYN)
        elif not quoted and c in "*?[":
            token, i = _glob_at(text, i)
            out.append(token)
        else:
            out.append(("c", c))
            i += 1
    return out


def forms(word: Word) -> list[list[Token]]:
    """Each form the word may take."""
    if word.literal:
        return [[("c", c) for c in word.text]]
    if word.kind == "glob":
        return [glob_tokens(word.text)]
    if word.braces:
        return [glob_tokens(b) for b in word.braces]
    return [_source_tokens(word.text)]


def path_parts(tokens: list[Token]) -> Iterable[list[Token]]:
    """The word, and what follows its first ``=`` (``--file=PATH``) or, for an option,
    its first ``/`` (``-f/PATH``)."""
    yield tokens
    for i, t in enumerate(tokens):
        if t == ("c", "="):
            yield tokens[i + 1 :]
            break
    if tokens[:1] == [("c", "-")]:
        for i, t in enumerate(tokens):
            if t == ("c", "/"):
                yield tokens[i:]
                break


def known(tokens: Sequence[Token]) -> int:
    return sum(1 for t in tokens if t[0] == "c")


def regex(tokens: Sequence[Token]) -> re.Pattern[str]:
    out = []
    for t in tokens:
        if t[0] == "c":
            out.append(re.escape(t[1]))
        elif t[0] == "*":
            out.append("[^/]*")
        elif t[0] == "?":
            out.append("[^/]")
        elif t[0] == "[" and "[" in t[1]:
            out.append("[^/]")  # a character class ([:digit:]): any one character
        elif t[0] == "[":
            out.append("[" + t[1].replace("\\", "\\\\").replace("[", "\\[") + "]")
        else:
            out.append(".*")
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error:
        return re.compile(".*", re.DOTALL)  # a class re cannot read: assume the worst
