"""How ``env -S STRING`` (``--split-string``) splits its string into a command's words.

Its rules are env's own, not bash's: ``\\_`` separates words outside quotes (a space
inside double quotes), ``\\c`` ends the string, ``#`` at the start of a word begins a
comment, ``${NAME}`` is the variable's value (only known at run time) and ``$NAME`` is
an error. ``env -S 'rm\\_-rf\\_~'`` runs ``rm -rf ~``; bash would see one word.
"""

from __future__ import annotations

from codemode.sandbox.execpolicy.words import Word

_ESCAPES = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_SPACE = " \t\n\r\f\v"


def split(text: str) -> list[Word] | None:
    """The words env makes of ``text``; None when env would refuse it."""
    words: list[Word] = []
    current: list[str] = []
    dynamic = False
    started = False  # a word is open (also an empty quoted one: '')
    quote = ""
    i = 0

    def close() -> None:
        nonlocal current, dynamic, started
        if started:
            joined = "".join(current)
            words.append(Word(joined, "dynamic") if dynamic else Word(joined))
        current, dynamic, started = [], False, False

    while i < len(text):
        c = text[i]
        nxt = text[i + 1 : i + 2]
        if quote == "'":
            if c == "'":
                quote = ""
            elif c == "\\" and nxt in ("\\", "'"):
                current.append(nxt)
                i += 1
            else:
                current.append(c)
            i += 1
            continue
        if c == "\\":
            if not nxt:
                return None
            i += 2
            if nxt == "c":
                if quote:
                    return None  # env: \c must not appear in double quotes
                break
            if nxt == "_":
                if quote:
                    current.append(" ")
                else:
                    close()
                continue
            if nxt in _ESCAPES:
                current.append(_ESCAPES[nxt])
            elif nxt in "\\\"'#$ ":
                current.append(nxt)
            else:
                return None
            started = True
            continue
        if c == "$":
            end = text.find("}", i)
            if nxt != "{" or end == -1:
                return None
            current.append(text[i : end + 1])
            dynamic = started = True
            i = end + 1
            continue
        if quote == '"':
            if c == '"':
                quote = ""
            else:
                current.append(c)
            i += 1
            continue
        if c in "'\"":
            quote, started = c, True
        elif c in _SPACE:
            close()
        elif c == "#" and not started:
            break
        else:
            current.append(c)
            started = True
        i += 1
    if quote:
        return None
    close()
    return words
