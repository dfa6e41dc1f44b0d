"""The code in an unquoted here-document: its ``$(...)``, backquotes, ``${...}`` and
``$((...))``. The rest of the body is data, whatever quotes it holds (``price: $5 "x``);
bash expands only these parts, each as it would inside double quotes."""

from __future__ import annotations

_OPENERS = {"(": ")", "{": "}", "[": "]"}


def _closing(text: str, i: int, open_: str, close: str) -> int:
    """The index just past the ``close`` matching an ``open_`` before ``i``, skipping
    quoted text and escapes; the end of ``text`` when there is none."""
    depth = 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and open_ != "[":
            end = text.find("'", i + 1)
            i = len(text) if end == -1 else end + 1
            continue
        if c == '"':
            i = _closing_quote(text, i + 1)
            continue
        if c == "`":
            end = text.find("`", i + 1)
            i = len(text) if end == -1 else end + 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def _closing_quote(text: str, i: int) -> int:
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "$" and text[i + 1 : i + 2] in ("(", "{"):
            opener = text[i + 1]
            i = _closing(text, i + 2, opener, _OPENERS[opener])
        else:
            i += 1
    return len(text)


def code_parts(body: str) -> list[str]:
    """The expansions of an unquoted here-document's body that may run code."""
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2  # \$ \` \\ escape; any other backslash is kept, with what follows
            continue
        if c == "$" and body[i + 1 : i + 2] in _OPENERS:
            opener = body[i + 1]
            end = _closing(body, i + 2, opener, _OPENERS[opener])
            out.append(body[i:end])
            i = end
            continue
        if c == "`":
            end = i + 1
            while end < len(body) and body[end] != "`":
                end += 2 if body[end] == "\\" else 1
            out.append(body[i : end + 1])
            i = end + 1
            continue
        i += 1
    return out


def as_script(body: str) -> str | None:
    """A script that runs what the body's expansions run (None when there is none)."""
    parts = code_parts(body)
    return ": " + " ".join(f'"{p}"' for p in parts) if parts else None
