"""Suggestions for what a person mistyped: a command name, a slash command, an option.

Kept out of cli.py (click commands only) and free of heavy imports: it runs before
any command does.
"""

from __future__ import annotations

from collections.abc import Iterable


def one_edit_apart(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with one letter added, removed, changed, or two
    neighbouring letters swapped (``sesions``/``sessions``, ``modle``/``model``)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return len(diff) == 2 and diff[1] == diff[0] + 1 and (
            a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    for i in range(len(long)):
        if long[:i] + long[i + 1 :] == short:
            return True
    return False


def near_names(word: str, names: Iterable[str]) -> list[str]:
    """The ``names`` one edit from ``word``, or starting with it, in their order."""
    return [n for n in names if n != word and (n.startswith(word) or one_edit_apart(word, n))]


def near_options(given: str, possibilities: Iterable[str]) -> list[str]:
    """Options close to a mistyped ``given``, compared without their dashes (which make
    every pair of long options look alike: ``--bogus`` is not near ``--jobs``)."""
    import difflib

    bare = given.lstrip("-")
    by_bare = {p.lstrip("-"): p for p in possibilities}
    close = [by_bare[n] for n in near_names(bare, by_bare)]
    close += [
        by_bare[n]
        for n in difflib.get_close_matches(bare, list(by_bare), n=3, cutoff=0.75)
        if by_bare[n] not in close
    ]
    return close
